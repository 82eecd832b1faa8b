// The side panels of the fleet page: the engines (asked every 15 s), the task list (reloaded on task events) and the audit
// tail (the last records, then live from the audit stream; operators only, as in the API), told
// as sentences ("10:51:32 admin stopped worker-1"); an agent's workspace changes; and what the
// panel of a container agent that is not running says (its status, when and why it stopped).

import { api, follow } from "./api.js";
import { h, ago, span } from "./util.js";
import { Merge } from "./merge.js";
import { Review } from "./review.js";

const AUDIT_ROWS = 50;
/** How often the engines are asked again (Docker takes a second for its stats). */
const ENGINES_EVERY_MS = 15000;

export class Tasks {
  constructor(root) {
    this.root = root;
  }

  async reload() {
    try {
      const { tasks } = await api("GET", "/v1/tasks");
      const rows = tasks.slice(-30).reverse().map((t) => h("tr", { "data-task": t.id, class: `task ${t.state}` },
        h("td", {}, t.name || t.id), h("td", {}, t.state),
        h("td", {}, t.exit_code ?? ""), h("td", {}, t.duration_ms != null ? span(t.duration_ms) : ago(t.started_at)),
        h("td.cmd", { title: t.cmd }, t.cmd)));
      this.root.replaceChildren(rows.length ? h("table", {}, h("tbody", {}, rows)) : h("p.empty", {}, "no tasks"));
    } catch (e) {
      this.root.replaceChildren(h("p.empty", {}, e.message));
    }
  }

  onEvent(e) {
    if (e.type.startsWith("task_") && e.type !== "task_log") this.reload();
  }
}

/** The Docker engines the agents name (`/v1/engines`): each one's health, Docker version, CPUs,
 * memory left of its total, this hub's agents on it with their memory and CPU, and the hub
 * builds whose executable it holds (this hub's marked). */
export class Engines {
  constructor(root) {
    this.root = root;
  }

  start() {
    this.reload();
    setInterval(() => this.reload(), ENGINES_EVERY_MS);
  }

  async reload() {
    try {
      const { engines } = await api("GET", "/v1/engines");
      const rows = engines.map((e) => h("tr", { "data-engine": e.engine, class: e.reachable ? "engine ok" : "engine down" },
        h("td.name", { title: e.name || "" }, e.engine),
        h("td.health", { title: e.error || "" }, e.reachable ? `ok · docker ${e.server_version ?? "?"}` : `unreachable: ${e.error ?? "no answer"}`),
        h("td.capacity", {}, e.reachable ? `${e.cpus ?? "?"} CPUs · ${bytes(e.memory_left_bytes)} of ${bytes(e.memory_total_bytes)} left` : ""),
        h("td.agents", {}, (e.agents || []).map((a) => h("span.engine-agent", { "data-agent": a.id },
          a.running ? `${a.id} ${bytes(a.memory_used_bytes)} ${a.cpu_percent != null ? `${a.cpu_percent}%` : ""}` : `${a.id} stopped`))),
        h("td.binary", { title: "the hub builds whose executable this engine holds" }, binaries(e))));
      this.root.replaceChildren(rows.length ? h("table", {}, h("tbody", {}, rows)) : h("p.empty", {}, "no engines: no agent is defined"));
    } catch (e) {
      this.root.replaceChildren(h("p.empty", {}, e.message));
    }
  }
}

/** `1.5 GiB`, `300 MiB`, or a dash. */
function bytes(n) {
  if (n == null) return "-";
  const gib = n / 2 ** 30;
  return gib >= 1 ? `${gib.toFixed(1)} GiB` : `${Math.round(n / 2 ** 20)} MiB`;
}

function binaries(e) {
  if (!e.reachable) return "";
  const builds = e.hub_binaries || [];
  if (!builds.length) return "hub binary: none yet";
  const mark = e.holds_this_build === false ? " (not this hub's)" : e.holds_this_build ? " ✓" : "";
  return `hub binary ${builds.join(", ")}${mark}`;
}

export class AuditTail {
  constructor(root) {
    this.root = root;
    this.list = h("ol.audit");
  }

  async start() {
    try {
      const page = await api("GET", `/v1/pty-traffic/events?limit=${AUDIT_ROWS}`);
      this.root.replaceChildren(this.list);
      for (const r of page.events.slice().reverse()) this.add(r);
    } catch (e) {
      this.root.replaceChildren(h("p.empty", {}, e.status === 403 ? "the audit log needs an operator token" : e.message));
      return;
    }
    follow("/v1/pty-traffic/stream", { onEvent: (m) => m.event && this.add(m.event) });
  }

