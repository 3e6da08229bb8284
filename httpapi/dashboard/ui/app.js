// ax dashboard: plain JavaScript, no build step. Every call goes to the
// same /v1 API as the CLI, with the token from this tab's session storage
// (never in a URL). Everything shown is escaped: task types, tenants and
// payloads come from submitters.
'use strict';
const $ = (s, r = document) => r.querySelector(s);
const esc = v => String(v ?? '').replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
const view = () => $('#view');

function token() { return sessionStorage.getItem('ax.token') || ''; }

async function api(method, path, body) {
  const h = {'Accept': 'application/json'};
  if (token()) h['Authorization'] = 'Bearer ' + token();
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const r = await fetch(path, {method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store'});
  const text = await r.text();
  let d = null;
  try { d = text ? JSON.parse(text) : null; } catch (_) { d = {raw: text}; }
  if (r.status === 401) { showLogin('This token was refused (401).'); throw new Error('unauthorized'); }
  if (!r.ok) {
    const e = d && d.error ? d.error : {message: r.status + ' ' + text};
    throw new Error(e.message + (e.field ? ' (field ' + e.field + ')' : ''));
  }
  return d;
}

// act asks before a write: it shows what will be done and runs it only on
// Confirm, then says how it went (the API's refusal, 403 for a token
// without the role, as it came). On success it first awaits after (the
// page's re-render), so once #action-result.ok shows, the page shows the
// outcome: its nodes are the fresh ones.
function act(what, run, after) {
  const box = $('#confirm'), out = $('#action-result');
  $('#confirm-text').textContent = what + '?';
  out.textContent = '';
  out.className = '';
  box.hidden = false;
  $('#confirm-no').onclick = () => { box.hidden = true; };
  $('#confirm-yes').onclick = async () => {
    box.hidden = true;
    try {
      await run();
    } catch (e) {
      if (e.message === 'unauthorized') return;
      out.textContent = what + ': ' + e.message;
      out.className = 'bad';
      return;
    }
    try {
      if (after) await after();
      out.textContent = what + ': done';
      out.className = 'ok';
    } catch (e) {
      if (e.message === 'unauthorized') return;
      out.textContent = what + ': done (the page did not refresh: ' + e.message + ')';
      out.className = 'ok';
    }
  };
}

function time(s) { return s ? esc(s) : '<span class="muted">-</span>'; }
function state(s) { return '<span class="state s-' + esc(s) + '">' + esc(s) + '</span>'; }
function taskLink(id) { return '<a class="task-link" href="#/task/' + encodeURIComponent(id) + '">' + esc(id) + '</a>'; }
function pct(x) { return (100 * (x || 0)).toFixed(1) + '%'; }
// Widths are set through the DOM after rendering: the CSP forbids style attributes.
function bar(x, hot) { return '<span class="bar' + (hot ? ' hot' : '') + '"><span data-w="' + Math.min(100, Math.round(100 * (x || 0))) + '"></span></span>'; }
function sizeBars() { document.querySelectorAll('.bar>span[data-w]').forEach(e => { e.style.width = e.dataset.w + '%'; }); }
function fail(e) { view().insertAdjacentHTML('afterbegin', '<p class="bad error">' + esc(e.message || e) + '</p>'); }
function partial(d) {
  return d && d.unavailable && d.unavailable.length ? '<p class="warn">Regions that did not answer: ' + esc(d.unavailable.join(', ')) + '</p>' : '';
}
function params(form) {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(form)) if (String(v).trim() !== '') q.set(k, String(v).trim());
  return q;
}

// ---- sign in ---------------------------------------------------------------
function showLogin(msg) {
  stopLive();
  $('#login').hidden = false;
  view().innerHTML = '';
  $('#login-error').textContent = msg || '';
  $('#who').textContent = '';
}
$('#login-form').addEventListener('submit', async ev => {
  ev.preventDefault();
  sessionStorage.setItem('ax.token', $('#token').value.trim());
  $('#token').value = '';
  try { await api('GET', '/v1/regions'); } catch (e) { if (e.message !== 'unauthorized') showLogin(e.message); return; }
  $('#login').hidden = true;
  route();
});
function who() {
  const w = $('#who');
  w.innerHTML = token() ? 'signed in <button id="logout">sign out</button>' : 'no token (auth off?) <button id="logout">sign in</button>';
  $('#logout').onclick = () => { sessionStorage.removeItem('ax.token'); showLogin(''); };
}

// ---- live updates ------------------------------------------------------------
// One server-sent event stream per page (GET /v1/stream). EventSource cannot
// send the token, so each (re)connect first trades it for a one-use ticket
// of 30 s (POST /v1/stream/tickets): the token never goes into a URL. The
// stream of the page left is closed on every route change.
// ?live=0 in the page's address turns the streams off: an open stream is a
// fetch that never ends, so a headless browser's virtual time budget
// (chromium --headless --screenshot --virtual-time-budget=N) would never
// run out and the page never settle.
const liveOff = new URLSearchParams(location.search).get('live') === '0';
let live = {gen: 0, es: null, retry: null};
function stopLive() {
  live.gen++;
  clearTimeout(live.retry);
  if (live.es) live.es.close();
  live.es = window.axStream = null;
}
function startLive(query, handlers) {
  stopLive();
  if (liveOff) return;
  const gen = live.gen;
  const open = async () => {
    if (gen !== live.gen) return;
    let url = '/v1/stream' + (query ? '?' + query : '');
    try {
      if (token()) {
        const t = await api('POST', '/v1/stream/tickets');
        url += (query ? '&' : '?') + 'ticket=' + encodeURIComponent(t.ticket);
      }
    } catch (_) { live.retry = setTimeout(open, 3000); return; }
    if (gen !== live.gen) return;
    const es = new EventSource(url);
    live.es = window.axStream = es;
    for (const [ev, fn] of Object.entries(handlers)) es.addEventListener(ev, m => { if (gen === live.gen) fn(JSON.parse(m.data)); });
    // A dropped stream reconnects with a fresh ticket (the old one is spent).
    es.onerror = () => { es.close(); if (gen === live.gen) live.retry = setTimeout(open, 2000); };
  };
  open();
}

// ---- overview --------------------------------------------------------------
let overviewCost = '';
async function overview() {
  overviewCost = '';
  const day = new Date().toISOString().slice(0, 10);
  try {
    const c = await api('GET', '/v1/cost?group_by=tenant&from=' + day + '&to=' + day);
    overviewCost = '<h2>Cost today by tenant <small class="muted">(' + esc(day) + ' UTC so far; the last hour: Grafana\'s "Last hour by tenant"; more on the <a href="#/cost">cost page</a>)</small></h2>' +
      partial(c) + '<table id="overview-cost"><tr><th>tenant</th><th>runs</th><th>run time</th><th>spend $</th><th>savings $</th></tr>' +
      (c.rows || []).map(r => '<tr><td>' + esc(r.tenant) + '</td><td class="num">' + esc(r.runs) + '</td><td class="num">' + esc((r.run_seconds || 0).toFixed(1)) +
        ' s</td><td class="num">' + esc((r.spend_usd || 0).toFixed(6)) + '</td><td class="num">' + esc((r.savings_usd || 0).toFixed(6)) + '</td></tr>').join('') +
      '</table>' + ((c.rows || []).length ? '' : '<p class="muted">nothing ran today</p>');
  } catch (e) { if (e.message === 'unauthorized') throw e; overviewCost = '<p class="bad">cost: ' + esc(e.message || e) + '</p>'; }
  await loadHistory();
  await renderOverview(await api('GET', '/v1/regions'));
  let busy = false;
  startLive('', {regions: async d => {
    if (busy) return;
    busy = true;
    try {
      if (Date.now() - historyAt >= 15000) await loadHistory();
      await renderOverview(d);
    } finally { busy = false; }
  }});
}

// ---- history charts ------------------------------------------------------------
// The answering server's samples of the last hour (GET /v1/history, one
// every 15 s): every region's queue depth, each pool's queue fill, this
// region's finished tasks and this server's submits per minute, today's
// spend, each pool's ready→start p99 (its leader's sample of the last
// minute's claims). Reread at most every 15 s as the overview refreshes.
let historyHTML = '', historyAt = 0;
async function loadHistory() {
  historyAt = Date.now();
  try {
    historyHTML = historyCharts(await api('GET', '/v1/history?minutes=60'));
  } catch (e) {
    if (e.message === 'unauthorized') throw e;
    historyHTML = '<p class="bad">history: ' + esc(e.message || e) + '</p>';
  }
}

function historyCharts(h) {
  const ss = h.samples || [];
  const t = s => Date.parse(s.at);
  const names = [...new Set(ss.flatMap(s => (s.regions || []).map(r => r.name)))].sort();
  const depth = names.map(n => ({name: n + ' ready', points: ss.flatMap(s => (s.regions || []).filter(r => r.name === n).map(r => [t(s), r.ready]))}))
    .concat(names.map(n => ({name: n + ' running', points: ss.flatMap(s => (s.regions || []).filter(r => r.name === n).map(r => [t(s), r.running]))})));
  // Counters to rates per minute between consecutive samples.
  const rate = get => ss.slice(1).map((s, i) => {
    const a = get(ss[i]), b = get(s), dt = (t(s) - t(ss[i])) / 60000;
    return a === undefined || b === undefined || dt <= 0 ? null : [t(s), Math.max(0, b - a) / dt];
  }).filter(Boolean);
  const finished = s => s.succeeded === undefined ? undefined : s.succeeded + (s.failed || 0);
  const through = [{name: 'finished/min (this region)', points: rate(finished)}, {name: 'submitted/min (this server)', points: rate(s => s.submitted)}];
  // Each pool's queue fill (READY ÷ capacity) in percent.
  const pools = [...new Set(ss.flatMap(s => (s.regions || []).flatMap(r => (r.pools || []).map(p => r.name + '/' + p.name))))].sort();
  const fillOf = (s, rp) => (s.regions || []).flatMap(r => (r.pools || []).filter(p => r.name + '/' + p.name === rp)).map(p => [t(s), 100 * p.queue_fill]);
  const fill = pools.map(rp => ({name: rp, points: ss.flatMap(s => fillOf(s, rp))}));
  // Each pool's ready→start p99 in seconds; a sample without one (too few claims) leaves a gap.
  const waitOf = (s, rp) => (s.regions || []).flatMap(r => (r.pools || []).filter(p => r.name + '/' + p.name === rp && p.wait_p99_seconds !== undefined)).map(p => [t(s), p.wait_p99_seconds]);
  const waits = pools.map(rp => ({name: rp, points: ss.flatMap(s => waitOf(s, rp))})).filter(w => w.points.length);
  const spend = [{name: 'spend today $' + (h.tenant ? ' (' + h.tenant + ')' : ''), points: ss.filter(s => s.spend_usd !== undefined).map(s => [t(s), s.spend_usd])}];
  return '<h2>Last hour <small class="muted">(this server\'s samples every ' + esc(h.every_seconds) + ' s since it started; Grafana for longer)</small></h2><div class="charts">' +
    chart('chart-depth', 'Queue depth (tasks)', depth) + chart('chart-throughput', 'Throughput (tasks/min)', through) +
    chart('chart-fill', 'Queue fill (% of capacity)', fill) + chart('chart-wait', 'Ready→start p99 (s, last minute\'s claims)', waits, 3) +
    chart('chart-spend', 'Spend today (USD)', spend, 4) + '</div>';
}

// chart draws series of [ms, value] points as an SVG line chart (no
// style attributes: the CSP forbids them; colours come from classes).
function chart(id, title, series, digits = 1) {
  // A figure below what digits can show is written with an exponent.
  const num = v => v !== 0 && Math.abs(v) < Math.pow(10, -digits) ? v.toExponential(2) : v.toFixed(digits);
  const W = 420, H = 140, L = 44, B = 18;
  const all = series.flatMap(s => s.points);
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]));
  const max = Math.max(0, ...all.map(p => p[1]));
  const x = v => L + (t1 > t0 ? (v - t0) / (t1 - t0) : 1) * (W - L - 6);
  const y = v => H - B - (max > 0 ? v / max : 0) * (H - B - 8);
  let g = '<line class="axis" x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - 6) + '" y2="' + (H - B) + '"></line>' +
    '<text x="' + (L - 4) + '" y="12" class="tick" text-anchor="end">' + esc(num(max)) + '</text>' +
    '<text x="' + (L - 4) + '" y="' + (H - B) + '" class="tick" text-anchor="end">0</text>';
  if (all.length) {
    const hm = ms => new Date(ms).toISOString().slice(11, 16);
    g += '<text x="' + L + '" y="' + (H - 4) + '" class="tick">' + esc(hm(t0)) + '</text><text x="' + (W - 6) + '" y="' + (H - 4) + '" class="tick" text-anchor="end">' + esc(hm(t1)) + ' UTC</text>';
  }
  series.forEach((s, i) => {
    if (s.points.length) g += '<polyline class="line l' + (i % 6) + '" data-series="' + esc(s.name) + '" data-points="' + s.points.length + '" data-last="' + esc(s.points[s.points.length - 1][1]) +
      '" points="' + s.points.map(p => x(p[0]).toFixed(1) + ',' + y(p[1]).toFixed(1)).join(' ') + '"></polyline>';
  });
  const legend = series.map((s, i) => '<span class="key k' + (i % 6) + '">' + esc(s.name) + (s.points.length ? ' ' + esc(num(+s.points[s.points.length - 1][1])) : ' -') + '</span>').join(' ');
  return '<figure class="chart" id="' + id + '" data-max="' + esc(max) + '"><figcaption>' + esc(title) + '</figcaption><svg viewBox="0 0 ' + W + ' ' + H + '" width="' + W + '" height="' + H + '">' + g +
    '</svg><p class="legend">' + legend + (all.length < 2 ? ' <span class="muted">(a second sample comes within 15 s)</span>' : '') + '</p></figure>';
}

