// The console's stylesheet and script, shipped inside msgd (no front-end build step). The
// script only enhances: every page works without it.

export const CSS = `
:root { color-scheme:light dark; --fg:#1b1f24; --muted:#57606a; --line:#d0d7de; --bg:#fff; --bg2:#f6f8fa; --accent:#0b5cad; --bad:#a40e26; --ok:#116329; --warn:#7d4e00;
  --bad-bg:#fff5f5; --ok-bg:#f4fff6; --warn-bg:#fff8e6; --warn-fg:#4d3000; --out-bg:#eef5ff; --input:#8c959f; --btn:#0b5cad; --btn-line:#1f6feb; --btn-fg:#fff; }
@media (prefers-color-scheme: dark) {
  :root { --fg:#e6edf3; --muted:#9da7b3; --line:#3d444d; --bg:#0d1117; --bg2:#161b22; --accent:#6cb6ff; --bad:#ff8182; --ok:#56d364; --warn:#e3b341;
    --bad-bg:#2d1215; --ok-bg:#0f2a17; --warn-bg:#2b2111; --warn-fg:#f0d58a; --out-bg:#12263f; --input:#6e7681; --btn:#1f6feb; --btn-line:#388bfd; --btn-fg:#fff; }
}
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
a { color:var(--accent); }
.top { display:flex; flex-wrap:wrap; align-items:center; gap:1rem; padding:.6rem 1.2rem; border-bottom:1px solid var(--line); background:var(--bg2); }
.brand { font-weight:700; text-decoration:none; color:var(--fg); font-size:1.1rem; }
nav ul { list-style:none; display:flex; flex-wrap:wrap; gap:.9rem; margin:0; padding:0; }
nav a[aria-current="page"] { font-weight:700; text-decoration:none; color:var(--fg); }
.who { margin-left:auto; font-size:.9rem; }
.who form { margin-left:.6rem; }
.switcher label { display:inline; margin:0; font-weight:400; }
.switcher select { min-width:0; padding:.1rem .3rem; }
main { padding:1rem 1.2rem 3rem; max-width:1200px; }
h1 { font-size:1.5rem; margin:.3rem 0 1rem; }
h2 { font-size:1.15rem; margin:1.6rem 0 .6rem; }
table { border-collapse:collapse; width:100%; font-size:.92rem; }
th, td { text-align:left; padding:.35rem .5rem; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:var(--bg2); }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
.muted { color:var(--muted); }
.inline { display:inline; }
button, .button { font:inherit; padding:.35rem .8rem; border:1px solid var(--btn-line); background:var(--btn); color:var(--btn-fg); border-radius:6px; cursor:pointer; }
button.secondary { background:var(--bg); color:var(--accent); }
button.danger { background:var(--bg); color:var(--bad); border-color:var(--bad); }
button.link { background:none; border:none; color:var(--accent); text-decoration:underline; padding:0; }
label { display:block; margin:.5rem 0 .2rem; font-weight:600; }
input[type=text], input[type=email], input[type=password], input[type=url], input[type=date], select { font:inherit; padding:.3rem .45rem; border:1px solid var(--input); border-radius:6px; background:var(--bg); color:var(--fg); min-width:16rem; max-width:100%; }
fieldset { border:1px solid var(--line); border-radius:6px; margin:.6rem 0; }
.filters { display:flex; flex-wrap:wrap; gap:.8rem; align-items:flex-end; margin-bottom:1rem; }
.filters label { margin:0 0 .2rem; }
.filters input, .filters select { min-width:10rem; }
.notice { padding:.6rem .9rem; border-radius:6px; margin:.8rem 0; border:1px solid var(--line); }
.notice.error { border-color:var(--bad); color:var(--bad); background:var(--bad-bg); }
.notice.ok { border-color:var(--ok); color:var(--ok); background:var(--ok-bg); }
.notice.secret { border-color:var(--warn); background:var(--warn-bg); color:var(--warn-fg); }
code.secret { display:block; padding:.5rem; background:var(--bg); border:1px dashed var(--warn); white-space:pre-wrap; word-break:break-all; font-size:1rem; color:var(--fg); }
.cards { display:flex; flex-wrap:wrap; gap:1rem; }
.card { border:1px solid var(--line); border-radius:8px; padding:.8rem 1rem; min-width:12rem; }
.card .big { font-size:1.5rem; font-weight:700; }
.status { font-weight:600; }
.status.delivered, .status.read, .status.sent, .status.succeeded, .status.ok, .status.active, .status.enabled { color:var(--ok); }
.status.failed, .status.undelivered, .status.bounced, .status.dropped, .status.dead, .status.down, .status.disabled, .status.revoked { color:var(--bad); }
.status.degraded, .status.pending, .status.expired, .status.invited { color:var(--warn); }
.thread { list-style:none; padding:0; }
.thread li { max-width:40rem; margin:.5rem 0; padding:.5rem .8rem; border-radius:10px; border:1px solid var(--line); white-space:pre-wrap; word-break:break-word; }
.thread li.outbound { margin-left:auto; background:var(--out-bg); }
.thread li.inbound { background:var(--bg2); }
pre.body { white-space:pre-wrap; word-break:break-word; background:var(--bg2); padding:.6rem; border-radius:6px; }
.chart { max-width:100%; height:auto; }
.chart rect.bar { fill:var(--accent); }
.chart line { stroke:var(--line); }
.chart text { font-size:10px; fill:var(--muted); }
.login { max-width:26rem; }
.pager { margin-top:1rem; }
dl.kv { display:grid; grid-template-columns:max-content 1fr; gap:.25rem 1rem; }
dl.kv dt { font-weight:600; }
dl.kv dd { margin:0; word-break:break-word; }
pre.snippet { margin:0; white-space:pre-wrap; word-break:break-all; max-height:12rem; overflow:auto; font-size:.85rem; }
details.edit, details.verify { margin:1rem 0; }
details > summary { cursor:pointer; color:var(--accent); }
.visually-hidden { position:absolute; width:1px; height:1px; padding:0; margin:-1px; overflow:hidden; clip:rect(0,0,0,0); white-space:nowrap; border:0; }
form.rename { display:flex; gap:.3rem; align-items:center; }
form.rename input { min-width:8rem; }
.scopes label { display:inline-block; font-weight:400; margin-right:1rem; }
time .local { color:var(--muted); }
.table-wrap { max-width:100%; overflow-x:auto; }
@media (max-width: 700px) {
  .top, main { padding-left:.7rem; padding-right:.7rem; }
  .who { margin-left:0; }
  input[type=text], input[type=email], input[type=password], input[type=url], input[type=date], select { min-width:0; width:100%; }
  .filters > div { flex:1 1 100%; }
  /* A wide table scrolls sideways inside its own box; the page itself never does. */
  main table { display:block; overflow-x:auto; max-width:100%; }
  th, td { white-space:nowrap; }
  td:has(> form.rename) { white-space:normal; }
  .chart { width:100%; }
}
`;

