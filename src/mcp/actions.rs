//! The one table of MCP actions: for each tool (`k_pty`, `k_agents`) and action, what it does,
//! its parameters, and the REST request that performs it. The tools' JSON schemas, `help`, and
//! the mapping of arguments onto requests are all generated from this table, so the MCP layer
//! cannot drift from the REST API: it has no behaviour of its own beyond choosing the request.

/// The tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Pty,
    Agents,
}

impl Tool {
    pub const ALL: [Tool; 2] = [Tool::Pty, Tool::Agents];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Pty => "k_pty",
            Tool::Agents => "k_agents",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn description(self) -> &'static str {
        match self {
            Tool::Pty => "Drive the terminal sessions of agent-hub (host PTYs, tmux panes, container agents): list, create, type lines, press keys, run commands with their exit code, read raw output or the rendered screen, route to an agent by id or label, and wait until an agent is idle. Pick an `action`; `help` describes every action, its parameters and this hub's capabilities. A `session_id` argument may be a session id, an agent id or a label. Errors come back as {ok:false, error_code, message}.",
            Tool::Agents => "Manage agent-hub's container agents (list, start, stop, restart, state, wait_state) and run shell commands as tasks (run, wait, cancel, task, tasks). Pick an `action`; `help` describes every action and its parameters. Errors come back as {ok:false, error_code, message}.",
        }
    }
}

/// A parameter's JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    Num,
    Bool,
    StrList,
    StrMap,
    /// Review notes: `[{note, file?, line?}]`.
    Notes,
}

impl Kind {
    /// The JSON Schema of a value of this kind.
    pub fn schema(self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Kind::Str => json!({"type": "string"}),
            Kind::Int => json!({"type": "integer", "minimum": 0}),
            Kind::Num => json!({"type": "number", "minimum": 0}),
            Kind::Bool => json!({"type": "boolean"}),
            Kind::StrList => json!({"type": "array", "items": {"type": "string"}}),
            Kind::StrMap => {
                json!({"type": "object", "additionalProperties": {"type": "string"}})
            }
            Kind::Notes => json!({
                "type": "array",
                "minItems": 1,
                "maxItems": crate::workspace::review::MAX_NOTES,
                "items": {
                    "type": "object",
                    "properties": {
                        "note": {"type": "string", "description": "What the reviewer says."},
                        "file": {"type": "string", "description": "The file, as the diff names it."},
                        "line": {"type": "integer", "minimum": 1, "description": "The line in the branch's file (needs file)."}
                    },
                    "required": ["note"],
                    "additionalProperties": false
                }
            }),
        }
    }
}

/// Where a parameter travels in the REST request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Into the path's `{name}`.
    Path,
    /// Into the query string (lists comma-joined).
    Query,
    /// Into the JSON body.
    Body,
}

/// One parameter of an action.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    /// The REST name, when it differs (`states` travels as `wait`).
    pub wire: &'static str,
    pub kind: Kind,
    pub required: bool,
    pub place: Place,
    pub doc: &'static str,
}

const fn param(name: &'static str, kind: Kind, place: Place, doc: &'static str) -> Param {
    Param {
        name,
        wire: name,
        kind,
        required: false,
        place,
        doc,
    }
}

const fn body(name: &'static str, kind: Kind, doc: &'static str) -> Param {
    param(name, kind, Place::Body, doc)
}

const fn query(name: &'static str, kind: Kind, doc: &'static str) -> Param {
    param(name, kind, Place::Query, doc)
}

impl Param {
    const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    const fn wire(mut self, wire: &'static str) -> Self {
        self.wire = wire;
        self
    }
}

/// What an action does.
#[derive(Debug, Clone, Copy)]
pub enum Route {
    /// Describes the tool (answered by the MCP layer from this table and `GET /health`).
    Help,
    /// Refused with this code and message.
    Refused {
        code: &'static str,
        message: &'static str,
    },
    /// One REST request. `path` names path parameters as `{name}`; a `{session_id}` that is
    /// not a session id is resolved as an agent id or label (`POST /v1/pty/resolve`).
    Rest {
        method: &'static str,
        path: &'static str,
    },
}

/// One action of a tool.
#[derive(Debug, Clone, Copy)]
pub struct Action {
    pub tool: Tool,
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [Param],
    pub route: Route,
}

