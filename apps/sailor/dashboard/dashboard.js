'use strict';
const POLL_MS = 500;
const SVGNS = 'http://www.w3.org/2000/svg';
const state = { info: null, points: [], curveId: null, replans: [], nodeZones: new Map(),
  phases: null };
// /api/metrics' phases_s, in the order an iteration runs them.
const PHASES = ['data', 'forward_backward', 'send_wait', 'recv_wait', 'all_reduce', 'optimizer',
  'checkpoint', 'bookkeeping'];
const $ = (id) => document.getElementById(id);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
async function getJson(path) {
  const r = await fetch(path, { cache: 'no-store' });
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}
const fmt = (x, d) => (x === undefined || x === null || !isFinite(x)) ? '-' : Number(x).toFixed(d);
const fmtInt = (x) => Math.round(x).toLocaleString('en-US');
const clock = (ms) => new Date(ms).toISOString().substring(11, 19);

function zoneColor(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) % 360;
  return 'hsl(' + h + ', 60%, 92%)';
}

function renderInfo(info) {
  $('job').textContent = info.cluster + ' \u00b7 ' + info.model.name + ' (' +
    fmtInt(info.model.parameters) + ' parameters)';
  const where = info.dashboard.host + ':' + info.dashboard.port;
  $('bound').textContent = 'Served read-only by the coordinator on ' + where +
    (info.dashboard.loopback_only ? ' (loopback only).' : ' (reachable from other machines).');
  if (!info.dashboard.loopback_only) {
    const w = $('remote-warning');
    w.textContent = 'This dashboard is bound to ' + where + ', not to loopback ' +
      '(--dashboard-allow-remote): anyone who can reach that address sees this job.';
    w.hidden = false;
  }
  const links = $('links');
  links.replaceChildren();
  for (const l of info.links)
    links.append(el('li', {}, l.from + ' \u21c4 ' + l.to + ': ' + fmt(l.latency_ms, 1) +
      ' ms, ' + fmt(l.bandwidth_gbytes_per_s, 2) + ' GB/s, egress $' +
      fmt(l.egress_usd_per_gb, 3) + '/GB'));
}

function nodeState(n, status) {
  const training = status.training && status.training.completed < status.training.total;
  return (n.state === 'ready' && training) ? 'training' : n.state;
}