// slotsCell: what a pool runs at once now; with a capacity window, the window's slots of the live workers'.
function slotsCell(p) {
  return esc(p.slots || 0) + (p.capacity_window && p.worker_slots ? ' <small>of ' + esc(p.worker_slots) + '</small>' : '');
}

// capWindow: a scheduled pool's window now (open with its slots, or closed) and its next change.
function capWindow(w) {
  if (!w) return '<span class="muted">always</span>';
  let next = '';
  if (w.next_change) {
    const m = Math.max(0, Math.round((new Date(w.next_change) - Date.now()) / 60000));
    next = ' · next change in ' + (m >= 60 ? Math.floor(m / 60) + ' h ' : '') + (m % 60) + ' min';
  }
  return (w.open ? '<span class="ok">open</span> ' + esc(w.slots) + ' slots' : '<span class="warn">closed</span>') + next +
    ' <small>(' + esc(w.window || 'outside windows') + ' ' + esc(w.timezone) + ')</small>';
}

// refusedCell: a pool's backpressure refusals per minute, as the answering server met them.
function refusedCell(r) {
  if (r === undefined || r === null) return '<span class="muted">-</span>';
  return r > 0 ? '<span class="bad">' + esc(r.toFixed(1)) + '</span>' : '<span class="ok">0</span>';
}