impl Action {
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}

const SESSION: Param = param(
    "session_id",
    Kind::Str,
    Place::Path,
    "The session: a session id, or an agent id or label that exactly one live session has (else NOT_FOUND, or AMBIGUOUS with the matches).",
)
.required();
const AGENT: Param = param(
    "agent_id",
    Kind::Str,
    Place::Path,
    "The container agent's id (see k_agents list).",
)
.required();
const FRESH: Param = query(
    "fresh",
    Kind::Bool,
    "Start a new conversation instead of resuming the last one (default false).",
);
const TASK: Param = param(
    "task_id",
    Kind::Str,
    Place::Path,
    "The task id (taskId from run).",
)
.required();
const EXPLAIN: Param = query(
    "explain",
    Kind::Bool,
    "Add the rule that decided the state and the screen lines it matched.",
);
const STATES: Param = query(
    "states",
    Kind::StrList,
    "States to wait for, any of: idle, blocked, limited, working, stuck, exited, unknown.",
)
.wire("wait")
.required();
const WAIT_TIMEOUT: Param = query(
    "timeout_ms",
    Kind::Int,
    "How long to wait at most (default 30000, at most 600000); the reply says reached: false at the timeout.",
);
const ROUTE_KEYS: [Param; 3] = [
    body("agent_id", Kind::Str, "Route by the owner agent id."),
    body(
        "owner_session_id",
        Kind::Str,
        "Route by the owner's session id.",
    ),
    body("label", Kind::Str, "Route by label (\"Worker A\")."),
];
const ENV: Param = body("env", Kind::StrMap, "Extra environment variables.");
const CWD: Param = body(
    "cwd",
    Kind::Str,
    "Working directory (default: the hub's home directory).",
);

const fn rest(method: &'static str, path: &'static str) -> Route {
    Route::Rest { method, path }
}

const fn action(
    tool: Tool,
    name: &'static str,
    doc: &'static str,
    params: &'static [Param],
    route: Route,
) -> Action {
    Action {
        tool,
        name,
        doc,
        params,
        route,
    }
}

const S: &str = "/v1/pty/sessions/{session_id}";

