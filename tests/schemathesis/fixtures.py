"""The real things the schemathesis run acts on, made in a fresh hub before it starts.

    python3 fixtures.py agents DIR IMAGE FIXTURE_SHELL
    python3 fixtures.py BASE_URL TOKEN FIXTURE_SHELL [--agents]

The first form runs before the hub: it makes a git repository in DIR (the agents' workspaces)
and prints the `[[agents]]` of the hub's hub.toml (run.sh writes it only where a Docker engine
and the test image are). The second makes the sessions and tasks, starts the agents with
`--agents`, and prints one `NAME=ID` line each; run.sh exports them and schemathesis.toml names
them in the operations that act on one (`path.id`, `body.session_id`); it names the agents by
their ids below. Nothing here runs a program a request chose: the sessions and the agents run
`fixture-shell.sh` (it runs nothing) and `sh -c 'echo ...'`, the tasks `echo` and `sleep`.

- AGENT_HUB_ST_SESSION: a live session for the operations that type, talk, resize, render,
  stream or report; without the agents, also the session the routing keys name (label
  `st-fixture`, owner agent `st-agent`, owner session `st-owner`).
- AGENT_HUB_ST_EXITED: a session whose program has exited, for the operations that may wait
  for output or for a state (`read`, `state`): on a live one a valid request may wait up to
  60 s or 600 s, on an exited one it answers at once.
- AGENT_HUB_ST_KILLED, AGENT_HUB_ST_SIGNALLED: live sessions of their own for `kill` and
  `signal`, which end them.
- AGENT_HUB_ST_TASK: a finished task (a wait for it answers at once).
- AGENT_HUB_ST_CANCELLED: a running task of its own for `cancel`, which ends it (and leaves it
  listed: on the task the others use, the run would take the cancel for a removal).
- AGENT_HUB_ST_REGISTERED: an external session for `unregister`: the live session, registered
  again under the id `st-registered` with the hub itself as its bridge (`bridge_url` the hub's
  URL, `bridge_token` the owner's token). A bridge lends only the sessions it owns, so the hub
  reads the live session through its own bridge API and nothing loops.

`DELETE /v1/pty/reset` forgets the exited sessions (AGENT_HUB_ST_EXITED, and the killed and
signalled ones once they have ended) and unregisters the external ones, and `unregister`
removes AGENT_HUB_ST_REGISTERED: hooks.py makes them again (`exited_session`, `session`,
`register`) before a request that names one the hub no longer has.

The container agents (each runs the fixture shell in the test image, with no network and no
access to the hub; `stop_grace` and `ready_timeout` are short so the run stays short):

- `st-agent`: running, with a workspace, for the operations that read it, report its state and
  take its hooks; and the session the routing keys name (`resolve`, `send_line_to_agent`): its
  own id, and the label and owner session its owner gives it here. Only one session has them,
  as a session matches when any key given matches: keys that name two would be refused as
  ambiguous.
- `st-started`: never started here, for `start` (its first start is a real one, the later ones
  find it running).
- `st-stopped`, `st-restarted`: running, each of its own for `stop` and `restart` (a stop on
  `st-agent` would turn every later call on it into a 409).
- `st-ws`: started once (which makes its checkout) and stopped, with a workspace, for
  `DELETE .../workspace` (refused while an agent runs). A removal is for good, so hooks.py
  gives it a checkout again (`restore_workspace`: a start and a stop) before each request
  that finds none.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

# The agents of the run, by id: whether it has a workspace, and whether it is started first.
AGENTS = {
    "st-agent": {"workspace": True, "start": True},
    "st-started": {"workspace": False, "start": False},
    "st-stopped": {"workspace": False, "start": True},
    "st-restarted": {"workspace": False, "start": True},
    "st-ws": {"workspace": True, "start": True},
    # Never started: its budget (its policy's, run.sh) is what the budget operations change.
    "st-budget": {"workspace": False, "start": False, "policy": "st-budget"},
}
# Stopped again once started.
STOPPED = ["st-ws"]
# The routing keys of the one session they name, and the agent whose session it is.
ROUTING = {"owner_agent_id": "st-agent", "owner_session_id": "st-owner", "label": "st-fixture"}
ROUTED_AGENT = "st-agent"
# The id of the external session (see AGENT_HUB_ST_REGISTERED above).
REGISTERED = "st-registered"
# Where the fixture shell is mounted in the agents' containers.
SHELL_IN_CONTAINER = "/opt/agent-hub-st/fixture-shell.sh"


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


def found(base, token, path):
    """Whether GET `path` answers (True) or 404 (False)."""
    request = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=30):
            return True
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return False
        sys.exit(f"fixtures.py: GET {path} answered {e.code}: {e.read().decode()}")


def session(base, token, args, **owner):
    """A new pty session running `sh ARGS`."""
    body = {"backend": "pty", "shell": "sh", "args": args, **owner}
    return call(base, token, "POST", "/v1/pty/sessions", body)["session_id"]


def exited_session(base, token, session_id=None):
    """A session whose program has exited (`session_id`, else a new one): it has printed a line,
    and waits for its output or state answer at once."""
    session_id = session_id or session(base, token, ["-c", "echo fixture output"])
    deadline = time.monotonic() + 10
    while call(base, token, "GET", f"/v1/pty/sessions/{session_id}")["session"]["alive"]:
        if time.monotonic() > deadline:
            sys.exit(f"fixtures.py: session {session_id} did not exit within 10 s")
        time.sleep(0.05)
    return session_id


def register(base, token, remote):
    """Registers the hub's session `remote` again as the external session REGISTERED, with the
    hub itself as its bridge (it checks the bridge's /health and credential before it answers)."""
    body = {
        "session_id": REGISTERED,
        "remote_session_id": remote,
        "source": "st-fixture",
        "bridge_url": base,
        "bridge_token": token,
    }
    return call(base, token, "POST", "/v1/pty/register", body)["session_id"]


def restore_workspace(base, token, agent):
    """Gives a stopped agent with a workspace a checkout again when it has none: the hub makes
    it at a start, so the agent is started and stopped."""
    api = lambda method, path: call(base, token, method, path)  # noqa: E731
    if api("GET", f"/v1/agents/{agent}")["agent"]["workspace"]["exists"]:
        return
    api("POST", f"/v1/agents/{agent}/start")
    api("POST", f"/v1/agents/{agent}/stop")
    if not api("GET", f"/v1/agents/{agent}")["agent"]["workspace"]["exists"]:
        sys.exit(f"fixtures.py: agent {agent} has no checkout after a start")


def git(repo, *args):
    subprocess.run(["git", "-C", repo, *args], check=True, stdout=subprocess.DEVNULL)


def agents_toml(directory, image, shell):
    """Makes the agents' repository in `directory` and says the agents in hub.toml's words."""
    repo = os.path.join(directory, "repo")
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write("the fixture agents' repository\n")
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=Fixture", "-c", "user.email=fixture@example.com",
        "commit", "-qm", "Start")
    # A bare repository as its `origin`, for `push_agent_branch`.
    origin = os.path.join(directory, "origin.git")
    git(directory, "init", "-q", "--bare", origin)
    git(repo, "remote", "add", "origin", origin)
    # The agents run as uid 1000 in the test image and must be able to write their checkout
    # (the hub refuses a repository they cannot): a user's own repository, as on a machine
    # where the user is uid 1000.
    if os.getuid() == 0:
        subprocess.run(["chown", "-R", "1000:1000", repo, origin], check=True)
    command = ["sh", SHELL_IN_CONTAINER]
    text = []
    for agent, what in AGENTS.items():
        text += [
            "[[agents]]",
            f"id = {json.dumps(agent)}",
            f"image = {json.dumps(image)}",
            f"command = {json.dumps(command)}",
            f"mounts = {json.dumps([f'{shell}:{SHELL_IN_CONTAINER}:ro'])}",
            'network = "none"',
            "hub_access = false",
            # The fixture shell's prompt.
            "ready_pattern = '[$] *$'",
            "ready_timeout = 10",
            "stop_grace = 1",
        ]
        if what.get("policy"):
            text.append(f"policy = {json.dumps(what['policy'])}")
        if what["workspace"]:
            text.append(f"workspace = {{ repo = {json.dumps(repo)}, base = \"main\" }}")
        text.append("")
    return "\n".join(text)