async function renderOverview(d) {
  let h = '<h1>Overview</h1><p class="muted">' + (d.global_view ? 'global view current' : '<span class="bad">global etcd unreachable: last known view</span>') +
    ' · updated ' + esc(new Date().toISOString()) + '</p>';
  for (const g of d.regions) {
    h += '<h2 class="region">' + esc(g.name) + ' <small class="' + (g.healthy ? 'ok' : 'bad') + '">' + (g.healthy ? 'healthy' : 'unhealthy') + (g.stale ? ', stale' : '') +
      '</small></h2><p class="muted">leader ' + esc(g.leader) + ' · ' + esc(g.api) + ' · ' + esc(g.servers) + ' server(s)</p>';
    h += '<table class="pools"><tr><th>pool</th><th>tags</th><th>workers</th><th>slots</th><th>running</th><th>utilisation</th><th>ready</th><th>queue fill</th><th>pressure</th><th title="submits this server refused per minute (429) while this pool was saturated for them">refused/min</th><th title="READY tasks waiting past their region starvation_threshold">starving</th><th title="99th percentile of ready→start waits over the last minute, from a sample of the region’s claims">wait p99</th><th>capacity window</th><th>$/slot-h</th></tr>';
    for (const p of g.pools || []) {
      const tags = Object.entries(p.tags || {}).map(e => e.join('=')).join(', ');
      const pressure = p.paused ? '<span class="bad">paused (≥ pause watermark)</span>' : p.queue_fill >= 0.8 ? '<span class="bad">saturated</span>' :
        p.queue_fill >= 0.6 ? '<span class="warn">deferring low priorities</span>' : '<span class="ok">ok</span>';
      h += '<tr><td>' + esc(p.name) + (p.spot ? ' <small>(spot)</small>' : '') + '</td><td>' + esc(tags) + '</td><td class="num">' + esc(p.workers) +
        '</td><td class="num">' + slotsCell(p) + '</td><td class="num">' + esc(p.running) + '</td><td>' + bar(p.utilisation) + pct(p.utilisation) +
        '</td><td class="num">' + esc(p.ready) + '</td><td>' + bar(p.queue_fill, p.queue_fill >= 0.6) + pct(p.queue_fill) + '</td><td>' + pressure +
        '</td><td class="num refused">' + refusedCell(p.refused_per_minute) + '</td><td class="num starving">' +
        (p.starving > 0 ? '<span class="bad">' + esc(p.starving) + '</span>' : '<span class="ok">0</span>') + '</td><td class="num wait">' +
        (p.wait_p99_seconds === undefined ? '<span class="muted">-</span>' : esc(p.wait_p99_seconds < 1 ? Math.round(1000 * p.wait_p99_seconds) + ' ms' : p.wait_p99_seconds.toFixed(1) + ' s')) + '</td><td class="window">' + capWindow(p.capacity_window) + '</td><td class="num">' + (p.price_per_slot_hour || 0).toFixed(4) + '</td></tr>';
    }
    h += '</table>';
    if (g.refused_per_minute) {
      const r = Object.entries(g.refused_per_minute).filter(e => e[1] > 0);
      h += '<p class="refusals">Submits this server refused per minute: ' + (r.length ? r.map(e => '<span class="bad">' + esc(e[0]) + ' ' + e[1].toFixed(1) + '</span>').join(', ') : '<span class="ok">none</span>') + '</p>';
    }
  }
  view().innerHTML = h + historyHTML + overviewCost;
  sizeBars();
}

