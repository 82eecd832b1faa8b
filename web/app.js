// The dashboard's entry point: signs in (when the hub asks for tokens), follows the hub's
// event stream and the fleet's preview stream, routes between the fleet view (#/), the
// terminal grid (#/grid/ID,ID,...; #/grid alone shows the blocked and working agents) and the
// panel of a container agent that is not running (#/agent/ID: its last screen), and owns
// the page-wide pieces: counts by state, the tab's title and favicon with the blocked count,
// notifications, the theme and the keyboard shortcuts; and registers the service worker that
// makes the page installable.

import "./csp.js";
import { api, follow, setToken, token } from "./api.js";
import { Fleet, STATES, spendEl } from "./fleet.js";
// xterm.js (350 kB) is loaded when the first terminal opens, not with the fleet page.
let termModule = null;
const loadTerminals = () => (termModule ??= import("./terminal.js").then((m) => {
  window.agentHub.terminals = m.terminals;
  return m;
}));
import { Tasks, Engines, AuditTail, Changes, stoppedNote, noScreen, screenlessPanel } from "./panels.js";
import { h } from "./util.js";

const $ = (id) => document.getElementById(id);
const ROLES = ["observer", "operator", "admin"];
const MAX_GRID = 9;

const app = {
  who: null,
  fleet: null,
  tasks: null,
  grid: [], // TermPanels in the grid
  agentPanel: null, // the panel of #/agent/ID
  maximized: null,
  live: false,
};
// The browser tests look at the page's state through this (and at the notifications shown).
window.agentHub = { app, terminals: new Map(), notifications: [] };

function canOperate() {
  return ROLES.indexOf(app.who?.role) >= ROLES.indexOf("operator");
}

// ---- sign-in ----------------------------------------------------------------------------

// A sign-in link (`#signin=<code>`, printed by `agent-hub serve` and `agent-hub token link`):
// the code leaves the address bar and the history first, then is exchanged, once, for the
// owner's token, which lives in this tab's session storage only. Resolves to the refusal's
// message, or "" when there was no link or it signed in.
async function redeemSigninLink() {
  const m = location.hash.match(/^#signin=([^&]*)$/);
  if (!m) return "";
  history.replaceState(null, "", `${location.pathname}${location.search}#/`);
  try {
    const reply = await api("POST", "/v1/auth/signin", { code: decodeURIComponent(m[1]) });
    setToken(reply.token);
    return "";
  } catch (e) {
    return e.message || "this sign-in link did not work";
  }
}

async function signIn() {
  try {
    app.who = await api("GET", "/v1/whoami");
  } catch (e) {
    if (e.status === 401) return showSignIn(token() ? "invalid token" : "");
    return showSignIn(e.message);
  }
  $("signin").hidden = true;
  $("who").textContent = `${app.who.token_name} (${app.who.role})`;
  $("who").dataset.role = app.who.role;
  $("signout").hidden = !app.who.auth_required;
  start();
}

function showSignIn(message, linkRefused = false) {
  setToken("");
  for (const id of ["fleet", "grid", "agent"]) $(id).hidden = true;
  $("signin").hidden = false;
  $("signin").dataset.linkRefused = linkRefused ? "yes" : "no";
  $("signin-link-refused").hidden = !linkRefused;
  $("signin-error").textContent = message;
  $("token").focus();
}

$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken($("token").value.trim());
  $("token").value = "";
  signIn();
});
$("signout").addEventListener("click", () => {
  setToken("");
  location.reload();
});

// ---- live state ---------------------------------------------------------------------------

function start() {
  app.fleet = new Fleet($("fleet-list"), {
    canOperate,
    onOpen: (ids) => openGrid(ids),
    onOpenOne: openUnit,
    onCounts: showCounts,
    onSpend: showSpend,
    onBlocked: notifyBlocked,
    onRender: followFleet,
  });
  app.tasks = new Tasks($("tasks"));
  new Engines($("engines")).start();
  new AuditTail($("audit")).start();
  follow("/v1/events", {
    onOpen: () => {
      app.fleet.reload().catch((e) => console.error(e));
      app.tasks.reload();
    },
    onEvent: (e) => {
      app.fleet.onEvent(e);
      app.tasks.onEvent(e);
    },
    onStatus: (up) => {
      app.live = up;
      $("link").textContent = up ? "live" : "reconnecting";
      $("link").className = `link ${up ? "up" : "down"}`;
      document.body.dataset.live = up ? "yes" : "no";
    },
  });
  follow("/v1/previews", { onEvent: (f) => app.fleet.setPreviews(f) });
  setInterval(() => app.fleet.tick(), 1000);
  showNotifyButton();
  route();
}

/** A row's click: its terminal alone, full size; a container agent that is not running: its
 * panel (its last screen and its start control). */