export const JS = `
// Conveniences only: every page works without this file. Confirm destructive actions; copy
// buttons; times also in the browser's zone; a live part of a page refreshed while it says so.
document.addEventListener('submit', function (e) {
  var f = e.target;
  var q = f && f.getAttribute && f.getAttribute('data-confirm');
  if (q && !window.confirm(q)) e.preventDefault();
});
document.addEventListener('click', function (e) {
  var b = e.target && e.target.closest && e.target.closest('[data-copy]');
  if (!b) return;
  var el = document.getElementById(b.getAttribute('data-copy'));
  if (el && navigator.clipboard) navigator.clipboard.writeText(el.textContent || '').then(function () { b.textContent = 'Copied'; });
});
function msgdEnhance(root) {
  root.querySelectorAll('[data-copy]').forEach(function (b) { b.hidden = false; });
  // <time datetime> is rendered in UTC; beside it, the same moment in the browser's zone.
  var zone = '';
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) {}
  if (!zone || zone === 'UTC' || zone === 'Etc/UTC') return;
  var fmt = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });
  root.querySelectorAll('time[datetime]').forEach(function (t) {
    if (t.querySelector('.local')) return;
    var d = new Date(t.getAttribute('datetime'));
    if (isNaN(d.getTime())) return;
    var s = document.createElement('span');
    s.className = 'local';
    s.textContent = ' (' + fmt.format(d) + ')';
    s.title = zone;
    t.appendChild(s);
  });
}
msgdEnhance(document);
// <div data-refresh="5000" id="…">: fetch the page again every so many ms and swap that part
// in, until the new part no longer asks for it (e.g. a message's status became final).
document.querySelectorAll('[data-refresh][id]').forEach(function (el) {
  var id = el.id;
  function tick() {
    var cur = document.getElementById(id);
    if (!cur || !cur.hasAttribute('data-refresh')) return;
    fetch(location.href, { headers: { accept: 'text/html' }, credentials: 'same-origin' }).then(function (r) {
      return r.ok ? r.text() : Promise.reject(r.status);
    }).then(function (html) {
      var next = new DOMParser().parseFromString(html, 'text/html').getElementById(id);
      if (!next) return;
      var now = document.getElementById(id);
      var fresh = document.importNode(next, true);
      now.replaceWith(fresh);
      msgdEnhance(fresh);
      if (fresh.hasAttribute('data-refresh')) setTimeout(tick, Number(fresh.getAttribute('data-refresh')) || 5000);
    }).catch(function () { setTimeout(tick, 30000); });
  }
  setTimeout(tick, Number(el.getAttribute('data-refresh')) || 5000);
});
`;