// ---- tasks -------------------------------------------------------------------
const taskFields = [['id', 'id'], ['state', 'state'], ['type', 'type'], ['tenant', 'tenant'], ['pool', 'pool'], ['region', 'region'],
  ['created_after', 'created after'], ['created_before', 'created before'], ['payload', 'payload contains (operators)']];
async function tasks(q) {
  let h = '<h1>Tasks</h1><form id="task-search" class="filters">';
  for (const [k, label] of taskFields) {
    h += '<label>' + esc(label) + '<input name="' + k + '" value="' + esc(q.get(k) || '') + '" size="' + (k === 'id' ? 30 : 14) + '"></label>';
  }
  h += '<button type="submit">Search</button></form><div id="task-results"></div>';
  view().innerHTML = h;
  $('#task-search').addEventListener('submit', ev => {
    ev.preventDefault();
    const p = params(ev.target);
    const id = p.get('id');
    location.hash = id ? '#/task/' + encodeURIComponent(id) : '#/tasks?' + p.toString();
  });
  const p = new URLSearchParams(q);
  p.delete('id');
  const d = await api('GET', '/v1/tasks?' + p.toString());
  let r = partial(d) + '<table id="task-table"><tr><th>id</th><th>region</th><th>state</th><th>type</th><th>tenant</th><th>pool</th><th>attempts</th><th>created</th></tr>';
  for (const t of d.tasks) {
    r += '<tr><td>' + taskLink(t.id) + '</td><td class="region">' + esc(t.held_by) + '</td><td>' + state(t.state) + '</td><td>' + esc(t.type) + '</td><td>' +
      esc(t.tenant) + '</td><td>' + esc(t.pool) + '</td><td class="num">' + esc(t.attempts) + '</td><td>' + time(t.created_at) + '</td></tr>';
  }
  r += '</table>' + (d.tasks.length ? '' : '<p class="muted">no task matches</p>');
  if (d.next_cursor) {
    p.set('cursor', d.next_cursor);
    r += '<p><a href="#/tasks?' + esc(p.toString()) + '">next page</a></p>';
  }
  $('#task-results').innerHTML = r;
}

// taskPage renders a task and keeps it current: the stream's updates and
// an action's reload go through one queue, one render at a time, and a
// state already shown is not drawn again.
async function taskPage(id) {
  const path = '/v1/tasks/' + encodeURIComponent(id);
  let shown = '', queue = Promise.resolve();
  const show = t => {
    const done = queue.then(async () => {
      const s = JSON.stringify(t);
      if (s === shown) return;
      shown = s;
      await renderTask(t, reload);
    });
    queue = done.catch(() => {});
    return done;
  };
  const reload = async () => show(await api('GET', path));
  await reload();
  startLive('task=' + encodeURIComponent(id), {task: show});
}

async function renderTask(t, reload) {
  const id = t.id;
  const tr = await api('GET', '/v1/tasks/' + encodeURIComponent(id) + '/trail');
  const row = (k, v) => v === undefined || v === null || v === '' ? '' : '<tr><th>' + esc(k) + '</th><td>' + v + '</td></tr>';
  let h = '<h1 id="task-page">Task ' + esc(t.id) + '</h1><table class="kv">' + row('state', '<span id="task-state">' + state(t.state) + '</span> ' + esc(t.reason || '')) +
    row('held by (region)', '<span id="held-by">' + esc(t.held_by) + '</span>') + row('home region', esc(t.region)) + row('pool', esc(t.pool)) +
    row('handed off to', esc(t.handed_off_to)) + row('worker', esc(t.worker)) + row('type', esc(t.type)) + row('tenant', esc(t.tenant)) +
    row('priority', esc(t.priority)) + row('attempts', esc(t.attempts) + ' of ' + esc((t.max_retries || 0) + 1)) +
    row('tags', esc(Object.entries(t.tags || {}).map(e => e.join('=')).join(', '))) + row('regions allowed', esc((t.regions || []).join(', '))) +
    row('price at claim', t.price_per_hour ? '$' + esc(t.price_per_hour) + '/slot-h' : '') +
    row('created', time(t.created_at)) + row('due', time(t.due_at)) + row('ready', time(t.ready_at)) + row('started', time(t.started_at)) +
    row('progress', t.progress ? '<span id="task-progress">' + esc(t.progress.percent) + '% ' + esc(t.progress.message || '') +
      (t.progress.attempt ? ' (attempt ' + esc(t.progress.attempt) + ')' : '') + '</span>' : '') +
    row('finished', time(t.finished_at)) + row('last error', esc(t.last_error)) + row('result', esc(t.result)) +
    row('result expires', time(t.result_expires_at)) + row('trace id', esc(t.trace_id)) + '</table>';
  h += '<div class="actions" id="task-actions"><button id="act-cancel">Cancel</button><button id="act-replay">Replay</button>' +
    '<label>priority <select id="act-prio">' + [0, 1, 2, 3, 4].map(p => '<option' + (p === t.priority ? ' selected' : '') + '>' + p + '</option>').join('') +
    '</select></label><button id="act-priority">Set priority</button></div>';
  h += '<h2>Payload</h2><pre>' + esc(t.payload === undefined ? 'null' : JSON.stringify(t.payload, null, 2)) + '</pre>';
  h += '<h2>Trail</h2><table id="trail"><tr><th>time</th><th>region</th><th>from</th><th>to</th><th>reason</th><th>by</th><th>attempt</th><th>error</th></tr>';
  for (const s of tr.transitions) {
    h += '<tr><td>' + time(s.ts) + '</td><td class="region">' + esc(s.region) + '</td><td>' + esc(s.from) + '</td><td>' + state(s.to) + '</td><td>' + esc(s.reason) +
      '</td><td>' + esc(s.by) + '</td><td class="num">' + esc(s.attempt) + '</td><td>' + esc(s.error) + '</td></tr>';
  }
  const handed = tr.transitions.filter(s => s.reason === 'HANDED_OFF').pop();
  h += '</table><h2>Placement</h2><p id="placed">Placed: <b>' + esc(t.held_by || t.region) + (t.pool ? '/' + esc(t.pool) : '') + '</b>' +
    (handed ? ' · handed off by ' + esc(handed.region) + ' at ' + time(handed.ts) + ' to ' + esc(handed.by) : ' · in its home region') + ' <small class="muted">(as recorded)</small></p>' +
    '<p class="muted">Where this spec would be placed now, with every candidate\'s reasons (a dry run: prices and fill move).</p><div id="explain"></div>';
  view().innerHTML = h;
  const path = '/v1/tasks/' + encodeURIComponent(id);
  $('#act-cancel').onclick = () => act('cancel task ' + id, () => api('POST', path + '/cancel'), reload);
  $('#act-replay').onclick = () => act('replay task ' + id, () => api('POST', path + '/replay'), reload);
  $('#act-priority').onclick = () => {
    const p = +$('#act-prio').value;
    act('set the priority of task ' + id + ' to ' + p, () => api('POST', path + '/priority', {priority: p}), reload);
  };
  try {
    const spec = {type: t.type, priority: t.priority, tags: t.tags, regions: t.regions};
    if (t.tenant) spec.tenant = t.tenant;
    const ex = await api('POST', '/v1/placement/explain', spec);
    let e = '<p>outcome: <b>' + esc(ex.outcome) + '</b>' + (ex.chosen ? ' → ' + esc(ex.chosen.region) + '/' + esc(ex.chosen.pool) : '') + '</p>';
    e += '<table><tr><th>region</th><th>pool</th><th>rejected</th><th>$/slot-h</th><th>expected s</th><th>score</th><th>fill</th></tr>';
    for (const c of ex.candidates) {
      e += '<tr' + (c.chosen ? ' class="ok chosen"' : '') + '><td>' + esc(c.region) + '</td><td>' + esc(c.pool) + '</td><td>' + esc(c.rejected) + (c.detail ? ' <small>' + esc(c.detail) + '</small>' : '') +
        '</td><td class="num">' + esc(c.price_per_slot_hour) + '</td><td class="num">' + esc((c.expected_seconds || 0).toFixed(2)) + '</td><td class="num">' + esc(c.score) +
        '</td><td>' + pct(c.queue_fill) + '</td></tr>';
    }
    $('#explain').innerHTML = e + '</table>';
  } catch (err) { $('#explain').textContent = 'explain: ' + err.message; }
  return t;
}

