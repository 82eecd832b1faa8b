"""Hooks of the schemathesis run: run.sh loads this file (SCHEMATHESIS_HOOKS) and exports the
hub's URL, the owner's token, the fixture shell and the fixtures' ids (AGENT_HUB_ST_URL,
AGENT_HUB_ST_TOKEN, AGENT_HUB_ST_SHELL, AGENT_HUB_ST_*). schemathesis.toml says why each is
needed:

- The owner's token (`OwnerToken`, `after_call`): every request of the run presents the
  current one. `POST /v1/auth/rotate` replaces it and answers where the new one is (`file`, on
  this machine: the hub's data dir); after a 200, the token is read from that file and every
  later request presents it. This is why run.sh gives the token here and not as a header of
  its own (`-H`): a header given on the command line is sent as it is, the old token after a
  rotation, and every later request would answer 401.
- `POST /v1/pty/register`: a `bridge_url` the hub would call (one the document admits) is sent
  as the hub's own URL, and a `bridge_token` that is absent, null or a text as the current
  token, so every valid registration calls this hub and succeeds. An invalid one (a URL the
  document refuses, a token that is not a text) is sent as generated: the hub refuses it
  before it calls anything.
- The sessions a request can make the hub forget (`DELETE /v1/pty/reset`: the exited ones and
  the external ones; `unregister`: the external one): a request that names one the hub no
  longer has gets a new one made like it first (fixtures.py), and its id in place of the old.
- `GET /v1/agents/{id}/state`: a valid `timeout_ms` above STATE_WAIT_BOUND_MS is sent as that
  bound, and a `wait` without `timeout_ms` (30 s by default) gets it. An invalid one (above
  600000, not a number, without `wait`) is sent as generated.
- `DELETE /v1/agents/{id}/workspace` on `st-ws`: its checkout is made again first when an
  earlier request removed it (fixtures.restore_workspace).
"""

import json
import os
import re
import sys
import urllib.request

import schemathesis

# fixtures.py beside this file, imported without leaving a __pycache__ in the work tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures  # noqa: E402

HUB = os.environ["AGENT_HUB_ST_URL"]
SHELL = os.environ["AGENT_HUB_ST_SHELL"]

# The longest wait for an agent's state the run sends.
STATE_WAIT_BOUND_MS = 200
# The largest `timeout_ms` the document admits.
STATE_WAIT_MAX_MS = 600_000
# The agents whose checkout is made again before a removal.
RESTORED_WORKSPACES = ["st-ws"]


# The owner's token: the one run.sh gave, then the one each rotation made.
token = os.environ["AGENT_HUB_ST_TOKEN"]


@schemathesis.auth(refresh_interval=None)
class OwnerToken:
    """The owner's token as it is now, on every request that presents one (not cached: a
    rotation replaces it)."""

    def get(self, case, context):
        return token

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def take_rotated_token(response):
    global token
    with open(response.json()["file"]) as f:
        token = f.read().strip()


# The fixtures a request can make the hub forget, by the variable run.sh exports, each with how
# one like it is made: the exited session and the sessions `kill` and `signal` end (a reset
# forgets them once ended), and the external session (a reset or an `unregister` removes it).
REMADE = {
    "AGENT_HUB_ST_EXITED": lambda: fixtures.exited_session(HUB, token),
    "AGENT_HUB_ST_KILLED": lambda: fixtures.session(HUB, token, [SHELL]),
    "AGENT_HUB_ST_SIGNALLED": lambda: fixtures.session(HUB, token, [SHELL]),
    "AGENT_HUB_ST_REGISTERED": lambda: fixtures.register(
        HUB, token, os.environ["AGENT_HUB_ST_SESSION"]
    ),
}
# The id schemathesis.toml names each by (the first one) -> the one the hub has now.
current = {os.environ[name]: os.environ[name] for name in REMADE}
remake = {os.environ[name]: make for name, make in REMADE.items()}


def session_now(named):
    """The session to send for one schemathesis.toml names: itself while the hub has it, else
    a new one like it."""
    if not fixtures.found(HUB, token, f"/v1/pty/sessions/{current[named]}"):
        current[named] = remake[named]()
    return current[named]


def remade_sessions(case):
    path, body = case.path_parameters, case.body
    if isinstance(path, dict) and path.get("id") in current:
        path["id"] = session_now(path["id"])
    named = body.get("session_id") if isinstance(body, dict) else None
    if isinstance(named, str) and named in current:
        body["session_id"] = session_now(named)


_bridge_url = None


def bridge_url_pattern():
    """The `bridge_url`s the document admits (those the hub would call)."""
    global _bridge_url
    if _bridge_url is None:
        request = urllib.request.Request(
            HUB + "/openapi.json", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            document = json.load(reply)
        schema = document["components"]["schemas"]["RegisterRequest"]["properties"]["bridge_url"]
        _bridge_url = re.compile(schema["pattern"])
    return _bridge_url


def bridge_to_this_hub(case):
    body = case.body
    if not isinstance(body, dict):
        return
    url = body.get("bridge_url")
    if isinstance(url, str) and bridge_url_pattern().fullmatch(url):
        body["bridge_url"] = HUB
    if body.get("bridge_token") is None or isinstance(body["bridge_token"], str):
        body["bridge_token"] = token


def _valid_timeout(value):
    """The value of a `timeout_ms` the hub would take as one, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
    else:
        return None
    return number if 0 <= number <= STATE_WAIT_MAX_MS else None


def bound_state_wait(case):
    query = case.query
    if not isinstance(query, dict) or "wait" not in query:
        return
    if "timeout_ms" not in query:
        query["timeout_ms"] = STATE_WAIT_BOUND_MS
        return
    number = _valid_timeout(query["timeout_ms"])
    if number is not None and number > STATE_WAIT_BOUND_MS:
        value = STATE_WAIT_BOUND_MS
        query["timeout_ms"] = str(value) if isinstance(query["timeout_ms"], str) else value


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    operation = (case.operation.method.upper(), case.operation.path)
    remade_sessions(case)
    if operation == ("POST", "/v1/pty/register"):
        bridge_to_this_hub(case)
    elif operation == ("GET", "/v1/agents/{id}/state"):
        bound_state_wait(case)
    elif operation == ("DELETE", "/v1/agents/{id}/workspace"):
        agent = (case.path_parameters or {}).get("id")
        if agent in RESTORED_WORKSPACES:
            fixtures.restore_workspace(HUB, token, agent)


@schemathesis.hook
def after_call(ctx, case, response):
    operation = (case.operation.method.upper(), case.operation.path)
    if operation == ("POST", "/v1/auth/rotate") and response.status_code == 200:
        take_rotated_token(response)