def main():
    if sys.argv[1] == "agents":
        print(agents_toml(*sys.argv[2:5]))
        return
    base, token, shell = sys.argv[1:4]
    with_agents = sys.argv[4:] == ["--agents"]
    api = lambda method, path, body=None: call(base, token, method, path, body)  # noqa: E731
    ids = {
        "AGENT_HUB_ST_SESSION": session(base, token, [shell], **({} if with_agents else ROUTING)),
        "AGENT_HUB_ST_KILLED": session(base, token, [shell]),
        "AGENT_HUB_ST_SIGNALLED": session(base, token, [shell]),
        "AGENT_HUB_ST_EXITED": session(base, token, ["-c", "echo fixture output"]),
    }
    ids["AGENT_HUB_ST_REGISTERED"] = register(base, token, ids["AGENT_HUB_ST_SESSION"])
    task = api("POST", "/v1/tasks", {"cmd": "echo fixture task", "pty": False})
    ids["AGENT_HUB_ST_TASK"] = task["taskId"]
    ids["AGENT_HUB_ST_CANCELLED"] = api("POST", "/v1/tasks", {"cmd": "sleep 600"})["taskId"]
    if with_agents:
        started = [agent for agent, what in AGENTS.items() if what["start"]]
        with ThreadPoolExecutor(len(started)) as pool:
            list(pool.map(lambda agent: api("POST", f"/v1/agents/{agent}/start"), started))
        for agent in STOPPED:
            api("POST", f"/v1/agents/{agent}/stop")
        routed = api("GET", f"/v1/agents/{ROUTED_AGENT}")["agent"]["session_id"]
        api("POST", "/v1/pty/update-ownership", {"session_id": routed, **ROUTING})
    exited_session(base, token, ids["AGENT_HUB_ST_EXITED"])
    for name, value in ids.items():
        print(f"{name}={value}")


if __name__ == "__main__":
    main()