// ---- dead letters -----------------------------------------------------------
async function dlq(q) {
  let h = '<h1>Dead letters</h1><form id="dlq-filter" class="filters">';
  for (const k of ['type', 'tenant', 'region']) h += '<label>' + k + '<input name="' + k + '" value="' + esc(q.get(k) || '') + '"></label>';
  h += '<button type="submit">Filter</button></form>';
  const d = await api('GET', '/v1/dlq?' + q.toString());
  h += partial(d) + '<p><button id="replay">Replay selected</button> <button id="cancel">Cancel selected</button> <span id="bulk-result"></span></p>';
  h += '<table id="dlq-table"><tr><th><input type="checkbox" id="all"></th><th>id</th><th>region</th><th>type</th><th>tenant</th><th>attempts</th><th>failed</th><th>last error</th></tr>';
  for (const t of d.tasks) {
    h += '<tr><td><input type="checkbox" class="pick" value="' + esc(t.id) + '"></td><td>' + taskLink(t.id) + '</td><td class="region">' + esc(t.held_by) + '</td><td>' + esc(t.type) +
      '</td><td>' + esc(t.tenant) + '</td><td class="num">' + esc(t.attempts) + '</td><td>' + time(t.finished_at) + '</td><td>' + esc(t.last_error) + '</td></tr>';
  }
  h += '</table>' + (d.tasks.length ? '' : '<p class="muted">no dead letters</p>');
  if (d.next_cursor) { const p = new URLSearchParams(q); p.set('cursor', d.next_cursor); h += '<p><a href="#/dlq?' + esc(p.toString()) + '">next page</a></p>'; }
  view().innerHTML = h;
  $('#dlq-filter').addEventListener('submit', ev => { ev.preventDefault(); location.hash = '#/dlq?' + params(ev.target).toString(); });
  $('#all').onchange = ev => document.querySelectorAll('.pick').forEach(c => { c.checked = ev.target.checked; });
  const bulk = async op => {
    const ids = [...document.querySelectorAll('.pick:checked')].map(c => c.value);
    let ok = 0, errs = [];
    for (const id of ids) {
      try { await api('POST', '/v1/tasks/' + encodeURIComponent(id) + '/' + op); ok++; } catch (e) { errs.push(id + ': ' + e.message); }
    }
    $('#bulk-result').textContent = op + ': ' + ok + ' of ' + ids.length + ' done' + (errs.length ? ' — ' + errs.join('; ') : '');
    $('#bulk-result').className = errs.length ? 'bad' : 'ok';
  };
  $('#replay').onclick = () => bulk('replay');
  $('#cancel').onclick = () => bulk('cancel');
}

