"""Hooks of the schemathesis run: run.sh loads this file (SCHEMATHESIS_HOOKS) and exports the
hub's URL and the owner's token (AGENT_HUB_ST_URL, AGENT_HUB_ST_TOKEN). schemathesis.toml says
why each is needed; both act before a request is sent, in every phase, and nothing else.

- `GET /v1/agents/{id}/state`: a valid `timeout_ms` above STATE_WAIT_BOUND_MS is sent as that
  bound, and a `wait` without `timeout_ms` (30 s by default) gets it. An invalid one (above
  600000, not a number, without `wait`) is sent as generated.
- `DELETE /v1/agents/{id}/workspace` on `st-ws`: its checkout is made again first when an
  earlier request removed it (fixtures.restore_workspace).
"""

import os
import sys

import schemathesis

# fixtures.py beside this file, imported without leaving a __pycache__ in the work tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixtures  # noqa: E402

# The longest wait for an agent's state the run sends.
STATE_WAIT_BOUND_MS = 200
# The largest `timeout_ms` the document admits.
STATE_WAIT_MAX_MS = 600_000
# The agents whose checkout is made again before a removal.
RESTORED_WORKSPACES = ["st-ws"]


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
    if operation == ("GET", "/v1/agents/{id}/state"):
        bound_state_wait(case)
    elif operation == ("DELETE", "/v1/agents/{id}/workspace"):
        agent = (case.path_parameters or {}).get("id")
        if agent in RESTORED_WORKSPACES:
            base, token = os.environ["AGENT_HUB_ST_URL"], os.environ["AGENT_HUB_ST_TOKEN"]
            fixtures.restore_workspace(base, token, agent)
