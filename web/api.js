// The hub's API as the page uses it: REST calls with the tab's token, WebSockets with the
// token as a subprotocol (never in a URL), and the event stream, reconnecting by itself.

const TOKEN_KEY = "agent-hub.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error_code;
    this.body = body;
  }
}

/** A REST call; resolves to the JSON reply, rejects with an ApiError. */
export async function api(method, path, body) {
  const headers = {};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const reply = await res.json().catch(() => ({}));
  if (!res.ok || reply.ok === false) throw new ApiError(res.status, reply);
  return reply;
}

/** A WebSocket to a hub path, authorised by subprotocol. */
export function socket(path) {
  const protocols = ["agent-hub"];
  if (token()) protocols.push(`agent-hub.bearer.${token()}`);
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return new WebSocket(`${scheme}//${location.host}${path}`, protocols);
}

/**
 * Follows a WebSocket of JSON events for good: reconnects after the hub restarts (0.5 s, then
 * backing off to 5 s). `onOpen` runs on every (re)connection, so the caller reloads what it may
 * have missed; `onStatus(up)` says whether the stream is live.
 */
export function follow(path, { onEvent, onOpen, onStatus }) {
  let delay = 500;
  let stopped = false;
  let ws = null;
  const connect = () => {
    ws = socket(path);
    ws.onopen = () => {
      delay = 500;
      onStatus?.(true);
      onOpen?.();
    };
    ws.onmessage = (m) => {
      if (typeof m.data !== "string") return;
      try {
        onEvent(JSON.parse(m.data));
      } catch (e) {
        console.error("bad event", e);
      }
    };
    ws.onclose = () => {
      onStatus?.(false);
      if (stopped) return;
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 5000);
    };
  };
  connect();
  return () => {
    stopped = true;
    ws?.close();
  };
}