// ---- DAG runs -----------------------------------------------------------------
// dagList: GET /v1/dags, every region's runs newest first, with filters and a cursor.
async function dagList(q) {
  let h = '<form id="dag-filter" class="filters">';
  for (const k of ['name', 'state', 'tenant', 'region']) h += '<label>' + k + '<input name="' + k + '" value="' + esc(q.get(k) || '') + '" size="12"></label>';
  h += '<button type="submit">Filter</button></form>';
  const d = await api('GET', '/v1/dags?' + q.toString());
  h += partial(d) + '<table id="dag-table"><tr><th>run</th><th>name</th><th>state</th><th>tenant</th><th>home</th><th>nodes</th><th>created</th><th>finished</th></tr>';
  for (const r of d.runs) {
    const nodes = Object.entries(r.nodes || {}).sort().map(e => e[1] + ' ' + e[0]).join(', ');
    h += '<tr><td><a class="dag-link" href="#/dags/' + encodeURIComponent(r.id) + '">' + esc(r.id) + '</a></td><td>' + esc(r.name) + '</td><td>' + state(r.state) +
      '</td><td>' + esc(r.tenant) + '</td><td class="region">' + esc(r.region) + '</td><td>' + esc(nodes) + '</td><td>' + time(r.created_at) + '</td><td>' + time(r.finished_at) + '</td></tr>';
  }
  h += '</table>' + (d.runs.length ? '' : '<p class="muted">no DAG run matches</p>');
  if (d.next_cursor) { const p = new URLSearchParams(q); p.set('cursor', d.next_cursor); h += '<p><a href="#/dags?' + esc(p.toString()) + '">next page</a></p>'; }
  $('#dag').innerHTML = h;
  $('#dag-filter').addEventListener('submit', ev => { ev.preventDefault(); location.hash = '#/dags?' + params(ev.target).toString(); });
}

async function dags(id, q) {
  let h = '<h1>DAG runs</h1><form id="dag-open" class="filters"><label>run id<input name="id" size="34" value="' + esc(id || '') + '"></label><button type="submit">Open</button></form><div id="dag"></div>';
  view().innerHTML = h;
  $('#dag-open').addEventListener('submit', ev => { ev.preventDefault(); location.hash = '#/dags/' + encodeURIComponent(params(ev.target).get('id') || ''); });
  if (!id) return dagList(q);
  const d = await api('GET', '/v1/dags/' + encodeURIComponent(id));
  // Columns by depth: a node sits one column right of its deepest upstream.
  const depth = {}, byID = Object.fromEntries(d.nodes.map(n => [n.id, n]));
  const deep = (n, seen = new Set()) => {
    if (depth[n.id] !== undefined) return depth[n.id];
    if (seen.has(n.id)) return 0;
    seen.add(n.id);
    return depth[n.id] = Math.max(0, ...(n.depends_on || []).map(u => byID[u] ? deep(byID[u], seen) + 1 : 0));
  };
  d.nodes.forEach(n => deep(n));
  const cols = [];
  for (const n of d.nodes) (cols[depth[n.id]] = cols[depth[n.id]] || []).push(n);
  let g = '<p>' + esc(d.name || '') + ' · ' + state(d.state) + ' · tenant ' + esc(d.tenant) + ' · home ' + esc(d.region) + ' · created ' + time(d.created_at) + '</p>' +
    '<div class="actions"><button id="dag-cancel">Cancel run</button></div><div class="graph-wrap"><svg id="dag-edges"></svg><div class="graph">';
  for (const c of cols) {
    g += '<div class="col">' + (c || []).map(n => '<div class="node n-' + esc(n.state) + '" data-node="' + esc(n.id) + '"><b>' + esc(n.id) + '</b><small>' + esc(n.state) + (n.task_state ? ' · ' + esc(n.task_state) : '') +
      '</small><small>' + (n.depends_on && n.depends_on.length ? '← ' + esc(n.depends_on.join(', ')) : 'root') + '</small></div>').join('') + '</div>';
  }
  g += '</div></div><table><tr><th>node</th><th>state</th><th>task</th><th>task state</th><th>region</th><th>pool</th><th>attempts</th><th>rule</th></tr>';
  for (const n of d.nodes) {
    g += '<tr><td>' + esc(n.id) + '</td><td>' + esc(n.state) + ' ' + esc(n.reason) + '</td><td>' + (n.task_id && n.task_state ? taskLink(n.task_id) : '<span class="muted">not run</span>') + '</td><td>' + esc(n.task_state) +
      '</td><td>' + esc(n.region) + '</td><td>' + esc(n.pool) + '</td><td class="num">' + esc(n.attempts) + '</td><td>' + esc(n.trigger_rule) + '</td></tr>';
  }
  $('#dag').innerHTML = g + '</table>';
  drawEdges(d.nodes);
  $('#dag-cancel').onclick = () => act('cancel DAG run ' + id, () => api('POST', '/v1/dags/' + encodeURIComponent(id) + '/cancel'), () => dags(id, q));
}

// ---- batches --------------------------------------------------------------------
// batches: GET /v1/batches (every region's, newest first) or one batch with
// its counts, failed members, callbacks and a cancel.
async function batches(id, q) {
  view().innerHTML = '<h1>Batches</h1><form id="batch-open" class="filters"><label>batch id<input name="id" size="34" value="' + esc(id || '') + '"></label><button type="submit">Open</button></form><div id="batch"></div>';
  $('#batch-open').addEventListener('submit', ev => { ev.preventDefault(); location.hash = '#/batches/' + encodeURIComponent(params(ev.target).get('id') || ''); });
  const counts = c => esc(c.total) + ': ' + esc(c.succeeded) + ' succeeded, ' + esc(c.failed) + ' failed, ' + esc(c.canceled) + ' canceled';
  if (!id) {
    const d = await api('GET', '/v1/batches?' + q.toString());
    let h = partial(d) + '<table id="batch-table"><tr><th>batch</th><th>name</th><th>state</th><th>tenant</th><th>home</th><th>members</th><th>callback</th><th>created</th></tr>';
    for (const b of d.batches) {
      h += '<tr><td><a class="batch-link" href="#/batches/' + encodeURIComponent(b.id) + '">' + esc(b.id) + '</a></td><td>' + esc(b.name) + '</td><td>' + state(b.state) + '</td><td>' + esc(b.tenant) +
        '</td><td class="region">' + esc(b.region) + '</td><td>' + counts(b.counts) + '</td><td>' + esc(b.callback) + '</td><td>' + time(b.created_at) + '</td></tr>';
    }
    h += '</table>' + (d.batches.length ? '' : '<p class="muted">no batch</p>');
    if (d.next) { const p = new URLSearchParams(q); p.set('after', d.next); h += '<p><a href="#/batches?' + esc(p.toString()) + '">next page</a></p>'; }
    $('#batch').innerHTML = h;
    return;
  }
  const b = await api('GET', '/v1/batches/' + encodeURIComponent(id));
  // A callback's task exists once it was sent; before, its id only.
  const cb = t => b.callback === 'waiting' ? esc(t) : taskLink(t);
  let h = '<p>' + esc(b.name || '') + ' · ' + state(b.state) + ' · tenant ' + esc(b.tenant) + ' · home ' + esc(b.region) + ' · created ' + time(b.created_at) +
    (b.completed_at ? ' · completed ' + time(b.completed_at) : '') + (b.cancel_requested ? ' · <span class="bad">cancel requested</span>' : '') + '</p>' +
    '<div class="actions"><button id="batch-cancel">Cancel batch</button></div>' +
    '<p id="batch-counts">members ' + counts(b.counts) + '</p><p>callback ' + esc(b.callback) +
    (b.on_complete_id ? ' · on_complete ' + cb(b.on_complete_id) : '') + (b.on_success_id ? ' · on_success ' + cb(b.on_success_id) : '') + '</p>';
  const failed = b.failed || [];
  if (failed.length) h += '<h2>Failed members</h2><ul id="batch-failed">' + failed.map(t => '<li>' + taskLink(t) + '</li>').join('') + '</ul>';
  $('#batch').innerHTML = h;
  $('#batch-cancel').onclick = () => act('cancel batch ' + id, () => api('POST', '/v1/batches/' + encodeURIComponent(id) + '/cancel'), () => batches(id, q));
}

