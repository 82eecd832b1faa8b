// xterm.js styles its terminals with <style> elements it creates. The page's CSP admits only
// styles carrying this response's nonce (no 'unsafe-inline'), so every <style> element created
// on this page gets the nonce before it is inserted. Imported first by app.js.
const nonce = document.querySelector('meta[name="csp-nonce"]')?.content ?? "";
const create = Document.prototype.createElement;
Document.prototype.createElement = function (name, options) {
  const el = create.call(this, name, options);
  if (String(name).toLowerCase() === "style") el.nonce = nonce;
  return el;
};
