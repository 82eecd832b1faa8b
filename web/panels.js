// The side panels of the fleet page: the task list (reloaded on task events) and the audit
// tail (the last records, then live from the audit stream; operators only, as in the API).

import { api, follow } from "./api.js";
import { h, ago, span } from "./util.js";

const AUDIT_ROWS = 50;

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
    this.list.prepend(h("li", { class: ok, title: r.command || "" },
      h("time", {}, (r.ts || "").slice(11, 19)), " ", h("b", {}, r.actor), " ", r.action,
      r.session_id ? h("span.dim", {}, ` ${r.session_id}`) : "",
      r.command ? h("code", {}, ` ${r.command.slice(0, 120)}`) : ""));
    while (this.list.children.length > AUDIT_ROWS) this.list.lastElementChild.remove();
  }
}
