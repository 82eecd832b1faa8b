// The dashboard's service worker (served at /sw.js, so its scope is the whole page). It keeps
// the page's shell -- `/` and the static files under `/web/` -- so that an installed dashboard
// opens even when the hub cannot be reached, and it never caches anything else: API replies
// (`/v1/...`) hold the fleet's state and screens, which must be live and must not stay on a
// phone, so they go to the network only. The shell is fetched from the network first (a new
// hub binary brings new files) and taken from the cache only when the network fails.

const CACHE = "agent-hub-shell-v1";
const SHELL = [
  "/",
  "/web/app.js", "/web/api.js", "/web/csp.js", "/web/fleet.js", "/web/panels.js",
  "/web/review.js", "/web/merge.js", "/web/terminal.js", "/web/util.js", "/web/app.css", "/web/favicon.svg",
  "/web/manifest.webmanifest", "/web/icon-192.png", "/web/icon-512.png",
  "/web/vendor/xterm.mjs", "/web/vendor/xterm.css", "/web/vendor/addon-fit.mjs",
  "/web/vendor/addon-search.mjs", "/web/vendor/addon-web-links.mjs",
];

/** Whether a request is for the shell: a GET of `/` or of a file under `/web/`, same origin. */
function isShell(request) {
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return false;
  return url.pathname === "/" || url.pathname.startsWith("/web/");
}

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  const old = (keys) => keys.filter((k) => k !== CACHE).map((k) => caches.delete(k));
  event.waitUntil(caches.keys().then((keys) => Promise.all(old(keys))).then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  // Anything but the shell (the API above all) is not touched: the browser fetches it as if
  // there were no worker, and nothing of it is kept.
  if (!isShell(event.request)) return;
  event.respondWith(networkFirst(event.request));
});

/** The shell file from the network (and kept), else the copy kept last time. */
async function networkFirst(request) {
  // `/#/grid/x` and `/?a=b` are all the page `/`.
  const url = new URL(request.url);
  const key = url.pathname === "/" ? "/" : url.pathname;
  try {
    const response = await fetch(request);
    if (response.ok) {
      const cache = await caches.open(CACHE);
      await cache.put(key, response.clone());
    }
    return response;
  } catch (e) {
    const kept = await caches.match(key);
    if (kept) return kept;
    throw e;
  }
}