function openUnit(u) {
  if (u.agent && !u.session?.alive) location.hash = `#/agent/${encodeURIComponent(u.agent.id)}`;
  else if (u.session) location.hash = `#/grid/${encodeURIComponent(u.session.id)}`;
}

// ---- being told: notifications ----------------------------------------------------------

function showNotifyButton() {
  const b = $("notify");
  b.hidden = !("Notification" in window) || Notification.permission !== "default";
}
$("notify").addEventListener("click", async () => {
  await Notification.requestPermission();
  showNotifyButton();
});

/** An agent became blocked: a notification (when allowed) that opens it with its question. */
function notifyBlocked(u) {
  if (!u || !("Notification" in window) || Notification.permission !== "granted") return;
  let n;
  try {
    n = new Notification(`${u.name} is blocked`, {
      body: u.session.agent_state?.question || "it waits for an answer",
      tag: `blocked-${u.session.id}`,
      icon: $("favicon").href,
    });
  } catch (e) {
    // Some browsers (Chrome on Android) show notifications from a service worker only.
    return console.warn("no notification:", e);
  }
  n.onclick = () => {
    window.focus();
    openUnit(u);
    n.close();
  };
  window.agentHub.notifications.push(n);
}

/** The fleet's spend today, in the header. */
function showSpend(total) {
  $("spend").replaceChildren(total.calls ? h("span", {}, spendEl({ usage: total }), " today") : "");
}

function showCounts(counts) {
  $("counts").replaceChildren(...STATES.filter((s) => counts[s]).map((s) =>
    h("button", { type: "button", class: `badge ${s}`, "data-count": s, title: `show ${s}`,
      onclick: () => setStateFilter(app.fleet.filter.state === s ? "" : s) }, `${s} ${counts[s]}`)));
  favicon(counts.blocked || 0);
}

function setStateFilter(s) {
  $("filter-state").value = s;
  app.fleet.filter.state = s;
  app.fleet.render();
}

let shownBlocked = -1;
/** The tab's icon: the hub's mark, with the number of blocked agents on a red dot. */
function favicon(blocked) {
  if (blocked === shownBlocked) return;
  shownBlocked = blocked;
  document.title = blocked ? `(${blocked}) agent-hub` : "agent-hub";
  const c = document.createElement("canvas");
  c.width = c.height = 32;
  const g = c.getContext("2d");
  g.fillStyle = "#1f6feb";
  g.fillRect(0, 0, 32, 32);
  g.strokeStyle = "#fff";
  g.lineWidth = 3;
  g.beginPath();
  g.moveTo(7, 9); g.lineTo(13, 15); g.lineTo(7, 21); g.moveTo(15, 22); g.lineTo(23, 22);
  g.stroke();
  if (blocked) {
    g.fillStyle = "#da3633";
    g.beginPath();
    g.arc(22, 10, 10, 0, Math.PI * 2);
    g.fill();
    g.fillStyle = "#fff";
    g.font = "bold 14px sans-serif";
    g.textAlign = "center";
    g.textBaseline = "middle";
    g.fillText(blocked > 9 ? "9+" : String(blocked), 22, 11);
  }
  $("favicon").href = c.toDataURL("image/png");
  $("favicon").dataset.blocked = blocked;
}

// ---- filters ------------------------------------------------------------------------------

$("filter-text").addEventListener("input", (e) => {
  app.fleet.filter.text = e.target.value;
  app.fleet.render();
});
$("filter-state").addEventListener("change", (e) => setStateFilter(e.target.value));
$("filter-team").addEventListener("change", (e) => {
  app.fleet.filter.team = e.target.value;
  app.fleet.render();
});
$("open-grid").addEventListener("click", () => openGrid([...app.fleet.ticked]));

// ---- routing and the grid -----------------------------------------------------------------

function openGrid(ids) {
  const have = gridIds();
  const all = [...new Set([...have, ...ids])].slice(-MAX_GRID);
  location.hash = `#/grid/${all.map(encodeURIComponent).join(",")}`;
}