  add(r) {
    const ok = r.blocked ? "blocked" : r.success === false ? "failed" : "ok";
    const { who, what, target, detail } = sentence(r);
    // Newest first, by the time of the action: a request is recorded when it ends (a start
    // after the agent is ready), so it can arrive after what it caused.
    const later = [...this.list.children].find((li) => Number(li.dataset.ts) <= (r.ts_ms || 0));
    this.list.insertBefore(h("li", { class: ok, title: r.command || "", "data-action": r.action, "data-ts": r.ts_ms || 0 },
      h("time", { datetime: r.ts || "" }, localTime(r.ts)), " ", h("b.who", {}, who), " ", what,
      target ? [" ", h("b.target", {}, target)] : "",
      detail ? h("span.dim", {}, detail) : "",
      ok === "ok" ? "" : h("span.outcome", {}, ok === "blocked" ? ` (refused${r.blocked_pattern ? `: ${r.blocked_pattern}` : ""})` : ` (failed${r.error_code ? `: ${r.error_code}` : ""})`)),
    later ?? null);
    while (this.list.children.length > AUDIT_ROWS) this.list.lastElementChild.remove();
  }
}

/** What a person did, by audit action: "admin <verb> <target>". */
const VERBS = {
  create: "created", kill: "killed", send_line: "sent a line to", keys: "sent keys to",
  signal: "signalled", talk: "ran a command in", resize: "resized", ws_input: "typed into",
  ws_resize: "resized", read_raw: "read the raw output of", stream_raw: "watched the raw output of",
  agent_start: "started", agent_stop: "stopped", agent_restart: "restarted",
  workspace_remove: "removed the workspace of", send_line_to_agent: "sent a prompt to",
  update_ownership: "changed the owner of", register: "registered", unregister: "unregistered",
  heartbeat: "sent a heartbeat for", reset: "reset the registry", task_create: "started a task",
  task_cancel: "cancelled a task", policies_reload: "reloaded the policies",
  audit_cleanup: "pruned the audit log", signin_link: "made a sign-in link",
  token_rotate: "rotated the owner's token", bridge_write: "wrote through the bridge to",
  bridge_talk: "talked through the bridge to",
};
/** What happened to an agent by itself (hub events): "<agent> <verb>". */
const AGENT_EVENTS = {
  agent_starting: "is starting", agent_started: "started", agent_start_failed: "failed to start",
  agent_stopping: "is stopping", agent_stopped: "stopped", agent_exited: "exited",
  agent_attached: "attached", agent_attach_failed: "failed to attach",
};
/** What a policy did: "policy <verb> <target>". */
const POLICY_EVENTS = {
  policy_warned: "warned", policy_stopped: "stopped", policy_restarted: "restarted",
  policy_notified: "notified about", policy_interrupted: "interrupted",
  policy_action_failed: "failed to act on", policy_started: "started",
};
/** Actions whose command text says what was sent (shown after the sentence). */
const SHOWS_COMMAND = new Set(["send_line", "keys", "talk", "ws_input", "send_line_to_agent", "signal", "task_create"]);

/** What a request sent, from its recorded body: the line, the keys, the command. */
function said(r) {
  const text = r.command || "";
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object") {
      const what = v.data ?? v.command ?? v.cmd ?? v.signal ?? (Array.isArray(v.keys) ? v.keys.join(" ") : undefined);
      if (what !== undefined) return String(what);
    }
  } catch {
    // Not JSON: a typed line, as it was typed.
  }
  return text;
}

/** An audit record as a sentence: who did what to which agent or session. */
export function sentence(r) {
  const target = r.label || r.agent_id || r.session_id || "";
  const command = said(r).slice(0, 120);
  if (AGENT_EVENTS[r.action]) return { who: target || "an agent", what: AGENT_EVENTS[r.action], target: "", detail: "" };
  if (POLICY_EVENTS[r.action]) return { who: "policy", what: POLICY_EVENTS[r.action], target, detail: "" };
  if (r.action === "session_restored") return { who: r.actor, what: "restored", target, detail: "" };
  const what = VERBS[r.action] || r.action.replaceAll("_", " ");
  return { who: r.actor, what, target, detail: SHOWS_COMMAND.has(r.action) && command ? `: ${command}` : "" };
}

/** HH:MM:SS in the viewer's time zone. */
function localTime(ts) {
  const t = Date.parse(ts || "");
  return Number.isNaN(t) ? "" : new Date(t).toLocaleTimeString([], { hour12: false });
}

