// The fleet view: every container agent and every session, grouped by team (owner agent id)
// and leader -> workers (owner session), with state, time in state, last activity, container
// status, policy and the countdown to the next policy action. Kept live from the event stream:
// a `session_state_changed` event updates its row at once; other lifecycle events reload the
// lists (one request each, debounced). Each row shows the last lines of its session's screen,
// kept live from one preview socket for the whole fleet (`setPreviews`: only the changed rows'
// text is touched). A click on a row (or Enter on the selected one) opens its terminal, or the
// panel of a container agent that is not running (its last screen and start control). Nothing
// is polled but what agents spent today (`/v1/usage?period=today`, every 15 s: it changes
// with no event); a 1 s timer only re-renders the relative times.
//
// A container agent with a workspace shows its work (`work` of `GET /v1/agents`, kept live by
// `work_changed` events): commits ahead of its base, files changed, and whether its branch
// merges cleanly. The "work" header sorts each team's rows by commits ahead (a second click
// goes back to names).
//
// On a narrow screen (a phone) the fleet is one column of cards instead of the table: blocked
// agents first (the one thing a person away from the desk comes to do is answer them), each
// card with its question and a large button per answer; a tap on a card opens its terminal.
// An answer asks the hub for a receipt, which the card (and the row, and the panel) shows.

import { api } from "./api.js";
import { h, span, ago, debounce } from "./util.js";

export const STATES = ["working", "idle", "blocked", "limited", "stuck", "exited", "unknown"];
const ACTION_WORDS = {
  stop: "stops",
  restart: "restarts",
  interrupt: "interrupted",
  notify: "notifies",
  warn: "warned",
};