function gridIds() {
  const m = location.hash.match(/^#\/grid\/?(.*)$/);
  return m && m[1] ? m[1].split(",").filter(Boolean).map(decodeURIComponent) : [];
}

/** The agent of #/agent/ID, or "". */
function agentRoute() {
  const m = location.hash.match(/^#\/agent\/(.+)$/);
  return m ? decodeURIComponent(m[1]) : "";
}

function route() {
  if (!app.fleet) return;
  const view = location.hash.startsWith("#/grid") ? "grid" : agentRoute() ? "agent" : "fleet";
  for (const id of ["fleet", "grid", "agent"]) $(id).hidden = view !== id;
  $("nav-fleet").classList.toggle("current", view === "fleet");
  $("nav-grid").classList.toggle("current", view === "grid");
  if (view !== "agent") closeAgentPanel();
  if (view === "grid") loadTerminals().then((m) => showGrid(m, shownIds()));
  if (view === "agent") loadTerminals().then(showAgent);
}

/** The grid's sessions: those in the address, else the blocked and working ones. */
function shownIds() {
  const ids = gridIds();
  app.autoGrid = !ids.length;
  return ids.length ? ids : app.fleet.busy(MAX_GRID);
}

/** After each render of the fleet: the grid follows it (titles, questions, and the busy
 * agents when it shows those). */
function followFleet() {
  if (agentRoute() && termModule) return termModule.then(showAgent);
  if (!location.hash.startsWith("#/grid") || !termModule) return;
  if (app.autoGrid) {
    const want = app.fleet.busy(MAX_GRID);
    if (want.join(",") !== app.grid.map((p) => p.id).join(",")) {
      termModule.then((m) => showGrid(m, want));
      return;
    }
  }
  for (const p of app.grid) describe(p);
}

/** A panel's title and what it shows above the terminal: a blocked agent's question and
 * answers, a container agent's workspace changes. */
function describe(panel) {
  const u = app.fleet.unitOf(panel.id);
  if (!u) return;
  panel.setTitle(u.name);
  panel.el.dataset.state = u.state;
  // Redrawn only when it changed: a button under the pointer stays where it is.
  const st = u.session?.agent_state;
  const id = u.session?.id;
  const asked = JSON.stringify([u.state, st?.question, st?.choices, canOperate(), app.fleet.receipts.get(id)]);
  if (!panel.question) panel.info.append((panel.question = h("div.panel-question")));
  if (panel.asked !== asked) {
    panel.asked = asked;
    const question = app.fleet.questionEl(u);
    panel.question.replaceChildren(...(question ? [question] : []), app.fleet.receiptEl(id));
  }
  showAgentSpend(panel, u);
  if (u.agent?.workspace?.exists && !panel.changes) {
    panel.changes = new Changes(u.agent.id, { canReview: canOperate() });
    panel.info.append(panel.changes.el);
    panel.changes.load();
  }
}

// ---- a container agent that is not running ------------------------------------------------

/** #/agent/ID: the agent's last screen, read-only, marked with its status, when and why it
 * stopped, with its start control (or word that it never ran); once it runs, its live terminal
 * instead. Called again after each render of the fleet. */
function showAgent(m) {
  const id = agentRoute();
  if (!id || !app.fleet.loaded) return;
  const u = app.fleet.units().find((x) => x.agent?.id === id);
  if (!u) {
    closeAgentPanel();
    return $("agent-panel").replaceChildren(h("p.empty", {}, `there is no agent ${id}`));
  }
  if (u.agent.status === "running" && u.session?.alive) {
    return location.replace(`#/grid/${encodeURIComponent(u.session.id)}`);
  }
  // An ended session is its last screen; while a new one comes up, the last screen stays.
  const kept = app.agentPanel?.agent === id ? app.agentPanel.screen : "";
  const screen = u.session?.alive ? kept : u.session?.id || "";
  if (app.agentPanel?.agent !== id || app.agentPanel.screen !== screen) openAgentPanel(m, u, screen);
  describeAgent(app.agentPanel, u);
}

/** The agent's panel: a read-only terminal on its ended session `screen`, else a text. */
function openAgentPanel({ TermPanel }, u, screen) {
  closeAgentPanel();
  const close = () => (location.hash = "#/");
  const p = screen
    ? new TermPanel(screen, { writable: false, ended: "last screen", title: u.name, onClose: close })
    : screenlessPanel(u.name, close);
  Object.assign(p, { agent: u.agent.id, screen, drawn: "" });
  p.el.dataset.agent = u.agent.id;
  p.el.classList.add("ended");
  app.agentPanel = p;
  $("agent-panel").replaceChildren(p.el);
  p.start?.();
}

function closeAgentPanel() {
  app.agentPanel?.dispose?.();
  app.agentPanel = null;
  $("agent-panel").replaceChildren();
}

/** The panel's note (status, when, why, start), redrawn only when it changed: a button under
 * the pointer stays where it is. */
function describeAgent(p, u) {
  p.el.dataset.state = u.agent.status;
  const s = u.session;
  const drawn = JSON.stringify([u.agent, s?.alive, s?.exit_reason, s?.agent_state?.since, canOperate(),
    app.fleet.confirming]);
  if (p.drawn === drawn) return;
  p.drawn = drawn;
  const controls = canOperate() ? app.fleet.agentControls(u.agent) : [];
  p.note?.remove();
  p.info.prepend((p.note = stoppedNote(u, !!p.screen, controls)));
  if (p.text) p.text.textContent = noScreen(u);
  showAgentSpend(p, u);
  if (u.agent.workspace?.exists && !p.changes) {
    p.changes = new Changes(u.agent.id);
    p.info.append(p.changes.el);
    p.changes.load();
  }
}

// A sign-in link opened in a tab that already shows the page: load it afresh to use it.
window.addEventListener("hashchange", () =>
  location.hash.startsWith("#signin=") ? location.reload() : route());

function showGrid({ TermPanel }, ids) {
  const writable = canOperate() && !$("read-only").checked;
  const keep = [];
  for (const p of app.grid) {
    if (ids.includes(p.id) && p.writable === writable) keep.push(p);
    else p.dispose();
  }
  app.grid = ids.map((id) => keep.find((p) => p.id === id) || new TermPanel(id, {
    writable,
    title: app.fleet.loaded ? app.fleet.nameOf(id) : id,
    onToggleSize: toggleMax,
    onClose: (p) => {
      location.hash = `#/grid/${gridIds().filter((x) => x !== p.id).map(encodeURIComponent).join(",")}`;
    },
  }));
  const root = $("grid-panels");
  root.dataset.count = String(app.grid.length);
  root.style.setProperty("--cols", String(Math.ceil(Math.sqrt(app.grid.length || 1))));
  root.replaceChildren(...app.grid.map((p) => p.el));
  if (!app.grid.length) root.append(h("p.empty", {}, "no agent is working or blocked: open a terminal from the fleet (click its row) or tick several and press \"grid of ticked\""));
  for (const p of app.grid) if (!p.started) { p.started = true; p.start(); }
  for (const p of app.grid) describe(p);
  if (app.grid.length === 1) toggleMax(app.grid[0], true);
  else if (app.maximized) toggleMax(app.maximized, false);
}

function toggleMax(panel, on) {
  const max = on ?? app.maximized !== panel;
  for (const p of app.grid) p.el.classList.toggle("maximized", max && p === panel);
  $("grid-panels").classList.toggle("has-max", max);
  app.maximized = max ? panel : null;
  if (max) panel.term.focus();
}

$("read-only").addEventListener("change", () => {
  for (const p of app.grid) p.dispose();
  app.grid = [];
  route();
});

// ---- theme and keys -----------------------------------------------------------------------

function setTheme(name) {
  document.documentElement.dataset.theme = name;
  localStorage.setItem("agent-hub.theme", name);
  termModule?.then((m) => m.setTerminalTheme(name));
}
setTheme(localStorage.getItem("agent-hub.theme") ||
  (matchMedia("(prefers-color-scheme: light)").matches ? "light" : "dark"));
$("theme").addEventListener("click", () =>
  setTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark"));

document.addEventListener("keydown", (e) => {
  const typing = e.target.closest?.("input, select, textarea, .xterm");
  const onFleet = !/^#\/(grid|agent)/.test(location.hash);
  // Esc outside a terminal (there it is the program's): leave full size, then the grid or the
  // agent's panel.
  if (e.key === "Escape" && !e.target.closest?.(".xterm")) {
    if (e.target.closest?.("input, select")) return e.target.blur();
    if (app.maximized && app.grid.length > 1) return toggleMax(app.maximized, false);
    if (!onFleet) location.hash = "#/";
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  // Enter on a button or link is that button's or link's.
  if (e.key === "Enter" && e.target.closest?.("button, a")) return;
  const fleetKeys = onFleet && app.fleet ? {
    ArrowDown: () => app.fleet.move(1),
    ArrowUp: () => app.fleet.move(-1),
    Enter: () => app.fleet.openSelected(),
  } : {};
  const keys = {
    ...fleetKeys,
    f: () => (location.hash = "#/"),
    g: () => (location.hash = `#/grid/${gridIds().map(encodeURIComponent).join(",")}`),
    "/": () => { location.hash = "#/"; $("filter-text").focus(); },
    t: () => $("theme").click(),
    "?": () => $("help").showModal(),
  };
  if (keys[e.key]) {
    e.preventDefault();
    keys[e.key]();
  }
});

// Installable: the service worker keeps the page's files (never API data, see web/sw.js). A
// browser offers it only in a secure context (https, or localhost).
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/sw.js").catch((e) => console.warn("no service worker:", e));
}

redeemSigninLink().then((refusal) => (refusal ? showSignIn(refusal, true) : signIn()));

/** An agent panel's line of what the agent spent today. */
function showAgentSpend(panel, u) {
  if (!u.agent) return;
  if (!panel.spend) panel.info.append((panel.spend = h("div.panel-spend", { "data-spend-for": u.agent.id })));
  panel.spend.replaceChildren(h("b", {}, "today "), spendEl(app.fleet.spend.get(u.agent.id)));
}
