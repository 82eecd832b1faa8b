// Reviewing an agent's work in its changes panel: the diff drawn line by line; a click (or
// Enter) on an added or unchanged line opens a note box for that file and new-side line; the
// notes collect in a list, each removable; "Send N notes" posts them all as one review
// (`POST /v1/agents/{id}/review`) and shows the receipt (`queued` while the agent works).

import { api } from "./api.js";
import { h } from "./util.js";

/** The lines of a unified diff, each with its kind (`add`, `del`, `ctx`, `hunk`, `meta`) and,
 * for added and unchanged lines, its file and new-side line number. */
export function diffLines(text) {
  const out = [];
  let file = null;
  let next = 0;
  let inHunk = false;
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  for (const line of lines) {
    const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (line.startsWith("diff --git ")) {
      file = gitPath(line.slice(11));
      inHunk = false;
      out.push({ text: line, kind: "meta" });
    } else if (hunk) {
      next = Number(hunk[1]);
      inHunk = true;
      out.push({ text: line, kind: "hunk" });
    } else if (inHunk && (line.startsWith("+") || line.startsWith(" "))) {
      out.push({ text: line, kind: line[0] === "+" ? "add" : "ctx", file, line: next++ });
    } else if (inHunk && (line.startsWith("-") || line.startsWith("\\"))) {
      out.push({ text: line, kind: line[0] === "-" ? "del" : "meta" });
    } else {
      inHunk = false;
      if (line.startsWith("+++ ") && line !== "+++ /dev/null") file = unquote(line.slice(4)).replace(/^b\//, "");
      else if (line.startsWith("rename to ")) file = unquote(line.slice(10));
      out.push({ text: line, kind: "meta" });
    }
  }
  return out;
}

/** The path of `a/P b/P` (`+++` or `rename to` name a renamed file's new path). */
function gitPath(rest) {
  if (rest.startsWith('"')) return unquote(rest.slice(0, rest.indexOf('" ') + 1)).replace(/^a\//, "");
  return rest.slice(0, Math.floor((rest.length - 1) / 2)).replace(/^a\//, "");
}

/** A path as git quotes it ("a\tb"), plain (octal escapes kept as they are). */
function unquote(p) {
  if (!(p.startsWith('"') && p.endsWith('"'))) return p;
  return p.slice(1, -1).replace(/\\([nt"\\])/g, (_, c) => ({ n: "\n", t: "\t" })[c] ?? c);
}

/** The diff view with its notes, for one agent. `canReview`: lines take notes. */
export class Review {
  constructor(agentId, { canReview = true } = {}) {
    this.agentId = agentId;
    this.canReview = canReview;
    this.notes = [];
    this.diff = h("div.diff", { hidden: true });
    this.list = h("ul.review-notes");
    this.send = h("button.review-send", { type: "button", hidden: true, onclick: () => this.submit() });
    this.receipt = h("div.review-receipt", { role: "status" });
    this.el = h("div.review", {}, this.diff, this.list, this.send, this.receipt);
    this.diff.addEventListener("click", (e) => this.clicked(e.target));
    this.diff.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.target.classList.contains("dl")) this.clicked(e.target);
    });
  }

  /** Draws the committed and uncommitted diffs. */
  show(diffs) {
    const part = (title, text) => text
      ? [h("div.diff-title", {}, title), ...diffLines(text).map((l) => this.lineEl(l))]
      : [];
    const hint = this.canReview ? h("div.diff-hint", {}, "click or tap a line to write a review note on it") : "";
    this.diff.replaceChildren(hint, ...part("committed", diffs?.committed), ...part("uncommitted", diffs?.uncommitted));
    this.diff.hidden = false;
    this.drawNotes();
  }

  hide() {
    this.diff.hidden = true;
  }

  lineEl(l) {
    const takes = this.canReview && l.file != null && l.line != null;
    return h(`div.dl.${l.kind}`, takes
      ? { dataset: { file: l.file, line: String(l.line) }, tabindex: "0", title: `note on ${l.file}:${l.line}` }
      : {}, l.text || " ");
  }

  /** A click on a line that takes notes opens its note box below it (one box at a time). */
  clicked(target) {
    const line = target.closest?.(".dl[data-line]");
    if (!line) return;
    this.diff.querySelector(".note-box")?.remove();
    const { file } = line.dataset;
    const at = Number(line.dataset.line);
    const text = h("textarea", { rows: "3", placeholder: `note on ${file}:${at}`, "aria-label": `note on ${file} line ${at}` });
    const box = h("div.note-box", {},
      h("div.dim", {}, `${file}:${at}`), text,
      h("div.note-actions", {},
        h("button.add", { type: "button", onclick: () => {
          if (!text.value.trim()) return text.focus();
          this.notes.push({ file, line: at, note: text.value.trim() });
          box.remove();
          this.drawNotes();
        } }, "Add note"),
        h("button.cancel", { type: "button", onclick: () => box.remove() }, "Cancel")));
    line.after(box);
    text.focus();
  }

  drawNotes() {
    this.list.replaceChildren(...this.notes.map((n, i) => h("li", { "data-note": String(i) },
      h("span.where", {}, `${n.file}:${n.line}`), " ", h("span.text", {}, n.note), " ",
      h("button.remove", { type: "button", title: "remove this note", onclick: () => {
        this.notes.splice(i, 1);
        this.drawNotes();
      } }, "×"))));
    const n = this.notes.length;
    this.send.hidden = n === 0;
    this.send.disabled = false;
    this.send.textContent = `Send ${n} note${n === 1 ? "" : "s"}`;
  }

  async submit() {
    const notes = this.notes.slice();
    if (!notes.length) return;
    this.send.disabled = true;
    this.receipt.className = "review-receipt";
    this.receipt.textContent = "sending…";
    try {
      const path = `/v1/agents/${encodeURIComponent(this.agentId)}/review`;
      const r = await api("POST", path, { notes });
      this.notes = [];
      this.receipt.dataset.receipt = r.receipt;
      this.receipt.textContent = r.receipt === "queued"
        ? `${r.notes} note${r.notes === 1 ? "" : "s"} queued: ${this.agentId} is busy; typed once it is idle`
        : `${r.notes} note${r.notes === 1 ? "" : "s"} sent to ${this.agentId}: ${r.receipt}`;
    } catch (e) {
      this.receipt.classList.add("error");
      this.receipt.dataset.receipt = "error";
      this.receipt.textContent = `not sent: ${e.code ? `${e.code}: ` : ""}${e.message}`;
    }
    this.drawNotes();
  }
}
