// One live terminal: xterm.js on a session's WebSocket stream. The stream starts with a
// repaint of the current screen (drawn at the session's size), then live output. Keystrokes go
// back as binary frames when the role allows (an observer's panel is read-only, and the hub
// refuses its input too); the panel's size goes to the PTY as a resize frame, debounced. Copy
// and paste with Ctrl+Shift+C/V (and the browser's own), search in the scrollback. The socket
// reconnects by itself if the hub restarts.

import { Terminal } from "./vendor/xterm.mjs";
import { FitAddon } from "./vendor/addon-fit.mjs";
import { SearchAddon } from "./vendor/addon-search.mjs";
import { WebLinksAddon } from "./vendor/addon-web-links.mjs";
import { socket } from "./api.js";
import { h, debounce } from "./util.js";

/** Every open terminal by session id (the browser tests read their buffers through it). */
export const terminals = new Map();

const THEMES = {
  dark: { background: "#0d1117", foreground: "#c9d1d9", cursor: "#c9d1d9", selectionBackground: "#264f78" },
  light: { background: "#ffffff", foreground: "#1f2328", cursor: "#1f2328", selectionBackground: "#b6d7ff" },
};

export function setTerminalTheme(name) {
  for (const t of terminals.values()) t.term.options.theme = THEMES[name];
}

export class TermPanel {
  /**
   * @param sessionId the session to follow
   * @param opts.writable whether input and resizes are sent
   * @param opts.onToggleSize called when the title is clicked
   * @param opts.title what the session is called (its label or agent id)
   * @param opts.ended the session has ended: its last screen is shown, with this as its status
   */
  constructor(sessionId, opts) {
    this.id = sessionId;
    this.writable = opts.writable;
    this.ended = opts.ended;
    this.closed = false;
    this.status = h("span.tstatus", {}, "connecting");
    this.searchBox = h("input.search", { type: "search", placeholder: "search", "aria-label": "search the scrollback" });
    this.name = h("span.name", {}, opts.title || sessionId);
    /** What the page shows about the agent above its terminal (its question, its changes). */
    this.info = h("div.term-info");
    this.el = h("div.term-panel", { "data-session": sessionId },
      h("div.term-title", {},
        h("button.title", { type: "button", title: "full size", onclick: () => opts.onToggleSize?.(this) },
          this.name, h("small.id", {}, sessionId)),
        this.writable ? "" : h("span.ro", {}, "read-only"),
        this.status, h("span.spacer"), this.searchBox,
        h("button.close", { type: "button", title: "close", onclick: () => opts.onClose?.(this) }, "×")),
      this.info,
      (this.body = h("div.term-body")));
    this.term = new Terminal({
      convertEol: false,
      scrollback: 5000,
      disableStdin: !this.writable,
      fontSize: 13,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
      theme: THEMES[document.documentElement.dataset.theme] || THEMES.dark,
      allowProposedApi: true,
    });
    this.fit = new FitAddon();
    this.search = new SearchAddon();
    this.term.loadAddon(this.fit);
    this.term.loadAddon(this.search);
    this.term.loadAddon(new WebLinksAddon());
    this.searchBox.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        const found = e.shiftKey ? this.search.findPrevious(this.searchBox.value) : this.search.findNext(this.searchBox.value);
        this.searchBox.classList.toggle("notfound", !found);
      } else if (e.key === "Escape") {
        this.search.clearDecorations();
        this.term.focus();
      }
    });
    this.term.attachCustomKeyEventHandler((e) => this.clipboardKey(e));
    this.encoder = new TextEncoder();
    this.term.onData((d) => this.send(this.encoder.encode(d)));
    this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    this.sendSize = debounce(() => this.resizeRemote(), 150);
    this.observer = new ResizeObserver(() => this.refit());
    terminals.set(sessionId, this);
  }

  /** Call once the panel is in the document. */
  start() {
    this.term.open(this.body);
    this.observer.observe(this.body);
    this.connect();
  }

  connect() {
    if (this.closed) return;
    this.hello = null;
    const ws = socket(`/v1/pty/sessions/${encodeURIComponent(this.id)}/stream`);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onmessage = (m) => {
      if (typeof m.data === "string") return this.frame(JSON.parse(m.data));
      this.term.write(new Uint8Array(m.data));
    };
    ws.onclose = () => {
      if (this.ws !== ws || this.closed) return;
      if (this.exited) return this.setStatus(this.ended || "exited");
      this.setStatus("reconnecting");
      setTimeout(() => this.connect(), 1000);
    };
  }

  frame(f) {
    if (f.type === "hello") {
      this.hello = f;
      // The repaint that follows is drawn for the session's size: take it, then ask for ours.
      this.term.reset();
      this.term.resize(f.cols, f.rows);
      this.setStatus(this.ended || "live");
      this.refit();
    } else if (f.type === "exit") {
      this.exited = true;
      this.setStatus(this.ended || `exited${f.exit_code == null ? "" : ` (${f.exit_code})`}`);
    } else if (f.type === "resync") {
      this.setStatus(`live (skipped ${f.dropped_bytes} bytes)`);
    } else if (f.type === "error") {
      this.setStatus(f.message);
    }
  }

  /** The panel's title: the session's label or agent id (the id stays in small print). */
  setTitle(text) {
    if (text && this.name.textContent !== text) this.name.textContent = text;
  }

  setStatus(text) {
    this.status.textContent = text;
    this.el.dataset.status = text;
  }

  send(bytes) {
    if (this.writable && this.ws?.readyState === WebSocket.OPEN) this.ws.send(bytes);
  }

  /** Fits the terminal to the panel; a writable panel then resizes the PTY to match. */
  refit() {
    if (!this.hello || !this.body.clientWidth || !this.body.clientHeight) return;
    if (this.writable) {
      this.fit.fit();
      this.sendSize();
    }
  }

  resizeRemote() {
    const { cols, rows } = this.term;
    if (!this.writable || this.ws?.readyState !== WebSocket.OPEN) return;
    if (this.hello && cols === this.hello.cols && rows === this.hello.rows) return;
    this.hello = { ...this.hello, cols, rows };
    this.ws.send(JSON.stringify({ type: "resize", cols, rows }));
  }

  clipboardKey(e) {
    if (e.type !== "keydown" || !e.ctrlKey || !e.shiftKey) return true;
    if (e.code === "KeyC") {
      navigator.clipboard?.writeText(this.term.getSelection());
      return false;
    }
    if (e.code === "KeyV") {
      if (this.writable) navigator.clipboard?.readText().then((t) => this.term.paste(t));
      return false;
    }
    return true;
  }

  /** The visible screen as text lines (what the tests compare with the hub's term_read). */
  screenLines() {
    const b = this.term.buffer.active;
    const out = [];
    for (let y = 0; y < this.term.rows; y++) out.push(b.getLine(b.viewportY + y)?.translateToString(true) ?? "");
    return out;
  }

  dispose() {
    this.closed = true;
    this.observer.disconnect();
    this.ws?.close();
    this.term.dispose();
    terminals.delete(this.id);
  }
}