/// Every action of every tool.
pub static ACTIONS: &[Action] = &[
    action(Tool::Pty, "help", "Every action of k_pty with its parameters, and this hub's capabilities.", &[], Route::Help),
    action(Tool::Pty, "list", "All sessions: id, backend, alive, size, owner (agent id, role, label), activity.", &[], rest("GET", "/v1/pty/sessions")),
    action(Tool::Pty, "create", "Start a session: a host PTY (default) or a tmux session; returns session_id.", &[
        body("backend", Kind::Str, "pty (default) or tmux."),
        body("shell", Kind::Str, "The program (default: the hub's shell)."),
        body("args", Kind::StrList, "The program's arguments."),
        CWD,
        body("cols", Kind::Int, "Terminal width (default 120)."),
        body("rows", Kind::Int, "Terminal height (default 30)."),
        ENV,
        body("tmux_session", Kind::Str, "tmux session name to adopt or create (backend tmux)."),
        body("label", Kind::Str, "A label for routing and listing (\"Worker A\")."),
        body("owner_agent_id", Kind::Str, "The agent that owns the session (routing key)."),
        body("owner_session_id", Kind::Str, "The owner's own session id (routing key)."),
        body("owner_role", Kind::Str, "leader or worker."),
        body("cli_type", Kind::Str, "What runs in it (claude-code, codex, aider, shell, ...): picks the state profile."),
        body("conversation_id", Kind::Str, "The agent conversation the terminal belongs to."),
        body("policy", Kind::Str, "A loaded policy (idle timeout and the rest) for the session."),
        body("hub_access", Kind::Bool, "Give the program AGENT_HUB_URL, AGENT_HUB_TOKEN (acting as owner_agent_id) and AGENT_HUB_AGENT_ID."),
    ], rest("POST", "/v1/pty/sessions")),
    action(Tool::Pty, "send_line", "Type one line and press Enter (\\r). Escapes such as \\t and \\xNN are decoded. Passes the command guard.", &[
        SESSION,
        body("data", Kind::Str, "The line to type.").required(),
        body("submit", Kind::Bool, "Deliver as a prompt an agent TUI submits (bracketed paste, Enter, check) and get a receipt."),
        body("force", Kind::Bool, "With submit: send even when the agent is blocked on a question."),
    ], rest("POST", "/v1/pty/sessions/{session_id}/send_line")),
    action(Tool::Pty, "read", "Recent raw output (redacted), non-destructive; with since, output after that offset, waiting up to timeout_ms for some.", &[
        SESSION,
        query("max_bytes", Kind::Int, "Most recent bytes to return (default 4096)."),
        query("since", Kind::Int, "Absolute offset to read from (end_offset of a previous read)."),
        query("timeout_ms", Kind::Int, "With since: wait this long for new output (default 5000, at most 60000)."),
        query("encoding", Kind::Str, "utf8 (default) or base64."),
        query("raw", Kind::Bool, "Unredacted (admin tokens only; audited)."),
    ], rest("GET", "/v1/pty/sessions/{session_id}/read")),
    action(Tool::Pty, "talk", "Run a shell command and wait for its end: output and exit_code. Passes the command guard.", &[
        SESSION,
        body("command", Kind::Str, "The command line.").required(),
        body("sentinel", Kind::Str, "The end marker (default: generated)."),
        body("timeout_ms", Kind::Int, "How long to wait (default from the hub, 30000)."),
    ], rest("POST", "/v1/pty/sessions/{session_id}/talk")),
    action(Tool::Pty, "term_read", "The rendered screen text (what a person sees), redacted: tail, viewport, or delta since a marker.", &[
        SESSION,
        body("mode", Kind::Str, "tail (default), viewport or delta."),
        body("max_lines", Kind::Int, "Lines at most (default 40, at most 200); keep it small."),
        body("max_chars", Kind::Int, "Characters at most (default 12000, at most 50000)."),
        body("merge_wrapped", Kind::Bool, "Join wrapped lines (default true)."),
        body("marker_id", Kind::Str, "For delta: the marker_id of the previous read."),
    ], rest("POST", "/v1/pty/sessions/{session_id}/term_read")),
    action(Tool::Pty, "resolve", "The one live session for an agent id, owner session id or label (NOT_FOUND if none, AMBIGUOUS with matches if several; never a broadcast).", &ROUTE_KEYS, rest("POST", "/v1/pty/resolve")),
    action(Tool::Pty, "send_line_to_agent", "Resolve (agent_id / owner_session_id / label), then deliver data as a prompt with a receipt; a stopped agent whose policy has start_on_message is started first.", &[
        body("data", Kind::Str, "The prompt to deliver.").required(),
        body("force", Kind::Bool, "Send even when the agent is blocked on a question."),
        ROUTE_KEYS[0],
        ROUTE_KEYS[1],
        ROUTE_KEYS[2],
    ], rest("POST", "/v1/pty/send_line_to_agent")),
    action(Tool::Pty, "resize", "Resize the terminal.", &[
        SESSION,
        body("cols", Kind::Int, "Columns.").required(),
        body("rows", Kind::Int, "Rows.").required(),
    ], rest("POST", "/v1/pty/sessions/{session_id}/resize")),
    action(Tool::Pty, "keys", "Press named keys: Enter, Escape, Tab, Up, Down, C-c, F5, y, ...", &[
        SESSION,
        body("keys", Kind::StrList, "Key names, pressed in order.").required(),
        body("receipt", Kind::Bool, "Wait for the screen to answer and reply with a receipt (submitted or stalled)."),
    ], rest("POST", "/v1/pty/sessions/{session_id}/keys")),
    action(Tool::Pty, "signal", "Send a signal: SIGINT (Ctrl-C), SIGQUIT, SIGTERM, SIGKILL, SIGHUP.", &[
        SESSION,
        body("signal", Kind::Str, "The signal's name.").required(),
    ], rest("POST", "/v1/pty/sessions/{session_id}/signal")),
    action(Tool::Pty, "kill", "End the session: hang-up, then SIGKILL of everything left.", &[SESSION], rest("DELETE", S)),
    action(Tool::Pty, "state", "What the agent in the session is doing: working, idle, blocked, limited (a usage or rate limit; until when), exited or unknown, and stuck.", &[SESSION, EXPLAIN], rest("GET", "/v1/pty/sessions/{session_id}/state")),
    action(Tool::Pty, "wait_state", "Wait until the session's state is one of states, answering the moment it is (reached: true), or at the timeout (reached: false). Use it after handing out work.", &[SESSION, STATES, WAIT_TIMEOUT, EXPLAIN], rest("GET", "/v1/pty/sessions/{session_id}/state")),
    action(Tool::Pty, "write", "Deprecated: refused with DEPRECATED. Use send_line, keys or talk.", &[], Route::Refused {
        code: "DEPRECATED",
        message: "write is deprecated: use send_line (a line and Enter), keys (named keys such as C-c or y) or talk (run a command and get its output)",
    }),
    action(Tool::Agents, "help", "Every action of k_agents with its parameters, and this hub's capabilities.", &[], Route::Help),
    action(Tool::Agents, "list", "Container agents: id, status, session_id, owner, policy.", &[], rest("GET", "/v1/agents")),
    action(Tool::Agents, "start", "Start a container agent and wait until it is ready; it resumes its last conversation unless fresh.", &[AGENT, FRESH], rest("POST", "/v1/agents/{agent_id}/start")),
    action(Tool::Agents, "stop", "Stop a container agent (detach cleanly, stop its container).", &[AGENT], rest("POST", "/v1/agents/{agent_id}/stop")),
    action(Tool::Agents, "restart", "Restart a container agent; it resumes its last conversation unless fresh.", &[AGENT, FRESH], rest("POST", "/v1/agents/{agent_id}/restart")),
    action(Tool::Agents, "changes", "What the agent changed in its workspace against its base: commits, committed and uncommitted files with lines added and removed; full: the diffs too.", &[
        AGENT,
        query("full", Kind::Bool, "Include the full diffs (default false)."),
    ], rest("GET", "/v1/agents/{agent_id}/changes")),
    action(Tool::Agents, "review", "Send review notes on the agent's branch as one prompt: each note with its file, its line and the diff hunk that holds that line (a leader: its team's agents). Queued while the agent is working, typed once it is idle (receipt queued).", &[
        AGENT,
        body("notes", Kind::Notes, "The notes (1 to 50): [{note, file?, line?}]; line needs file.").required(),
        body("force", Kind::Bool, "Send even when the agent is blocked on a question."),
    ], rest("POST", "/v1/agents/{agent_id}/review")),
    action(Tool::Agents, "usage", "What the agents you may see spent (a leader: its team's), read from their CLIs' own records: each agent's calls, tokens (input, output, cache_read, cache_write) and cost_usd by the hub's price table (null for an unpriced model; usage null with a reason when its CLI keeps no records the hub reads), with each team's and the total; for a period (all time by default).", &[
        query("period", Kind::Str, "today or week (from 00:00 UTC today, from Monday 00:00 UTC)."),
        query("since", Kind::Str, "From this time on (RFC 3339); with period, the later start."),
        query("until", Kind::Str, "Up to this time (RFC 3339), excluded."),
        query("team", Kind::Str, "Only this team's agents."),
    ], rest("GET", "/v1/usage")),
    action(Tool::Agents, "budgets", "The budgets in force you may see (a leader: its team's agents' and its team's): each one's caps (usd, tokens per hour, day, week or total), what was spent in the period, when it renews, its action (hold, stop, notify) and whether it refuses deliveries now (BUDGET_EXHAUSTED).", &[], rest("GET", "/v1/budgets")),
    action(Tool::Agents, "merge", "Land the agent's branch on its base (a person, or a leader with may_merge for its team): mode merge (default), squash, rebase or ff-only; dry_run says what would land. Refused with BASE_DIRTY (the base checked out with uncommitted changes), MERGE_CONFLICT (files and hunks, nothing changed; to_agent sends them to the agent), AGENT_WORKING unless force, NOTHING_TO_MERGE, NOT_FAST_FORWARD.", &[
        AGENT,
        body("mode", Kind::Str, "merge, squash, rebase or ff-only (default merge)."),
        body("message", Kind::Str, "The merge or squash commit's message."),
        body("force", Kind::Bool, "Even while the agent is working."),
        body("to_agent", Kind::Bool, "On a conflict, send the files and hunks to the agent to resolve."),
        body("continue_from_base", Kind::Bool, "Afterwards, move the agent's branch to the new base."),
        body("dry_run", Kind::Bool, "Change nothing; say what would land."),
    ], rest("POST", "/v1/agents/{agent_id}/merge")),
    action(Tool::Agents, "update", "Bring the agent's base into its branch (merged, or rebase: its commits replayed on the base), its checkout updated; refused while it is working unless force, with uncommitted changes (WORKSPACE_DIRTY), and on a conflict (MERGE_CONFLICT, nothing changed).", &[
        AGENT,
        body("rebase", Kind::Bool, "Replay the agent's commits on the base instead of merging."),
        body("force", Kind::Bool, "Even while the agent is working."),
        body("to_agent", Kind::Bool, "On a conflict, send the files and hunks to the agent to resolve."),
    ], rest("POST", "/v1/agents/{agent_id}/update")),
    action(Tool::Agents, "push", "Push the agent's branch to a remote of its repository (default origin) with the user's git credentials: remote, url, branch, sha.", &[
        AGENT,
        body("remote", Kind::Str, "The remote (default origin)."),
    ], rest("POST", "/v1/agents/{agent_id}/push")),
    action(Tool::Agents, "state", "The agent's state: working, idle, blocked, limited (a usage or rate limit; until when), exited (also when stopped) or unknown, and stuck.", &[AGENT, EXPLAIN], rest("GET", "/v1/agents/{agent_id}/state")),
    action(Tool::Agents, "wait_state", "Wait until the agent's state is one of states (reached: true), or the timeout (reached: false); a stopped agent is waited for until it starts.", &[AGENT, STATES, WAIT_TIMEOUT, EXPLAIN], rest("GET", "/v1/agents/{agent_id}/state")),
    action(Tool::Agents, "run", "Run a shell command as a task: in its own PTY (default; answers at once with taskId and sessionId) or with pipes (pty: false; answers when it ends with stdout, stderr, exitCode). Passes the command guard.", &[
        body("cmd", Kind::Str, "The command line (run with sh -c).").required(),
        body("pty", Kind::Bool, "Run in a PTY session (default true)."),
        body("timeout_s", Kind::Num, "Kill it after this many seconds (default 300)."),
        body("name", Kind::Str, "A name for listing."),
        CWD,
        ENV,
    ], rest("POST", "/v1/tasks")),
    action(Tool::Agents, "wait", "Wait for a task to end: {task, finished}.", &[
        TASK,
        query("timeout_ms", Kind::Int, "How long to wait at most (default 30000, at most 600000)."),
    ], rest("POST", "/v1/tasks/{task_id}/wait")),
    action(Tool::Agents, "cancel", "Cancel a task (kills all its processes).", &[TASK], rest("DELETE", "/v1/tasks/{task_id}")),
    action(Tool::Agents, "task", "One task: state, exit code, duration.", &[TASK], rest("GET", "/v1/tasks/{task_id}")),
    action(Tool::Agents, "tasks", "All tasks.", &[], rest("GET", "/v1/tasks")),
];