export class Fleet {
  /**
   * @param root element to render into
   * @param opts.canOperate whether the signed-in role may act (operator or admin)
   * @param opts.onOpen(sessionIds) opens sessions in the grid
   * @param opts.onOpenOne(unit) opens one unit (a click on its row)
   * @param opts.onCounts(counts) told the count by state after each render
   * @param opts.onBlocked(unit) told when a unit became blocked and its question is loaded
   */
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.sessions = new Map();
    this.agents = new Map();
    this.policies = new Map();
    this.checks = new Map();
    this.checkedAt = 0;
    /** agent id -> what it spent today ({usage, reason}), and the fleet's total. */
    this.spend = new Map();
    this.spendTotal = null;
    this.spendTimer = 0;
    this.ticked = new Set();
    /** session id -> its preview lines, and the element showing them (rebuilt by render). */
    this.previews = new Map();
    this.previewEls = new Map();
    /** The selected row's key (arrows move it, Enter opens it). */
    this.selected = "";
    /** The agent whose stop is waiting for a confirmation. */
    this.confirming = "";
    this.filter = { text: "", state: "", team: "" };
    /** The rows' order in a team: "" by name, "ahead" by commits ahead (most first). */
    this.sortBy = "";
    this.loaded = false;
    this.scheduleReload = debounce(() => this.reload(), 150);
    this.scheduleCheck = debounce(() => this.reloadChecks(), 300);
    /** Renders: how many, and the longest (ms); the measured browser test prints them. */
    this.stats = { renders: 0, longestRenderMs: 0 };
    this.renderQueued = false;
    /** unit key -> { sig, els, preview }: a row whose data did not change is kept as it is. */
    this.rowCache = new Map();
    /** session id -> the receipt of the last answer given on this page ({ok, receipt, text}). */
    this.receipts = new Map();
    /** A phone's width: the fleet as cards (see `cards`). */
    this.narrow = matchMedia("(max-width: 600px)");
    this.narrow.addEventListener("change", () => this.render());
  }

  /** One render for a burst of events (each would redraw every row). */
  scheduleRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    setTimeout(() => {
      this.renderQueued = false;
      this.render();
    }, 0);
  }

  async reload() {
    const [s, a, p] = await Promise.all([
      api("GET", "/v1/pty/sessions"),
      api("GET", "/v1/agents"),
      api("GET", "/v1/policies"),
      this.reloadSpend(false),
    ]);
    if (!this.spendTimer) this.spendTimer = setInterval(() => this.reloadSpend(), 15000);
    this.sessions = new Map(s.sessions.map((x) => [x.id, x]));
    this.agents = new Map(a.agents.map((x) => [x.id, x]));
    this.policies = new Map(p.policies.map((x) => [x.name, x.settings]));
    await this.reloadChecks(false);
    this.loaded = true;
    this.render();
  }

  /** What each agent spent today, and the total (told to `opts.onSpend`). A failure leaves
   * the last figures (the fleet is drawn without them). */
  async reloadSpend(render = true) {
    const u = await api("GET", "/v1/usage?period=today").catch((e) => {
      console.error("usage", e);
      return null;
    });
    if (!u) return;
    this.spend = new Map(u.agents.map((a) => [a.agent_id, a]));
    this.spendTotal = u.total;
    this.opts.onSpend?.(u.total);
    if (render) this.render();
  }

  async reloadChecks(render = true) {
    const c = await api("GET", "/v1/policies/check");
    this.checks = new Map(c.checks.map((r) => [r.agent_id || r.session_id, r]));
    this.checkedAt = Date.now();
    if (render) this.render();
  }

  onEvent(e) {
    if (e.type === "session_state_changed") {
      const s = this.sessions.get(e.sessionId);
      if (!s) return this.scheduleReload();
      s.agent_state = { ...s.agent_state, state: e.state, since: e.since, stuck: false };
      delete s.agent_state.question;
      delete s.agent_state.choices;
      delete s.agent_state.until;
      this.scheduleRender();
      this.scheduleCheck();
      if (e.state === "blocked") {
        // A new question: the receipt of the last answer is about the one before.
        this.receipts.delete(s.id);
        this.loadQuestion(s.id, true);
      }
      if (e.state === "limited") this.loadQuestion(s.id);
      return;
    }
    if (e.type === "work_changed") {
      const a = this.agents.get(e.agentId);
      if (!a) return this.scheduleReload();
      a.work = e.work;
      this.scheduleRender();
      return;
    }
    if (e.type.startsWith("task_") || e.type === "audit_event") return;
    this.scheduleReload();
  }

  /** The session's state as `GET .../state` has it (a blocked agent's question, a limit's `until`). */
  async loadQuestion(id, tell = false) {
    const st = await api("GET", `/v1/pty/sessions/${encodeURIComponent(id)}/state`);
    const s = this.sessions.get(id);
    if (s) {
      s.agent_state = st;
      this.render();
      if (tell && st.state === "blocked") this.opts.onBlocked?.(this.unitOf(id));
    }
  }

  /** A `previews` frame of `/v1/previews`: only the rows whose lines changed are touched. */
  setPreviews(frame) {
    for (const [id, lines] of Object.entries(frame.previews || {})) {
      const text = lines.join("\n");
      this.previews.set(id, text);
      const el = this.previewEls.get(id);
      if (el && el.textContent !== text) el.textContent = text;
    }
    for (const id of frame.removed || []) this.previews.delete(id);
  }

  /** The unit (row) of a session, if listed. */
  unitOf(sessionId) {
    return this.units().find((u) => u.session?.id === sessionId);
  }

  /** What a session is called: its agent's id or its label, else its id. */
  nameOf(sessionId) {
    return this.unitOf(sessionId)?.name || sessionId;
  }

  /** The sessions the grid shows by default: blocked, then working, at most `max`. */
  busy(max) {
    const rank = { blocked: 0, working: 1 };
    return this.units()
      .filter((u) => u.session?.alive && u.state in rank)
      .sort((a, b) => rank[a.state] - rank[b.state] || a.name.localeCompare(b.name))
      .slice(0, max)
      .map((u) => u.session.id);
  }

  /** The rows: container agents (with their live session) and host sessions. */
  units() {
    const out = [];
    for (const a of this.agents.values()) {
      const s = a.session_id ? this.sessions.get(a.session_id) : undefined;
      out.push({ key: a.id, name: a.id, agent: a, session: s });
    }
    for (const s of this.sessions.values()) {
      if (s.agent_id) continue;
      out.push({ key: s.id, name: s.label || s.id, session: s });
    }
    for (const u of out) {
      const st = u.session?.alive ? u.session.agent_state : null;
      u.state = st ? (st.stuck ? "stuck" : st.state) : "exited";
      u.since = st?.since;
      // A container agent's terminal names the agent itself as its owner: its team is the
      // agent's own owner (its leader), if any.
      u.team = (u.agent ? u.agent.owner_agent_id : u.session?.owner_agent_id) || "";
      u.leader = u.session?.owner_session_id || "";
      u.check = this.checks.get(u.key) || (u.session && this.checks.get(u.session.id));
    }
    return out;
  }

  counts(units) {
    const c = Object.fromEntries(STATES.map((s) => [s, 0]));
    for (const u of units) c[u.state] = (c[u.state] || 0) + 1;
    return c;
  }

  matches(u) {
    const f = this.filter;
    if (f.state && u.state !== f.state) return false;
    if (f.team && u.team !== f.team) return false;
    if (f.text) {
      const hay = [u.name, u.key, u.session?.id, u.session?.label, u.session?.cli_type, u.team,
        u.agent?.image, u.session?.policy, u.agent?.policy].join(" ").toLowerCase();
      if (!hay.includes(f.text.toLowerCase())) return false;
    }
    return true;
  }

  render() {
    if (!this.loaded) return;
    const started = performance.now();
    const units = this.units();
    this.opts.onCounts?.(this.counts(units), units);
    const shown = units.filter((u) => this.matches(u));
    const now = Date.now();
    this.previewEls.clear();
    const kept = new Map();
    const frag = this.narrow.matches ? this.cards(shown, now, kept) : this.table(shown, now, kept);
    if (!shown.length) frag.append(h("p.empty", {}, units.length ? "nothing matches" : "no agents or sessions"));
    this.root.replaceChildren(frag);
    this.rowCache = kept;
    this.updateTeams(units);
    this.opts.onRender?.();
    this.stats.renders += 1;
    this.stats.longestRenderMs = Math.max(this.stats.longestRenderMs, performance.now() - started);
  }

  /** The phone's fleet: one column of cards, blocked agents first, then by name. */
  cards(shown, now, kept) {
    const first = (u) => (u.state === "blocked" ? 0 : 1);
    const sorted = [...shown].sort((a, b) => first(a) - first(b) || a.name.localeCompare(b.name));
    const frag = document.createDocumentFragment();
    frag.append(h("div.cards", {}, sorted.map((u) => this.keptUnit(u, now, "card", kept))));
    return frag;
  }

  /** The desktop's fleet: a table per team, leaders with their workers under them. */
  table(shown, now, kept) {
    // Team -> leaders -> workers: a unit whose owner session is another shown unit's session
    // is listed under it.
    const bySession = new Map(shown.filter((u) => u.session).map((u) => [u.session.id, u]));
    const workers = new Map();
    for (const u of shown) {
      if (u.leader && bySession.has(u.leader) && bySession.get(u.leader) !== u) {
        if (!workers.has(u.leader)) workers.set(u.leader, []);
        workers.get(u.leader).push(u);
        u.isWorker = true;
      }
    }
    const teams = new Map();
    for (const u of shown.filter((u) => !u.isWorker)) {
      if (!teams.has(u.team)) teams.set(u.team, []);
      teams.get(u.team).push(u);
    }
    const frag = document.createDocumentFragment();
    const order = (a, b) => this.compareUnits(a, b);
    for (const [team, leaders] of [...teams].sort(([a], [b]) => a.localeCompare(b))) {
      const rows = [];
      for (const u of leaders.sort(order)) {
        rows.push(this.keptUnit(u, now, "row", kept));
        for (const w of (workers.get(u.session?.id) || []).sort(order)) rows.push(this.keptUnit(w, now, "worker", kept));
      }
      frag.append(
        h("section.team", { "data-team": team },
          h("h2", {}, team ? `team ${team}` : "no team", h("span.n", {}, ` ${rows.length}`)),
          h("table.units", {},
            h("thead", {}, h("tr", {},
              ["", "agent / session", "state", "in state", "last activity", "runs in",
                "policy", "today"].map((t) => h("th", {}, t)), this.workHeader(), h("th"))),
            h("tbody", {}, rows))));
    }
    return frag;
  }

  /** The order of rows in a team: by name, or by commits ahead (most first; rows without a
   * work summary last), then by name. */
  compareUnits(a, b) {
    if (this.sortBy === "ahead") {
      const ahead = (u) => u.agent?.work?.ahead ?? -1;
      const by = ahead(b) - ahead(a);
      if (by) return by;
    }
    return a.name.localeCompare(b.name);
  }

  /** The "work" column's header: a click sorts by commits ahead, a second by name again. */
  workHeader() {
    const on = this.sortBy === "ahead";
    return h("th", { "aria-sort": on ? "descending" : "none" },
      h("button.sort", {
        type: "button", "data-sort": "ahead",
        title: on ? "sorted by commits ahead: click to sort by name" : "sort by commits ahead",
        onclick: () => { this.sortBy = on ? "" : "ahead"; this.render(); },
      }, on ? "work ▼" : "work"));
  }

  /** The rows on the page, in order. */
  rows() {
    return [...this.root.querySelectorAll("tr.unit, .card.unit")];
  }

  /** Moves the selection `by` rows (arrow keys). */
  move(by) {
    const rows = this.rows();
    if (!rows.length) return;
    const at = rows.findIndex((r) => r.dataset.unit === this.selected);
    const next = rows[at < 0 ? 0 : Math.min(rows.length - 1, Math.max(0, at + by))];
    this.select(next.dataset.unit);
    next.scrollIntoView({ block: "nearest" });
  }

  select(key) {
    this.selected = key;
    for (const r of this.rows()) r.classList.toggle("selected", r.dataset.unit === key);
  }

  /** Opens the selected row (Enter). */
  openSelected() {
    const u = this.units().find((x) => x.key === this.selected);
    if (u) this.opts.onOpenOne?.(u);
  }

  /** The row (`kind` "row" or "worker") or card ("card") of `u`: the one drawn last time when
   * nothing it shows changed (relative times move in place, previews by `setPreviews`), else a
   * new one. Recorded in `kept`. */
  keptUnit(u, now, kind, kept) {
    const s = u.session;
    const st = s?.agent_state;
    const c = u.check;
    const sig = JSON.stringify([u.state, u.since, st?.until, kind, u.key === this.selected, this.opts.canOperate(),
      s && this.receipts.get(s.id),
      s && [s.id, s.label, s.cli_type, s.alive, s.backend, s.source, s.policy, s.last_activity_at, this.ticked.has(s.id)],
      u.agent && [u.agent.status, u.agent.policy, u.agent.last_activity_at, u.agent.outdated, u.agent.changed,
        this.confirming === u.agent.id, u.agent.work],
      st && [st.question, st.choices], JSON.stringify(this.spend.get(u.key) || null),
      c && c.idle_deadline_in_ms != null && [c.idle_deadline_in_ms, c.policy, c.dry_run, this.checkedAt]]);
    let row = this.rowCache.get(u.key);
    if (row?.sig !== sig) {
      const els = kind === "card" ? this.card(u, now) : this.row(u, now, kind === "worker");
      row = { sig, els, preview: s ? this.previewEls.get(s.id) : null };
    } else if (row.preview) {
      this.previewEls.set(s.id, row.preview);
    }
    kept.set(u.key, row);
    return row.els;
  }

  row(u, now, worker) {
    const s = u.session;
    const can = this.opts.canOperate();
    const id = s?.id;
    const tick = id
      ? h("input", {
          type: "checkbox", title: "tick for the grid", checked: this.ticked.has(id),
          onchange: (e) => (e.target.checked ? this.ticked.add(id) : this.ticked.delete(id)),
        })
      : "";
    const container = u.agent
      ? [h("span", { class: `status ${u.agent.status}` }, u.agent.status), outdatedEl(u.agent)]
      : s?.source === "host"
        ? h("span.status.host", {
            "data-where": "host",
            title: "runs on the hub's machine as the hub's user: it can read the hub's data dir, the owner's token included (containers are the isolation boundary)",
          }, `on host · ${s.backend}${s.alive ? "" : " (ended)"}`)
        : h("span.status", {}, s ? `${s.backend}${s.alive ? "" : " (ended)"}` : "");
    const controls = [];
    if (u.agent && can) controls.push(...this.agentControls(u.agent));
    const preview = this.previewEl(id);
    const main = h("tr", {
      class: `unit state-${u.state}${worker ? " worker" : ""}${u.key === this.selected ? " selected" : ""}`,
      "data-unit": u.key, "data-state": u.state, "data-session": id || "",
      title: u.agent && !s?.alive ? "its last screen and start" : id ? "open the terminal" : "",
      onclick: (e) => this.open(u, e),
    },
      h("td", {}, tick),
      h("td.name", {},
        h("div.title", {}, worker ? "↳ " : "", h("strong", {}, u.name),
          s?.label && s.label !== u.name ? h("span.dim", {}, ` ${s.label}`) : "",
          s?.cli_type ? h("span.dim", {}, ` (${s.cli_type})`) : ""),
        this.receiptEl(id),
        preview),
      h("td", {}, h("span", { class: `badge ${u.state}`, title: limitTitle(s?.agent_state) }, u.state)),
      h("td.since", { "data-since": u.since }, ago(u.since, now)),
      h("td", { "data-since": s?.last_activity_at || u.agent?.last_activity_at },
        ago(s?.last_activity_at || u.agent?.last_activity_at, now)),
      h("td", {}, container),
      h("td", {}, s?.policy || u.agent?.policy || "", this.countdown(u, now)),
      h("td.spend", {}, u.agent ? spendEl(this.spend.get(u.key)) : ""),
      h("td.work", {}, u.agent?.workspace ? workEl(u.agent.work) : ""),
      h("td.controls", {}, controls));
    const question = this.questionEl(u);
    if (!question) return main;
    return [main, h("tr.question", { "data-question-for": u.key },
      h("td"), h("td", { colspan: 9 }, question))];
  }

  /** The live preview of session `id`'s last lines (kept to be updated in place). */
  previewEl(id) {
    const preview = h("pre.preview", { "data-preview": id || "" }, (id && this.previews.get(id)) || "");
    if (id) this.previewEls.set(id, preview);
    return preview;
  }

  /** A click or tap on `u`'s row or card, outside its buttons and fields: opens it. */
  open(u, e) {
    if (e.target.closest("button, input, a, select")) return;
    this.select(u.key);
    this.opts.onOpenOne?.(u);
  }

  /** The card of `u` (a phone): name, state, team, time in state, spend, its question with a
   * button per answer, the last answer's receipt, its screen's last lines and its controls. A
   * tap outside a button opens it as a click on its row does. */
  card(u, now) {
    const s = u.session;
    const id = s?.id;
    const preview = this.previewEl(id);
    const controls = u.agent && this.opts.canOperate() ? this.agentControls(u.agent) : [];
    return h("article", {
      class: `card unit state-${u.state}${u.key === this.selected ? " selected" : ""}`,
      "data-unit": u.key, "data-state": u.state, "data-session": id || "",
      title: u.agent && !s?.alive ? "its last screen and start" : id ? "open the terminal" : "",
      onclick: (e) => this.open(u, e),
    },
      h("div.card-head", {},
        h("strong.name", {}, u.name),
        s?.cli_type ? h("span.dim", {}, s.cli_type) : "",
        h("span.spacer"),
        h("span", { class: `badge ${u.state}`, title: limitTitle(s?.agent_state) }, u.state)),
      h("div.card-meta", {},
        u.team ? `team ${u.team} · ` : "",
        h("span", { "data-since": u.since }, ago(u.since, now)),
        u.agent ? [" · ", spendEl(this.spend.get(u.key))] : "",
        u.agent?.work ? [" · ", workEl(u.agent.work)] : ""),
      this.questionEl(u),
      this.receiptEl(id),
      preview,
      controls.length ? h("div.card-controls", {}, controls) : "");
  }

  /** The receipt of the last answer given to session `id` on this page, or "". */
  receiptEl(id) {
    const r = id && this.receipts.get(id);
    if (!r) return "";
    return h("div", {
      class: `receipt ${r.ok ? "ok" : "error"}`, role: "status",
      "data-receipt-for": id, "data-receipt": r.ok ? r.receipt : "error",
    }, r.text);
  }

  /** A blocked unit's question with a button per answer, or null. */
  questionEl(u) {
    const st = u.session?.agent_state;
    if (u.state !== "blocked" || !st?.question) return null;
    const can = this.opts.canOperate();
    const choices = (st.choices || []).map((c) => h("button.choice", {
      type: "button", disabled: !can, "data-keys": c.keys.join(" "),
      onclick: (e) => this.answer(u.session.id, c, e.currentTarget),
    }, c.label));
    return h("span.question", {}, h("span.q", {}, st.question), " ", choices);
  }

  /** Start for a stopped agent, stop (confirmed in the page) and restart for a running one. */
  agentControls(agent) {
    const op = (name, label = name) => h(`button.${name}`, {
      type: "button", "data-op": name,
      onclick: (e) => this.agentOp(agent.id, name, e.target),
    }, label);
    if (this.confirming === agent.id) {
      return [h("span.confirm", {}, `stop ${agent.id}?`),
        op("stop", "yes, stop"),
        h("button.cancel", { type: "button", "data-op": "cancel", onclick: () => { this.confirming = ""; this.render(); } }, "cancel")];
    }
    if (agent.status === "running") {
      return [h("button.stop", { type: "button", "data-op": "ask-stop",
        onclick: () => { this.confirming = agent.id; this.render(); } }, "stop"), op("restart")];
    }
    if (agent.status === "starting" || agent.status === "stopping") return [h("span.dim", {}, `${agent.status}…`)];
    if (agent.status === "unreachable") return [h("span.dim", { title: agent.error || "" }, "waiting for its engine…")];
    return [op("start")];
  }

  countdown(u, now) {
    const c = u.check;
    if (!c || c.idle_deadline_in_ms == null) return "";
    const left = c.idle_deadline_in_ms - (now - this.checkedAt);
    const action = this.policies.get(c.policy)?.idle_action || "stop";
    const word = ACTION_WORDS[action] || action;
    const text = (left) => ` ${word} in ${span(Math.max(0, left))}${c.dry_run ? " (dry run)" : ""}`;
    const el = h("span.countdown", { "data-deadline": now + left }, text(left));
    el.text = text;
    return el;
  }

  /** Once a second: the relative times move on (in place, so nothing under the pointer is
   * replaced). */
  tick() {
    const now = Date.now();
    const set = (el, text) => el.textContent !== text && (el.textContent = text);
    for (const el of this.root.querySelectorAll("[data-since]")) set(el, ago(el.dataset.since, now));
    for (const el of this.root.querySelectorAll(".countdown")) set(el, el.text(Number(el.dataset.deadline) - now));
  }

  async agentOp(agent, op, button) {
    if (op === "stop") this.confirming = "";
    button.disabled = true;
    try {
      await api("POST", `/v1/agents/${encodeURIComponent(agent)}/${op}`);
    } catch (e) {
      alertError(`${op} ${agent}`, e);
    } finally {
      button.disabled = false;
      this.scheduleReload();
    }
  }

  /** Answers a question with `choice` (its keys, as any caller's: the hub's guard and audit
   * apply) and keeps the hub's receipt, or why it was refused, for the page to show. */
  async answer(session, choice, button) {
    button.disabled = true;
    const at = new Date().toLocaleTimeString([], { hour12: false });
    try {
      const reply = await api("POST", `/v1/pty/sessions/${encodeURIComponent(session)}/keys`,
        { keys: choice.keys, receipt: true });
      const said = reply.receipt === "submitted" ? "delivered · the screen answered" : "delivered · the screen did not change";
      this.receipts.set(session, { ok: true, receipt: reply.receipt, text: `"${choice.label}" ${said} · ${at}` });
    } catch (e) {
      this.receipts.set(session, { ok: false, text: `"${choice.label}" not delivered: ${e.message} · ${at}` });
      alertError("answer", e);
      button.disabled = false;
    }
    this.render();
  }

  updateTeams(units) {
    const select = document.getElementById("filter-team");
    const teams = [...new Set(units.map((u) => u.team).filter(Boolean))].sort();
    const have = [...select.options].slice(1).map((o) => o.value);
    if (have.join("\n") === teams.join("\n")) return;
    select.replaceChildren(h("option", { value: "" }, "every team"),
      ...teams.map((t) => h("option", { value: t }, t)));
    select.value = this.filter.team;
  }
}

