"""The real things the schemathesis run acts on, made in a fresh hub before it starts.

    python3 fixtures.py BASE_URL TOKEN FIXTURE_SHELL

Prints one `NAME=ID` line each; run.sh exports them and schemathesis.toml names them in the
operations that act on one (`path.id`, `body.session_id`). Nothing here runs a program a
request chose: the sessions run `fixture-shell.sh` (it runs nothing) and `sh -c 'echo ...'`,
the tasks `echo` and `sleep`.

- AGENT_HUB_ST_SESSION: a live session (label `st-fixture`, owner agent `st-agent`, owner
  session `st-owner`) for the operations that type, talk, resize, render, stream or report.
- AGENT_HUB_ST_EXITED: a session whose program has exited, for the operations that may wait
  for output or for a state (`read`, `state`): on a live one a valid request may wait up to
  60 s or 600 s, on an exited one it answers at once.
- AGENT_HUB_ST_KILLED, AGENT_HUB_ST_SIGNALLED: live sessions of their own for `kill` and
  `signal`, which end them.
- AGENT_HUB_ST_TASK: a finished task (a wait for it answers at once).
- AGENT_HUB_ST_CANCELLED: a running task of its own for `cancel`, which ends it (and leaves it
  listed: on the task the others use, the run would take the cancel for a removal).
"""

import json
import sys
import time
import urllib.error
import urllib.request


def call(base, token, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.load(reply)
    except urllib.error.HTTPError as e:
        sys.exit(f"fixtures.py: {method} {path} answered {e.code}: {e.read().decode()}")


def main():
    base, token, shell = sys.argv[1:4]
    api = lambda method, path, body=None: call(base, token, method, path, body)  # noqa: E731

    def session(args, **owner):
        body = {"backend": "pty", "shell": "sh", "args": args, **owner}
        return api("POST", "/v1/pty/sessions", body)["session_id"]

    ids = {
        "AGENT_HUB_ST_SESSION": session(
            [shell], label="st-fixture", owner_agent_id="st-agent", owner_session_id="st-owner"
        ),
        "AGENT_HUB_ST_KILLED": session([shell]),
        "AGENT_HUB_ST_SIGNALLED": session([shell]),
        "AGENT_HUB_ST_EXITED": session(["-c", "echo fixture output"]),
    }
    task = api("POST", "/v1/tasks", {"cmd": "echo fixture task", "pty": False})
    ids["AGENT_HUB_ST_TASK"] = task["taskId"]
    ids["AGENT_HUB_ST_CANCELLED"] = api("POST", "/v1/tasks", {"cmd": "sleep 600"})["taskId"]
    deadline = time.monotonic() + 10
    exited = ids["AGENT_HUB_ST_EXITED"]
    while api("GET", f"/v1/pty/sessions/{exited}")["session"]["alive"]:
        if time.monotonic() > deadline:
            sys.exit(f"fixtures.py: session {exited} did not exit within 10 s")
        time.sleep(0.05)
    for name, value in ids.items():
        print(f"{name}={value}")


if __name__ == "__main__":
    main()