/** HH:MM:SS today, else the date and the time, in the viewer's time zone. */
function dayTime(ts) {
  const t = new Date(ts);
  if (t.toDateString() === new Date().toDateString()) return localTime(ts);
  return t.toLocaleString([], { hour12: false });
}

/**
 * The line above the panel of a container agent that is not running: its status, when its
 * terminal ended and why (as far as the hub knows), whether its last screen is shown, and
 * `controls` (its start button).
 */
export function stoppedNote(u, shown, controls) {
  const a = u.agent;
  const s = u.session && !u.session.alive ? u.session : null;
  const ended = s?.agent_state?.state === "exited" ? s.agent_state.since : "";
  const why = [a.error, a.exit_code != null && `exit code ${a.exit_code}`, s?.exit_reason].filter(Boolean);
  return h("div.stopped-note", {},
    h("span", { class: `badge ${a.status}` }, a.status),
    ended ? h("time", { datetime: ended }, ` at ${dayTime(ended)}`) : "",
    why.length ? h("span.why", {}, ` (${why.join(", ")})`) : "",
    shown ? h("span.dim", {}, " · its last screen, read-only") : "",
    h("span.spacer"), controls);
}

/** What the panel of an agent with no screen to show says instead. */
export function noScreen(u) {
  const a = u.agent;
  if (u.session?.alive) return `${a.id} is ${a.status}: its terminal opens once it is up.`;
  const ran = a.session_id || a.container_id || a.started_at || a.exit_code != null;
  if (ran) return `${a.id} ran before, but the hub has no screen of that run.`;
  return `${a.id} has never run: there is no screen to show.`;
}

/** A panel shaped like a terminal's, with text where the terminal would be. */
export function screenlessPanel(title, onClose) {
  const info = h("div.term-info");
  const text = h("div.term-body.screenless");
  const el = h("div.term-panel", {},
    h("div.term-title", {}, h("span.title", {}, h("span.name", {}, title)), h("span.spacer"),
      h("button.close", { type: "button", title: "close", onclick: onClose }, "×")),
    info, text);
  return { el, info, text };
}

/**
 * An agent's workspace changes (`GET /v1/agents/{id}/changes`): the files changed, committed
 * and not, with lines added and removed; the full diff on request (`?full=true`), whose lines
 * take review notes (`review.js`); the merge into the base with a confirmation (`merge.js`).
 */
export class Changes {
  constructor(agentId, { canReview = true } = {}) {
    this.agentId = agentId;
    this.el = h("div.changes", { "data-changes-for": agentId });
    this.canReview = canReview;
    this.review = new Review(agentId, { canReview });
  }

  async load() {
    const path = `/v1/agents/${encodeURIComponent(this.agentId)}/changes`;
    try {
      const { changes } = await api("GET", path);
      const files = [...changes.uncommitted, ...changes.committed];
      const sum = (k) => files.reduce((n, f) => n + (f[k] || 0), 0);
      const list = files.map((f) => h("li", { "data-file": f.path },
        h("span.fstatus", {}, f.status), " ", f.path, " ",
        f.added == null ? h("span.dim", {}, "binary") : [h("span.added", {}, `+${f.added}`), " ", h("span.removed", {}, `−${f.removed}`)]));
      const review = this.review;
      this.el.replaceChildren(
        h("div", {}, h("b", {}, "changes"), ` on ${changes.branch}: ${files.length} file${files.length === 1 ? "" : "s"}, `,
          h("span.added", {}, `+${sum("added")}`), " ", h("span.removed", {}, `−${sum("removed")}`), " ",
          files.length ? h("button.diff-button", { type: "button", onclick: async (e) => {
            if (!review.diff.hidden) { review.hide(); e.target.textContent = "diff"; return; }
            const full = await api("GET", `${path}?full=true`);
            review.show(full.changes.diff);
            e.target.textContent = "hide diff";
          } }, "diff") : ""),
        h("ul.files", {}, list), review.el, this.mergeEl(changes));
    } catch (e) {
      this.el.replaceChildren(h("span.dim", {}, `changes: ${e.message}`));
    }
  }

  /** The merge control (`merge.js`), for operators, once the branch has commits. */
  mergeEl(changes) {
    if (!this.canReview || !changes.commits.length) return "";
    this.merge ??= new Merge(this.agentId, changes.base, { onMerged: () => this.load() });
    return this.merge.el;
  }
}
