// Landing an agent's work from its changes panel: a mode (merge, squash, rebase, ff-only) and
// "Merge into <base>" ask the hub what would land (`POST /v1/agents/{id}/merge` with
// `dry_run: true`) and show it in a confirmation (the commits and files, or the conflicts);
// Confirm merges for real and shows the result or why it was refused (`BASE_DIRTY` with the
// files, `MERGE_CONFLICT`, `AGENT_WORKING`, ...).

import { api } from "./api.js";
import { h } from "./util.js";

const MODES = ["merge", "squash", "rebase", "ff-only"];

/** The merge control of one agent's changes; `onMerged` runs after a merge landed. */
export class Merge {
  constructor(agentId, base, { onMerged = () => {} } = {}) {
    this.agentId = agentId;
    this.onMerged = onMerged;
    this.mode = h("select.merge-mode", { "aria-label": "how to merge" },
      MODES.map((m) => h("option", { value: m }, m)));
    this.button = h("button.merge-button", { type: "button", onclick: () => this.ask() }, `Merge into ${base}`);
    this.confirm = h("div.merge-confirm", { hidden: true, role: "dialog", "aria-label": "confirm the merge" });
    this.result = h("div.merge-result", { role: "status" });
    this.el = h("div.merge", {}, h("div.merge-actions", {}, this.mode, this.button), this.confirm, this.result);
  }

  path() {
    return `/v1/agents/${encodeURIComponent(this.agentId)}/merge`;
  }

  /** The dry run, shown for confirmation. */
  async ask() {
    this.button.disabled = true;
    this.say("", "");
    const mode = this.mode.value;
    try {
      const plan = await api("POST", this.path(), { mode, dry_run: true });
      this.showPlan(mode, plan);
    } catch (e) {
      this.fail(e);
    }
    this.button.disabled = false;
  }

  showPlan(mode, plan) {
    const commits = plan.commits ?? [];
    const files = plan.files ?? [];
    const conflicts = plan.conflicts ?? [];
    const clean = plan.clean !== false && !conflicts.length && commits.length > 0;
    const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
    const title = clean ? `${mode} ${plural(commits.length, "commit")} of ${plan.branch} into ${plan.base}?`
      : conflicts.length ? `${plan.branch} does not merge cleanly into ${plan.base}: ${plural(conflicts.length, "conflicting file")}`
        : !commits.length ? `nothing to merge: ${plan.branch} has no commits that ${plan.base} lacks`
          : `${plan.branch} cannot land on ${plan.base} as ${mode} (try another mode)`;
    const cancel = h("button.merge-cancel", { type: "button", onclick: () => this.close() }, "Cancel");
    this.confirm.replaceChildren(h("div", {},
      h("div.merge-title", {}, title),
      clean
        ? [h("ul.merge-commits", {}, commits.map((c) => h("li", { "data-sha": c.sha }, h("code", {}, c.sha.slice(0, 8)), " ", c.subject))),
          h("ul.merge-files", {}, files.map((f) => h("li", { "data-file": f.path },
            h("span.fstatus", {}, f.status), " ", f.path, " ",
            f.added == null ? "" : [h("span.added", {}, `+${f.added}`), " ", h("span.removed", {}, `−${f.removed}`)])))]
        : h("ul.merge-conflicts", {}, conflicts.map((p) => h("li", { "data-file": p }, p))),
      h("div.merge-actions", {},
        clean ? h("button.merge-confirm-button", { type: "button", onclick: () => this.land(mode) }, "Confirm") : "",
        cancel)));
    this.confirm.hidden = false;
  }

  close() {
    this.confirm.hidden = true;
    this.confirm.replaceChildren();
  }

  /** The real merge. */
  async land(mode) {
    this.close();
    this.say("merging…", "");
    try {
      const r = await api("POST", this.path(), { mode });
      const n = r.commits?.length ?? 0;
      this.say(`${mode}: ${n} commit${n === 1 ? "" : "s"} of ${r.branch} landed on ${r.base} (${short(r.before)} → ${short(r.after)})`, "merged");
      this.onMerged(r);
    } catch (e) {
      this.fail(e);
    }
  }

  fail(e) {
    // BASE_DIRTY names files; MERGE_CONFLICT its conflicts, each with its path.
    const files = (e.body?.files ?? e.body?.conflicts ?? []).map((f) => f?.path ?? f);
    const list = files.length ? `: ${files.join(", ")}` : "";
    this.say(`not merged: ${e.code ? `${e.code}: ` : ""}${e.message}${list}`, "error");
  }

  say(text, outcome) {
    this.result.textContent = text;
    this.result.dataset.outcome = outcome;
    this.result.classList.toggle("error", outcome === "error");
  }
}

function short(sha) {
  return (sha ?? "").slice(0, 8);
}