// drawEdges draws an arrow from each upstream node to the node that
// depends on it, over the graph's columns.
function drawEdges(nodes) {
  const svg = $('#dag-edges'), wrap = svg.parentElement, base = wrap.getBoundingClientRect();
  const box = id => { const e = wrap.querySelector('.node[data-node="' + CSS.escape(id) + '"]'); return e && e.getBoundingClientRect(); };
  svg.setAttribute('width', Math.ceil(base.width));
  svg.setAttribute('height', Math.ceil(base.height));
  const ns = 'http://www.w3.org/2000/svg';
  for (const n of nodes) {
    const to = box(n.id);
    for (const u of n.depends_on || []) {
      const from = box(u);
      if (!from || !to) continue;
      const l = document.createElementNS(ns, 'line');
      l.setAttribute('x1', from.right - base.left);
      l.setAttribute('y1', from.top + from.height / 2 - base.top);
      l.setAttribute('x2', to.left - base.left);
      l.setAttribute('y2', to.top + to.height / 2 - base.top);
      l.setAttribute('class', 'edge');
      l.dataset.edge = u + '>' + n.id;
      svg.appendChild(l);
    }
  }
}

// ---- schedules ------------------------------------------------------------------
async function schedules() {
  const d = await api('GET', '/v1/schedules');
  let h = '<h1>Schedules</h1><table id="schedules"><tr><th>name</th><th>tenant</th><th>cron</th><th>zone</th><th>home</th><th>task type</th><th>paused</th><th>next slot</th><th>last slot</th><th>last outcome</th><th>last task</th><th></th></tr>';
  for (const s of d.schedules || []) {
    const tenant = s.task ? s.task.tenant : s.dag && s.dag.tenant;
    h += '<tr><td><a class="sched-link" href="#/schedules/' + encodeURIComponent(s.name) + (tenant ? '?tenant=' + encodeURIComponent(tenant) : '') + '">' + esc(s.name) + '</a></td><td>' + esc(tenant) + '</td><td>' + esc(s.cron) + '</td><td>' + esc(s.timezone) + '</td><td>' + esc(s.home_region) + '</td><td>' + esc(s.task && s.task.type) +
      '</td><td>' + (s.paused ? 'yes' : 'no') + '</td><td>' + time(s.next_slot) + '</td><td>' + time(s.last_slot) + '</td><td>' + esc(s.last_outcome) + '</td><td>' +
      (s.last_task_id ? taskLink(s.last_task_id) : '') + '</td><td><button class="sched-toggle" data-name="' + esc(s.name) + '" data-op="' + (s.paused ? 'resume' : 'pause') + '">' +
      (s.paused ? 'Resume' : 'Pause') + '</button></td></tr>';
  }
  view().innerHTML = h + '</table>';
  document.querySelectorAll('.sched-toggle').forEach(b => {
    b.onclick = () => act(b.dataset.op + ' schedule ' + b.dataset.name,
      () => api('POST', '/v1/schedules/' + encodeURIComponent(b.dataset.name) + '/' + b.dataset.op), schedules);
  });
}

// schedulePage: one schedule and its grid of periods (columns, oldest
// first) × nodes (rows), each cell the node's state in the period's newest
// run, linking to its task (GET /v1/schedules/{name}/grid).
async function schedulePage(name, q) {
  const qs = q.get('tenant') ? '?tenant=' + encodeURIComponent(q.get('tenant')) : '';
  const n = q.get('periods') || '12';
  const path = '/v1/schedules/' + encodeURIComponent(name);
  const [s, g] = await Promise.all([api('GET', path + qs), api('GET', path + '/grid' + (qs ? qs + '&' : '?') + 'periods=' + encodeURIComponent(n))]);
  let h = '<h1>Schedule ' + esc(s.name) + '</h1><p>cron <code>' + esc(s.cron) + '</code> ' + esc(s.timezone || 'UTC') + ', home ' + esc(s.home_region) +
    (s.paused ? ', <span class="warn">paused</span>' : '') + ', next slot ' + time(s.next_slot) + '</p>';
  const isDAG = !!(s.dag || (s.depends_on_schedules || []).length);
  h += '<h2>Last ' + esc(g.periods.length) + ' periods</h2><table id="grid" class="grid"><tr><th>node</th>';
  for (const p of g.periods) {
    const label = esc(p.period.period_start.replace('T', ' ').replace(/(:00)?(Z|[+-]\d\d:\d\d)$/, ''));
    const run = p.run_id ? '<a href="#/' + (isDAG ? 'dags' : 'task') + '/' + encodeURIComponent(p.run_id) + '">' + label + '</a>' : label;
    h += '<th class="g-period" data-period="' + esc(p.period.period_start) + '" title="' + esc(p.period.period_start + ' → ' + p.period.period_end) + '">' + run +
      (p.state ? '<br><span class="state s-' + esc(p.state) + '">' + esc(p.state) + '</span>' : '<br><span class="muted">no run</span>') + (p.runs > 1 ? ' <small>×' + esc(p.runs) + '</small>' : '') + '</th>';
  }
  h += '</tr>';
  g.nodes.forEach((node, i) => {
    h += '<tr><td>' + esc(node) + '</td>';
    for (const p of g.periods) {
      const c = p.cells[i] || {};
      const title = esc((c.state || 'no run') + (c.reason ? ' ' + c.reason : ''));
      const box = '<span class="cell g-' + esc(c.state || 'none') + '" title="' + title + '">' + esc(c.state ? c.state.slice(0, 1) : '·') + '</span>';
      h += '<td class="g-cell" data-node="' + esc(node) + '" data-state="' + esc(c.state || '') + '">' + (c.task_id ? '<a class="task-link" href="#/task/' + encodeURIComponent(c.task_id) + '">' + box + '</a>' : box) + '</td>';
    }
    h += '</tr>';
  });
  view().innerHTML = h + '</table><p class="muted">S success · F failed · C canceled · R released (running) · W waiting · no run: not fired, skipped or expired. A period rerun shows its newest run (×n runs).</p>';
}