export function alertError(what, e) {
  const bar = document.getElementById("toast") || document.body.appendChild(h("div"));
  bar.id = "toast";
  bar.textContent = `${what}: ${e.message}`;
  bar.hidden = false;
  setTimeout(() => (bar.hidden = true), 5000);
}

/** A running agent's word that its container is outdated (its definition changed, its image
 * was rebuilt), with what changed and the way out; "" when it is not. */
function outdatedEl(agent) {
  if (!agent.outdated) return "";
  const what = agent.changed?.length ? agent.changed.join(", ") : "its container records no definition";
  return h("span.outdated", {
    title: `made otherwise than its definition makes it now (${what}): restart applies the definition`,
  }, " · outdated");
}

/** A token count in few characters: 950, 12.3k, 4.1M. */
function tokens(n) {
  if (n < 1000) return `${n}`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

/** What some calls cost and used, `$0.42 · 12.3k tok` (`$0.42+` when some model has no
 * price); a dash, with the reason, when the hub cannot read what the agent used. */
export function spendEl(a) {
  const u = a?.usage;
  if (!u) return h("span.dim", { title: a?.reason || "not known" }, "—");
  const t = u.tokens;
  const all = t.input + t.output + t.cache_read + t.cache_write;
  const title = `${u.calls} calls today: ${t.input} input, ${t.output} output, ${t.cache_read} cache read, ` +
    `${t.cache_write} cache write tokens` + (u.cost_complete ? "" : "; models without a price left out of the cost");
  return h("span", { "data-cost": u.cost_usd.toFixed(2), title },
    `$${u.cost_usd.toFixed(2)}${u.cost_complete ? "" : "+"} · ${tokens(all)} tok`);
}

/** An agent's work against its base, `3 ahead · 5 files` and whether its branch merges
 * cleanly (`conflicts: 2 files`, naming them in the tooltip); a dash until it is computed. */
export function workEl(w) {
  if (!w) return h("span.dim", { title: "not computed yet: at its next start or turn's end" }, "—");
  const files = w.files === 1 ? "1 file" : `${w.files} files`;
  const conflicts = w.conflicts || [];
  const merge = w.merges_cleanly
    ? h("span.clean", { title: "its branch merges into its base with no conflict" }, "merges cleanly")
    : h("span.conflict", { title: `conflicts with its base: ${conflicts.join(", ")}` },
      `conflicts: ${conflicts.length === 1 ? "1 file" : `${conflicts.length} files`}`);
  const title = `${w.ahead} commits ahead of its base, ${w.behind} behind; ${files} changed ` +
    `(as of ${new Date(w.checked_at).toLocaleTimeString()})`;
  return h("span.work", { "data-ahead": w.ahead, "data-clean": w.merges_cleanly, title },
    h("span.count", {}, `${w.ahead} ahead · ${files}`), h("span.sep", {}, " · "), merge);
}

/** A limited agent's badge title: when its limit ends, if the screen says. */
function limitTitle(st) {
  if (st?.state !== "limited") return undefined;
  return st.until ? `usage limit until ${new Date(st.until).toLocaleTimeString()}` : "usage limit";
}