function renderZones(status, events) {
  for (const e of events)
    if (e.kind === 'join') {
      const m = /joined \(([^,]+),/.exec(e.text);
      if (m) state.nodeZones.set(e.node, m[1]);
    }
  const live = new Set(status.nodes.map((n) => n.name));
  const gone = new Map();
  for (const e of events)
    if ((e.kind === 'lost' || e.kind === 'preempted') && !live.has(e.node)) gone.set(e.node, e);
    else if (e.kind === 'join') gone.delete(e.node);
  const zoneNames = state.info ? state.info.zones.map((z) => z.name) : status.zones;
  const box = $('zones');
  box.replaceChildren();
  for (const zone of zoneNames) {
    const z = el('div', { class: 'zone', 'data-zone': zone });
    z.style.borderColor = zoneColor(zone).replace('92%', '70%');
    z.append(el('h3', {}, zone));
    const zi = state.info && state.info.zones.find((x) => x.name === zone);
    if (zi) {
      const gpus = Object.entries(zi.gpus).map(([t, g]) => g.count + ' x ' + t + ' ($' +
        fmt(g.usd_per_hour, 2) + '/h)').join(', ');
      z.append(el('div', { class: 'muted' }, zi.region + ': ' + gpus));
    }
    for (const n of status.nodes.filter((x) => x.zone === zone)) {
      const s = nodeState(n, status);
      const d = el('div', { class: 'node state-' + s, 'data-node': n.name });
      const age = n.heartbeat_age_ms < 0 ? 'no heartbeat yet' : 'heartbeat ' + n.heartbeat_age_ms + ' ms ago';
      const roles = n.roles.map((r) => 's' + r.stage + '/r' + r.replica).join(' ');
      d.append(el('span', {}, n.name + ' \u00b7 ' + n.devices + ' x ' + n.gpu_type +
        (roles ? ' \u00b7 ' + roles : '')));
      d.append(el('span', {}, s + ' \u00b7 ' + age));
      z.append(d);
    }
    for (const [name, e] of gone) {
      if (state.nodeZones.get(name) !== zone) continue;
      const d = el('div', { class: 'node ' + e.kind + ' state-' + e.kind, 'data-node': name });
      d.append(el('span', {}, name), el('span', {}, e.kind + ' at ' + clock(e.unix_ms)));
      z.append(d);
    }
    box.append(z);
  }
}

function renderPlan(plan) {
  $('plan-version').textContent = plan.plan_version ? 'v' + plan.plan_version : '';
  const grid = $('plan-grid');
  grid.replaceChildren();
  if (!plan.plan) {
    grid.dataset.stages = '0';
    $('plan-summary').textContent = plan.summary || 'no plan yet (' + plan.phase + ')';
    return;
  }
  const p = plan.plan;
  const width = Math.max(...p.stages.map((s) => s.replicas.length));
  const head = el('tr');
  head.append(el('th', {}, 'stage'), el('th', {}, 'layers'));
  for (let r = 0; r < width; ++r) head.append(el('th', {}, 'replica ' + r));
  grid.append(head);
  for (const s of p.stages) {
    const row = el('tr', { 'data-stage': s.stage });
    row.append(el('th', {}, String(s.stage)),
      el('td', {}, s.first_layer + '\u2013' + (s.first_layer + s.num_layers - 1) + ' (' +
        s.num_layers + (s.recompute ? ', recompute' : '') + ')'));
    for (let r = 0; r < width; ++r) {
      const rep = s.replicas[r];
      const td = el('td', { class: 'cell' });
      if (rep) {
        td.style.background = zoneColor(rep.zone);
        td.textContent = rep.gpu_type + ' \u00b7 ' + rep.zone + ' \u00b7 TP ' + rep.tp +
          (rep.nodes.length ? ' \u00b7 ' + rep.nodes.join(', ') : '');
      }
      row.append(td);
    }
    grid.append(row);
  }
  grid.dataset.stages = String(p.stages.length);
  const plural = (n, word) => n + ' ' + word + (n === 1 ? '' : 's');
  $('plan-summary').textContent = plural(p.stages.length, 'stage') + ' on ' +
    plural(plan.gpus, 'device') + ', ' +
    'micro-batch ' + p.micro_batch + ', global batch ' + p.global_batch + '; predicted ' +
    (plan.predicted_iteration_s > 0 ? fmt(plan.predicted_iteration_s, 4) + ' s/iteration, ' +
      fmtInt(plan.predicted_tokens_per_s) + ' tokens/s' : 'time: none yet') +
    '; $' + fmt(plan.usd_per_hour, 3) + '/hour';
}

// A line chart: series of {x, y} on a shared x axis, vertical marks at re-plans.
function chart(id, series, marks) {
  const box = $(id);
  const W = 560, H = 220, L = 52, R = 10, T = 10, B = 26;
  box.replaceChildren();
  const all = series.flatMap((s) => s.values);
  box.dataset.points = String(series.length ? series[0].values.length : 0);
  if (!all.length) {
    box.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, 'no iterations yet'));
    return;
  }
  let x0 = Math.min(...all.map((p) => p.x)), x1 = Math.max(...all.map((p) => p.x));
  let y0 = Math.min(...all.map((p) => p.y)), y1 = Math.max(...all.map((p) => p.y));
  if (x1 === x0) x1 = x0 + 1;
  const pad = (y1 - y0) * 0.08 || Math.abs(y1) * 0.1 || 1;
  y0 -= pad; y1 += pad;
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  box.append(svg('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }),
    svg('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [y0 + pad, (y0 + y1) / 2, y1 - pad])
    box.append(svg('text', { x: L - 4, y: sy(v) + 4, 'text-anchor': 'end' }, fmt(v, v < 1 ? 4 : 2)));
  for (const v of [x0, Math.round((x0 + x1) / 2), x1])
    box.append(svg('text', { x: sx(v), y: H - 8, 'text-anchor': 'middle' }, 'it ' + (v + 1)));
  for (const m of marks || []) {
    if (m.x < x0 || m.x > x1) continue;
    box.append(svg('line', { class: 'replan', x1: sx(m.x), y1: T, x2: sx(m.x), y2: H - B }),
      svg('text', { class: 'replan-label', x: sx(m.x) + 3, y: T + 10 }, m.label));
  }
  for (const s of series) {
    if (!s.values.length) continue;
    const pts = s.values.map((p) => sx(p.x).toFixed(1) + ',' + sy(p.y).toFixed(1)).join(' ');
    box.append(svg('polyline', { class: 'series-' + s.cls, points: pts }));
    if (s.dots && s.values.length <= 200)
      for (const p of s.values)
        box.append(svg('circle', { class: 'dot-' + s.cls, cx: sx(p.x), cy: sy(p.y), r: 2.5 }));
  }
}

// A prediction holds for its plan: drawn as steps that change where the plan changed.
function steps(pts, value) {
  const out = [];
  for (const p of pts) {
    if (!(p.predicted_s > 0)) continue;
    const y = value(p);
    if (out.length && out[out.length - 1].y !== y) out.push({ x: p.iteration, y: out[out.length - 1].y });
    out.push({ x: p.iteration, y });
  }
  return out;
}

// The validation loss, one point per validation pass (the job's eval_every), joined by a
// line; empty while there is none. From the status's training.val_loss_curve ([iterations
// completed, loss] pairs: x is the 0-based iteration, as on the loss curve) where the
// coordinator sends one, and from the metrics points that carry a val_loss.
function validationCurve(status, pts) {
  const byX = new Map();
  const ok = (v) => typeof v === 'number' && isFinite(v);
  for (const p of pts)
    if (ok(p.val_loss)) byX.set(p.iteration, p.val_loss);
  const curve = status.training && status.training.val_loss_curve;
  if (Array.isArray(curve))
    for (const c of curve)
      if (Array.isArray(c) && ok(c[0]) && ok(c[1])) byX.set(c[0] - 1, c[1]);
  return [...byX.entries()].sort((a, b) => a[0] - b[0]).map(([x, y]) => ({ x, y }));
}

function renderTraining(status) {
  const pts = state.points;
  const marks = state.replans.filter((m) => m.plan_version > 1 || m.first_iteration > 0)
    .map((m) => ({ x: m.first_iteration, label: 'v' + m.plan_version }));
  const val = validationCurve(status, pts);
  chart('loss-chart', [
    { cls: 'loss', dots: true, values: pts.map((p) => ({ x: p.iteration, y: p.loss })) },
    { cls: 'val-loss', dots: true, values: val }], marks);
  $('loss-chart').dataset.valPoints = String(val.length);
  $('val-legend').hidden = val.length === 0;
  chart('time-chart', [
    { cls: 'measured', dots: true, values: pts.map((p) => ({ x: p.iteration, y: p.measured_s })) },
    { cls: 'predicted', values: steps(pts, (p) => p.predicted_s) }],
  marks);
  chart('tps-chart', [
    { cls: 'measured', dots: true, values: pts.map((p) => ({ x: p.iteration, y: p.tokens_per_s })) },
    { cls: 'predicted', values: steps(pts, (p) => p.tokens / p.predicted_s) }],
  marks);
  renderPhases(state.phases);
  $('validation-note').textContent = val.length ? ''
    : 'No validation loss reported yet: it is drawn once iterations carry one.';
  if (!status.training) return;
  let text = status.training.summary;
  if (pts.length) {
    const last = pts[pts.length - 1];
    text += ' \u00b7 last iteration ' + fmt(last.measured_s, 4) + ' s measured, ' +
      fmt(last.predicted_s, 4) + ' s predicted, ' + fmtInt(last.tokens_per_s) + ' tokens/s';
  }
  $('training-summary').textContent = text;
  renderCheckpoint(status.training.checkpoint);
}

// The newest complete checkpoint's age (plans that write checkpoints), flagged when the
// coordinator warns that it is more than 3 intervals behind.
function renderCheckpoint(c) {
  const line = $('checkpoint-age');
  line.hidden = !c;
  if (!c) return;
  let text = c.iterations > 0
    ? 'Newest complete checkpoint: after iteration ' + c.iterations + ', ' +
      c.behind_iterations + (c.behind_iterations === 1 ? ' iteration' : ' iterations') + ' behind' +
      (c.age_s >= 0 ? ' (' + fmt(c.age_s, 1) + ' s ago)' : '')
    : 'No complete checkpoint yet';
  text += ', checkpoint every ' + c.every;
  if (c.warning) text = 'Warning: ' + c.warning;
  line.textContent = text;
  line.classList.toggle('warning', !!c.warning);
  line.dataset.behind = c.behind_iterations;
}

// The newest iterations split by phase: medians of the slowest rank's, as a stacked bar and
// a table (the phases' medians need not add up to the iteration's median exactly).
function renderPhases(p) {
  const table = $('phases');
  const body = table.tBodies[0];
  const bar = $('phases-bar');
  body.replaceChildren();
  bar.replaceChildren();
  const n = p ? p.iterations : 0;
  table.dataset.iterations = String(n);
  if (!n) {
    $('phases-note').textContent = '(no iterations yet)';
    return;
  }
  const total = PHASES.reduce((sum, name) => sum + (p[name] || 0), 0) || 1;
  for (const name of PHASES) {
    const s = p[name] || 0;
    const share = s / total;
    const part = el('span', { class: 'phase-' + name, title: name + ' ' + fmt(s, 4) + ' s' });
    part.style.width = (100 * share).toFixed(2) + '%';
    bar.append(part);
    const row = el('tr', { 'data-phase': name });
    const swatch = el('td', { class: 'swatch phase-' + name });
    row.append(el('td', {}, name.replace(/_/g, ' ')), el('td', {}, fmt(s, 4)),
      el('td', {}, fmt(100 * share, 1) + '%'));
    row.prepend(swatch);
    body.append(row);
  }
  $('phases-note').textContent = '(median of the newest ' + n + (n === 1 ? ' iteration' :
    ' iterations') + ', slowest rank: ' + fmt(p.iteration, 4) + ' s per iteration)';
}

function renderEvents(events) {
  const body = $('events').tBodies[0];
  body.replaceChildren();
  for (const e of events.slice().reverse()) {
    const row = el('tr', { class: 'kind-' + e.kind, 'data-kind': e.kind });
    let what = e.text;
    if (e.reason && e.kind === 'plan') what += ' \u2014 because: ' + e.reason;
    if (e.recovery_s !== undefined) what += ' \u2014 training resumed ' + fmt(e.recovery_s, 2) + ' s after the loss';
    row.append(el('td', {}, clock(e.unix_ms)), el('td', {}, e.kind), el('td', {}, e.node || ''),
      el('td', {}, what));
    body.append(row);
  }
}

async function fetchMetrics() {
  const since = state.points.length ? state.points[state.points.length - 1].iteration + 1 : 0;
  let m = await getJson('/api/metrics?since=' + since);
  if (state.curveId !== null && m.curve_id !== state.curveId) {
    state.points = [];
    m = await getJson('/api/metrics?since=0');
  }
  state.curveId = m.curve_id;
  state.points = state.points.concat(m.points);
  state.replans = m.replans;
  state.phases = m.phases_s || null;
  return m;
}

async function refresh() {
  try {
    if (!state.info) {
      state.info = await getJson('/api/info');
      renderInfo(state.info);
    }
    const [status, plan, events] = await Promise.all([getJson('/api/status'),
      getJson('/api/plan'), getJson('/api/events'), fetchMetrics()]);
    $('phase').textContent = status.phase;
    renderZones(status, events.events);
    renderPlan(plan);
    renderTraining(status);
    renderEvents(events.events);
    $('updated').textContent = 'updated ' + new Date().toISOString().substring(11, 19) + ' UTC';
  } catch (err) {
    $('phase').textContent = 'disconnected';
    $('updated').textContent = String(err.message || err);
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}
refresh();