// ---- workers ------------------------------------------------------------------------
// workers: every region's pools as the region leader last published them:
// live workers, their slots, what runs and waits.
async function workers() {
  const d = await api('GET', '/v1/regions');
  let h = '<h1>Workers</h1><table id="workers"><tr><th>region</th><th>pool</th><th>live workers</th><th>slots</th><th>running</th><th>utilisation</th><th>ready</th><th>paused</th><th>tags</th></tr>';
  for (const r of d.regions || []) {
    for (const p of r.pools || []) {
      h += '<tr><td class="region">' + esc(r.name) + (r.stale ? ' <small class="warn">stale</small>' : '') + '</td><td>' + esc(p.name) + '</td><td class="num' + (p.workers ? '' : ' bad') + '">' + esc(p.workers || 0) +
        '</td><td class="num">' + slotsCell(p) + '</td><td class="num">' + esc(p.running || 0) + '</td><td>' + bar(p.utilisation, p.utilisation > 0.9) + pct(p.utilisation) +
        '</td><td class="num">' + esc(p.ready || 0) + '</td><td>' + (p.paused ? 'yes' : 'no') + '</td><td>' + esc(Object.entries(p.tags || {}).map(e => e.join('=')).join(', ')) + '</td></tr>';
    }
  }
  view().innerHTML = h + '</table>';
  sizeBars();
}

// ---- budgets ------------------------------------------------------------------------
// budgets: each tenant's monthly budget against its spend this UTC month.
async function budgets() {
  const d = await api('GET', '/v1/cost?group_by=tenant');
  let h = '<h1>Budgets</h1>' + partial(d) + '<table id="budgets"><tr><th>tenant</th><th>spent (USD)</th><th>budget (USD)</th><th>used</th><th>state</th><th>over budget</th><th>price cap</th></tr>';
  for (const b of d.budgets || []) {
    h += '<tr><td>' + esc(b.tenant) + '</td><td class="num">' + esc(b.spent_usd.toFixed(4)) + '</td><td class="num">' + esc(b.monthly_budget_usd) + '</td><td>' + bar(b.used_ratio, b.used_ratio >= 0.8) + pct(b.used_ratio) +
      '</td><td class="' + (b.state === 'ok' ? 'ok' : 'bad') + '">' + esc(b.state) + '</td><td>' + esc(b.over_budget) + '</td><td class="num">' + esc(b.price_cap || '') + '</td></tr>';
  }
  view().innerHTML = h + '</table>' + ((d.budgets || []).length ? '' : '<p class="muted">no tenant has a budget (budgets: in the region config)</p>');
  sizeBars();
}

// ---- cost ---------------------------------------------------------------------------
async function cost(q) {
  if (!q.get('group_by')) q.set('group_by', 'tenant,pool,region');
  const d = await api('GET', '/v1/cost?' + q.toString());
  const rows = d.rows || [];
  const cols = rows.length ? Object.keys(rows[0]) : [];
  let h = '<h1>Cost</h1><p class="muted">grouped by ' + esc(q.get('group_by')) + '</p>' + partial(d) + '<table id="cost"><tr>' + cols.map(c => '<th>' + esc(c) + '</th>').join('') + '</tr>';
  for (const r of rows) h += '<tr>' + cols.map(c => '<td' + (typeof r[c] === 'number' ? ' class="num"' : '') + '>' + esc(typeof r[c] === 'number' ? +r[c].toFixed(6) : r[c]) + '</td>').join('') + '</tr>';
  view().innerHTML = h + '</table>';
}

// ---- routing ---------------------------------------------------------------------
async function route() {
  stopLive();
  $('#confirm').hidden = true;
  $('#action-result').textContent = '';
  $('#action-result').className = '';
  who();
  const [path, qs] = (location.hash.slice(1) || '/').split('?');
  const q = new URLSearchParams(qs || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    switch (parts[0]) {
      case undefined: await overview(); break;
      case 'tasks': await tasks(q); break;
      case 'task': await taskPage(parts[1]); break;
      case 'dlq': await dlq(q); break;
      case 'dags': await dags(parts[1], q); break;
      case 'batches': await batches(parts[1], q); break;
      case 'schedules': await (parts[1] ? schedulePage(parts[1], q) : schedules()); break;
      case 'cost': await cost(q); break;
      case 'workers': await workers(); break;
      case 'budgets': await budgets(); break;
      default: view().innerHTML = '<p>no such page</p>';
    }
  } catch (e) { if (e.message !== 'unauthorized') fail(e); }
}
window.addEventListener('hashchange', route);
(async () => {
  // Auth off (ax dev) answers without a token; with auth on, sign in first.
  try { await api('GET', '/v1/regions'); route(); } catch (e) { if (e.message !== 'unauthorized') route(); }
})();