/// The actions of `tool`, in table order.
pub fn of(tool: Tool) -> impl Iterator<Item = &'static Action> {
    ACTIONS.iter().filter(move |a| a.tool == tool)
}

/// The action `name` of `tool`.
pub fn find(tool: Tool, name: &str) -> Option<&'static Action> {
    of(tool).find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_consistent() {
        for a in ACTIONS {
            // A parameter name means one type within a tool (the schema has one property).
            for other in of(a.tool) {
                for p in a.params {
                    if let Some(q) = other.param(p.name) {
                        assert_eq!(p.kind, q.kind, "{}.{} vs {}", a.name, p.name, other.name);
                    }
                }
            }
            if let Route::Rest { method, path } = a.route {
                for p in a.params.iter().filter(|p| p.place == Place::Path) {
                    assert!(path.contains(&format!("{{{}}}", p.name)), "{}", a.name);
                    assert!(p.required, "{}.{}", a.name, p.name);
                }
                if method == "GET" || method == "DELETE" {
                    assert!(
                        a.params.iter().all(|p| p.place != Place::Body),
                        "{}",
                        a.name
                    );
                }
            }
            assert_eq!(
                find(a.tool, a.name).map(|f| f.doc),
                Some(a.doc),
                "unique names"
            );
        }
    }
}
