// expctl serve's pages. Every stored string reaches the page through textContent or an attribute
// set with setAttribute (never innerHTML), every link is built from our own paths with
// encodeURIComponent, and each view keeps its state in its URL (share it as it is).
'use strict';

// charts: keyed by metric names a run logged (any text, "__proto__" too), so without a prototype.
const expctl = (window.__expctl = { charts: Object.create(null), ready: false, errors: [] });

// ---- small DOM helpers ---------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = String(value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const main = () => document.getElementById('main');
// The pages, from serve's route table (src/expctl/serve/routes.cpp), which the server writes into
// index.html: a link to a page is made from this list, never from a path written here.
const pageList = JSON.parse(document.getElementById('pages').textContent);
function pagePath(view) {
  const page = pageList.find((p) => p.view === view);
  if (!page) throw new Error('no page of the route table draws the view ' + view);
  return page.path;
}
// Replaces a node's children as el() appends them: nested lists flattened, null and undefined
// left out (replaceChildren itself would print them as "null" or "[object HTMLElement],...").
function put(node, ...children) { node.replaceChildren(...children.flat(Infinity).filter((c) => c !== undefined && c !== null)); }
function show(...nodes) { put(main(), ...nodes); }
function query() { return new URLSearchParams(location.search); }
function setQuery(params) {
  const clean = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (Array.isArray(value)) for (const item of value) clean.append(key, String(item));
    else if (value !== undefined && value !== null && value !== '' && value !== false) clean.set(key, String(value));
  }
  const text = clean.toString();
  history.replaceState(null, '', location.pathname + (text ? '?' + text : ''));
}
function link(path, params, text) {
  return el('a', { href: path + '?' + new URLSearchParams(params).toString(), text });
}
function searchParams(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (Array.isArray(value)) for (const item of value) search.append(key, String(item));
    else search.set(key, String(value));
  }
  return search;
}
async function api(path, params) {
  const url = path + '?' + searchParams(params).toString();
  const response = await fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  const body = await response.json().catch(() => ({ error: 'the server answered ' + response.status }));
  if (!response.ok) throw new Error(body.error || 'the server answered ' + response.status);
  return body;
}
function failure(error) {
  expctl.errors.push(String(error && error.message || error));
  return el('p', { class: 'error', text: String(error && error.message || error) });
}
// A number in `digits` significant digits, trailing zeros of the fraction dropped; integers and
// numbers of more integer digits than that in full (3000 stays 3000, 12345.6 is 12346).
function number(v, digits = 4) {
  if (v === null || v === undefined) return '-';
  const n = Number(v);
  if (!Number.isFinite(n)) return String(n);
  if (Number.isInteger(n) || Math.abs(n) >= 10 ** digits) return String(Math.round(n));
  return n.toPrecision(digits).replace(/(\.\d*?)0+(e|$)/, '$1$2').replace(/\.(e|$)/, '$1');
}
function duration(seconds) {
  if (seconds === null || seconds === undefined) return '-';
  if (seconds < 1) return Math.round(seconds * 1000) + 'ms';
  if (seconds < 60) return seconds.toFixed(1) + 's';
  const s = Math.round(seconds);
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
}
const when = (utc) => (utc ? String(utc).replace('T', ' ').slice(0, 19) : '-');
const statusCell = (status) => el('span', { class: 'status-' + status, text: status });

// ---- theme ---------------------------------------------------------------------------------
function applyTheme() {
  const theme = localStorage.getItem('expctl-theme');
  document.documentElement.classList.toggle('dark', theme === 'dark');
  document.documentElement.classList.toggle('light', theme === 'light');
}
function toggleTheme() {
  const dark = document.documentElement.classList.contains('dark') ||
    (!document.documentElement.classList.contains('light') && matchMedia('(prefers-color-scheme: dark)').matches);
  localStorage.setItem('expctl-theme', dark ? 'light' : 'dark');
  applyTheme();
  for (const chart of Object.values(expctl.charts)) chart.update('none');
}

// ---- charts --------------------------------------------------------------------------------
const palette = ['#2458c6', '#d9534f', '#2e9d5b', '#e08a1e', '#8e44ad', '#16a2b8', '#b5651d', '#5d6d7e'];
function ema(points, weight) {
  if (!weight) return points;
  let last = null;
  return points.map((p) => {
    if (p.y === null || !Number.isFinite(p.y)) return p;
    last = last === null ? p.y : last * weight + p.y * (1 - weight);
    return { x: p.x, y: last };
  });
}
function makeChart(canvas, key, xLabel, log) {
  if (expctl.charts[key]) expctl.charts[key].destroy();
  const chart = new Chart(canvas, {
    type: 'line',
    data: { datasets: [] },
    options: {
      animation: false, parsing: false, normalized: true, spanGaps: false, responsive: true,
      maintainAspectRatio: false,
      elements: { point: { radius: 0 }, line: { borderWidth: 1.3 } },
      interaction: { mode: 'nearest', intersect: false },
      scales: {
        x: { type: 'linear', title: { display: true, text: xLabel } },
        y: { type: log ? 'logarithmic' : 'linear' },
      },
      plugins: { legend: { labels: { boxWidth: 12 } }, decimation: { enabled: false } },
    },
  });
  expctl.charts[key] = chart;
  return chart;
}
function countPoints(chart) {
  let total = 0;
  for (const set of chart.data.datasets) total += set.data.length;
  chart.canvas.setAttribute('data-points', String(total));
  return total;
}
function seriesPoints(rank) {
  const points = [];
  for (let i = 0; i < rank.x.length; i++) points.push({ x: rank.x[i], y: rank.y[i] });
  return points;
}

// ---- runs table ----------------------------------------------------------------------------
// A tag longer than 24 characters (a sweep's 64-hex hash: "sweep-hash:01b395b6…") is cut to 20
// and an ellipsis in the table; the cell's title holds every tag whole (shown on hover).
function shortTag(tag) {
  return tag.length > 24 ? tag.slice(0, 20) + '\u2026' : tag;
}

async function runsPage() {
  document.title = 'expctl: runs';
  const q = query();
  const state = {
    status: q.get('status') || '', tag: q.get('tag') || '', name: q.get('name') || '', spec: q.get('spec') || '',
    sort: q.get('sort') || 'started', order: q.get('order') || 'desc', offset: Number(q.get('offset') || 0),
    limit: Number(q.get('limit') || 50),
    // Metric columns, each "AGG:METRIC" (col=... once per column; metric=&agg= from older links).
    col: [...(q.get('metric') ? [(q.get('agg') || 'last') + ':' + q.get('metric')] : []), ...q.getAll('col')],
  };
  // A link that names no metric column gets the two a teammate looks for first.
  if (!state.col.length && !q.has('metric')) state.col = ['last:loss', 'last:eval_accuracy'];
  const selected = new Set();
  const input = (key, placeholder) =>
    el('input', { value: state[key], placeholder, 'data-filter': key, onchange: (e) => { state[key] = e.target.value.trim(); state.offset = 0; load(); } });
  const statusSelect = el('select', { 'data-filter': 'status', onchange: (e) => { state.status = e.target.value; state.offset = 0; load(); } },
    ['', 'queued', 'running', 'completed', 'failed', 'interrupted', 'diverged', 'lost'].map((s) => el('option', { value: s, selected: s === state.status, text: s || 'any' })));
  const aggSelect = el('select', { 'data-column': 'agg' },
    ['last', 'min', 'max'].map((s) => el('option', { value: s, text: s })));
  const metricInput = el('input', { placeholder: 'e.g. loss', 'data-column': 'metric' });
  const addColumn = () => {
    const metric = metricInput.value.trim();
    if (!metric || state.col.length >= 8) return;
    state.col.push(aggSelect.value + ':' + metric);
    metricInput.value = '';
    load();
  };
  metricInput.addEventListener('keydown', (e) => { if (e.key === 'Enter') addColumn(); });
  const columnChips = el('span', { class: 'chips' });
  // Two runs: compare's verdict of B against A; more: the N-run page (the spec fields that differ).
  const compareButton = el('button', { type: 'button', id: 'compare-selected', disabled: true, text: 'compare selected',
    onclick: () => {
      const ids = [...selected];
      location.href = pagePath('compare') + '?' + new URLSearchParams(ids.length === 2 ? { a: ids[0], b: ids[1] } : { runs: ids.join(',') });
    } });
  const table = el('table', { id: 'runs' });
  const pager = el('div', { class: 'pager' });
  show(el('h1', { text: 'Runs' }),
    el('div', { class: 'filters' },
      el('label', {}, 'status', statusSelect), el('label', {}, 'tag', input('tag', 'exact tag')),
      el('label', {}, 'name', input('name', 'part of the name')), el('label', {}, 'spec hash', input('spec', 'hex prefix')),
      el('label', {}, 'metric column', aggSelect, metricInput),
      el('button', { type: 'button', 'data-column': 'add', text: 'add column', onclick: addColumn }), columnChips, compareButton),
    table, pager);

  const columns = [['', null], ['id', null], ['status', 'status'], ['name', 'name'], ['spec', null],
    ['started (UTC)', 'started'], ['duration', 'duration'], ['tags', null]];
  async function load() {
    setQuery({ ...state, sort: state.sort === 'started' ? '' : state.sort, order: state.order === 'desc' ? '' : state.order,
      offset: state.offset || '', limit: state.limit === 50 ? '' : state.limit });
    put(columnChips, ...state.col.map((column, i) => el('span', { class: 'chip' },
      column.replace(':', ' '), el('button', { type: 'button', class: 'remove', title: 'remove this column', text: '\u00D7',
        onclick: () => { state.col.splice(i, 1); load(); } }))));
    let page;
    try {
      page = await api('/api/runs', state);
    } catch (error) {
      put(table, failure(error));
      return;
    }
    const head = el('tr', {}, columns.map(([label, key]) => el('th', {
      class: key ? 'sortable' : undefined, 'data-sort': key || undefined,
      text: label + (key && key === state.sort ? (state.order === 'asc' ? ' \u25B2' : ' \u25BC') : ''),
      onclick: key ? () => { state.order = state.sort === key && state.order === 'desc' ? 'asc' : 'desc'; state.sort = key; load(); } : undefined,
    })), (page.columns || []).map((column) => el('th', { class: 'num metric-column', text: column.agg + ' ' + column.metric })));
    const rows = page.runs.map((run) => el('tr', { 'data-run': run.id },
      el('td', {}, el('input', { type: 'checkbox', onchange: (e) => {
        if (e.target.checked) selected.add(run.id); else selected.delete(run.id);
        compareButton.disabled = selected.size < 2;
        compareButton.textContent = selected.size > 2 ? `compare ${selected.size} selected` : 'compare selected';
      } })),
      el('td', { class: 'mono' }, link(pagePath('run'), { id: run.id }, run.id)),
      el('td', {}, statusCell(run.status)),
      el('td', { class: 'run-name', text: run.name }),
      el('td', { class: 'mono', text: String(run.spec_hash).slice(0, 12) }),
      el('td', { text: when(run.started_at) }),
      el('td', { class: 'num', text: duration(run.duration_s) }),
      el('td', { class: 'tags', title: (run.tags || []).join(', '), text: (run.tags || []).map(shortTag).join(', ') }),
      (run.metrics || []).map((value) => el('td', { class: 'num metric-cell', text: number(value) }))));
    put(table, el('thead', {}, head), el('tbody', {}, rows));
    const last = Math.min(page.total, page.offset + page.runs.length);
    put(pager,
      el('button', { type: 'button', disabled: page.offset === 0, text: '\u2190 newer',
        onclick: () => { state.offset = Math.max(0, page.offset - page.limit); load(); } }),
      el('span', { id: 'page-info', text: page.total ? `${page.offset + 1}\u2013${last} of ${page.total}` : 'no runs match' }),
      el('button', { type: 'button', disabled: last >= page.total, text: 'older \u2192',
        onclick: () => { state.offset = page.offset + page.limit; load(); } }));
    expctl.ready = true;
  }
  await load();
}

// ---- run page ------------------------------------------------------------------------------
function flatten(prefix, value, rows) {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [key, item] of Object.entries(value)) flatten(prefix ? prefix + '.' + key : key, item, rows);
  } else {
    rows.push([prefix, Array.isArray(value) ? JSON.stringify(value) : value === null ? '-' : String(value)]);
  }
  return rows;
}
function keyValueTable(rows, id) {
  return el('table', { id }, el('tbody', {}, rows.map(([k, v]) => el('tr', {}, el('td', { class: 'mono', text: k }), el('td', { text: v })))));
}
function phaseStrip(shares) {
  const strip = el('div', { class: 'strip' });
  for (const name of ['data', 'forward', 'backward', 'comm', 'optimizer', 'other']) {
    const share = shares[name];
    if (share) strip.append(el('span', { class: 'p-' + name, title: `${name} ${(share * 100).toFixed(1)}%`, style: undefined }));
    if (share) strip.lastChild.style.width = (share * 100).toFixed(2) + '%';
  }
  return strip;
}

// Which series a run page charts. Every numeric series the run has is one chart per metric (a
// line per rank), in this order: loss, the eval series, the series the program logged, the
// trainer's throughput, step time, learning rate and straggler score, then the supervisor's sys_*
// samples. The phase timers (the phase chart shows them) and the trainer's bookkeeping are left
// to the metric picker, which adds any series the run has (m=NAME in the URL, once per chart).
const pickerOnly = new Set(['data_wait_ms', 'forward_ms', 'backward_ms', 'comm_wait_ms', 'optimizer_ms', 'allreduce_bytes', 'grad_scale', 'skipped']);
const trainerSeries = ['samples_per_sec', 'step_time_ms', 'lr', 'straggler_score'];
const seriesLabels = new Map([['samples_per_sec', 'samples/s'], ['step_time_ms', 'step time (ms)'], ['lr', 'learning rate'],
  ['straggler_score', 'straggler score (compute time over the median rank\u2019s)'], ['sys_cpu_percent', 'CPU (% of one core, per rank)'],
  ['sys_rss_mb', 'resident memory (MiB, per rank)'], ['sys_gpu_percent', 'GPU utilization (% of its GPUs, per rank)'],
  ['sys_gpu_mem_mb', 'GPU memory (MiB, per rank)']]);
function seriesGroup(name) {
  if (name === 'loss') return 0;
  if (name.startsWith('eval_')) return 1;
  if (name.startsWith('sys_')) return 4;
  return trainerSeries.includes(name) ? 3 : 2;
}
function chartOrder(names) {
  const within = (a, b) => (seriesGroup(a) === 3 ? trainerSeries.indexOf(a) - trainerSeries.indexOf(b) : a < b ? -1 : a > b ? 1 : 0);
  return [...names].sort((a, b) => seriesGroup(a) - seriesGroup(b) || within(a, b));
}
// Runs `task` over `items`, `width` at a time (the server has a connection per request in flight,
// and a 2-core host gains nothing from more).
async function eachAtOnce(items, width, task) {
  const queue = [...items];
  const worker = async () => { while (queue.length) await task(queue.shift()); };
  await Promise.all(Array.from({ length: Math.min(width, queue.length) }, worker));
}
// Drag across a chart to zoom its x range, double-click to zoom out: onZoom(low, high) or
// onZoom(null, null). The band shown while dragging is a div over the chart (styled in app.css).
function attachZoom(canvas, chartOf, onZoom) {
  if (canvas.hasAttribute('data-zoom')) return;
  canvas.setAttribute('data-zoom', '');
  const band = el('div', { class: 'zoom-band', hidden: true });
  canvas.parentNode.append(band);
  let start = null;
  const at = (event) => event.clientX - canvas.getBoundingClientRect().left;
  canvas.addEventListener('mousedown', (event) => {
    if (event.button !== 0) return;
    start = at(event);
    band.hidden = false;
    band.style.left = start + 'px';
    band.style.width = '0px';
  });
  canvas.addEventListener('mousemove', (event) => {
    if (start === null) return;
    band.style.left = Math.min(start, at(event)) + 'px';
    band.style.width = Math.abs(at(event) - start) + 'px';
  });
  window.addEventListener('mouseup', (event) => {
    if (start === null) return;
    const [a, b] = [start, at(event)].sort((p, q) => p - q);
    start = null;
    band.hidden = true;
    const chart = chartOf();
    if (b - a < 5 || !chart) return;
    onZoom(chart.scales.x.getValueForPixel(a), chart.scales.x.getValueForPixel(b));
  });
  canvas.addEventListener('dblclick', () => onZoom(null, null));
}
const optionalNumber = (text) => (text === null || text === '' || !Number.isFinite(Number(text)) ? null : Number(text));

const phaseNames = [['data', 'data', '#8e6bd1'], ['forward', 'forward', '#3d8bd9'], ['backward', 'backward', '#39a96b'],
  ['comm', 'exposed all-reduce wait', '#e0863a'], ['optimizer', 'optimizer', '#c8b43a'], ['other', 'other', '#9aa0aa']];

async function runPage() {
  document.title = 'expctl: run';
  const q = query();
  const id = q.get('id') || '';
  const state = { id, x: q.get('x') === 'wall' ? 'wall' : 'step', log: q.get('log') === '1', smooth: Number(q.get('smooth') || 0), rank: Number(q.get('rank') || 0),
    prank: Number(q.get('prank') || 0), m: q.getAll('m'), from: optionalNumber(q.get('from')), to: optionalNumber(q.get('to')),
    points: Math.min(5000, Math.max(3, Number(q.get('points') || 1000))) };
  const save = () => setQuery({ id: state.id, x: state.x === 'step' ? '' : state.x, log: state.log ? '1' : '', smooth: state.smooth || '', rank: state.rank || '',
    prank: state.prank || '', m: state.m, from: state.from, to: state.to, points: state.points === 1000 ? '' : state.points });
  const zoomed = () => state.from !== null || state.to !== null;
  // The loss chart and the run's series names (/api/metrics reads no point) at once; then the
  // other charts, three at a time; then the run's document (on a long run the slowest request of
  // the page, its metrics table counts every point: it would slow every chart down).
  const chartsBox = el('div', { class: 'charts', id: 'charts' });
  const chartState = new Map();
  function addBox(metric) {
    if (chartState.has(metric)) return chartState.get(metric);
    const canvas = el('canvas', { id: 'chart-' + metric, 'data-metric': metric });
    const csv = el('a', { class: 'csv', text: 'CSV' });
    const box = el('div', { class: 'chart', 'data-metric': metric }, el('h3', {}, el('span', { text: seriesLabels.get(metric) || metric }), csv), el('div', {}, canvas));
    const st = { canvas, csv, box, raw: [], seq: null };
    chartState.set(metric, st);
    chartsBox.append(box);
    attachZoom(canvas, () => expctl.charts[metric], zoomTo);
    return st;
  }
  addBox('loss');
  show(el('h1', {}, el('span', { class: 'muted mono', text: id })), chartsBox);
  const namesAsked = api('/api/metrics', { id });
  namesAsked.catch(() => {});  // awaited below; not an unhandled rejection while the loss is drawn
  await drawOne('loss').catch((error) => chartsBox.append(failure(error)));
  expctl.firstChart = performance.now();
  let doc;
  let names;
  let firstDraw;
  try {
    names = (await namesAsked).names;
    const charted = chartOrder(names.filter((name) => !pickerOnly.has(name) || state.m.includes(name)));
    for (const metric of charted) addBox(metric);
    firstDraw = eachAtOnce(charted.filter((metric) => metric !== 'loss'), 3,
      (metric) => drawOne(metric).catch((error) => chartsBox.append(failure(error))));
    await firstDraw;
    expctl.allCharts = performance.now();
    doc = await api('/api/run', { id });
  } catch (error) {
    show(el('h1', { text: 'Run' }), failure(error));
    return;
  }
  const run = doc.run;
  const picker = el('select', { id: 'metric-picker', onchange: (e) => {
    const metric = e.target.value;
    if (!metric) return;
    state.m.push(metric);
    save();
    addBox(metric);
    fillPicker();
    drawOne(metric).catch((error) => chartsBox.append(failure(error)));
  } });
  function fillPicker() {
    const left = names.filter((name) => !chartState.has(name));
    put(picker, el('option', { value: '', text: left.length ? 'add a chart\u2026' : 'every series is charted' }),
      left.map((name) => el('option', { value: name, text: name })));
    picker.disabled = left.length === 0;
  }
  fillPicker();
  const fields = [['run', run.id], ['name', run.name], ['status', null], ['root cause', run.root_cause || '-'],
    ['spec', run.spec_hash + (doc.spec && doc.spec.name ? ' (' + doc.spec.name + ')' : '')], ['environment', run.environment_hash || '-'],
    ['started', when(run.started_at) + ' UTC'], ['ended', run.ended_at ? when(run.ended_at) + ' UTC' : '-'],
    ['duration', duration(run.duration_s)], ['tags', (run.tags || []).join(', ') || '-']];
  const statusNode = statusCell(run.status);
  statusNode.id = 'run-status';
  const dl = el('dl', { class: 'fields' }, fields.map(([k, v]) => [el('dt', { text: k }), el('dd', { class: k === 'root cause' ? 'root-cause' : undefined }, v === null ? statusNode : v)]));
  const xSelect = el('select', { id: 'x-axis', onchange: (e) => { state.x = e.target.value; state.from = state.to = null; save(); drawAll(); } },
    [['step', 'step'], ['wall', 'time (s of step time)']].map(([v, t]) => el('option', { value: v, selected: v === state.x, text: t })));
  const logBox = el('input', { type: 'checkbox', id: 'log-scale', checked: state.log, onchange: (e) => { state.log = e.target.checked; save(); drawAll(); } });
  const smoothInput = el('input', { type: 'range', id: 'smooth', min: 0, max: 0.99, step: 0.01, value: state.smooth,
    onchange: (e) => { state.smooth = Number(e.target.value); save(); redrawSmoothing(); } });
  const zoomReset = el('button', { type: 'button', id: 'zoom-reset', hidden: !zoomed(), text: 'zoom out', onclick: () => zoomTo(null, null) });
  const liveNote = el('span', { id: 'live', class: 'muted' });
  const ranksTable = el('table', { id: 'ranks' },
    el('thead', {}, el('tr', {}, ['rank', 'host', 'status', 'exit', 'step ms', 'where the step went', 'straggler mean/max'].map((t) => el('th', { text: t })))),
    el('tbody', {}, (doc.ranks || []).map((rank) => {
      const phases = (doc.phases || []).find((p) => p.rank === rank.rank);
      return el('tr', {}, el('td', { text: rank.rank }), el('td', { text: rank.host }), el('td', {}, statusCell(rank.status)),
        el('td', { text: rank.exit_code === null ? '-' : rank.exit_code }), el('td', { class: 'num', text: phases ? number(phases.step_time_ms) : '-' }),
        el('td', {}, phases ? phaseStrip(phases.shares) : '-'),
        el('td', { text: phases && phases.straggler_mean !== null ? number(phases.straggler_mean, 3) + ' / ' + number(phases.straggler_max, 3) : '-' }));
    })));
  // Where one rank's step time went over the run: each phase's share per bucket of steps, stacked.
  const phaseCanvas = el('canvas', { id: 'chart-phases' });
  const phaseRank = el('select', { id: 'phase-rank', onchange: (e) => { state.prank = Number(e.target.value); save(); drawPhases(); } },
    (doc.ranks && doc.ranks.length ? doc.ranks : [{ rank: 0 }]).map((r) => el('option', { value: r.rank, selected: r.rank === state.prank, text: 'rank ' + r.rank })));
  const phaseBox = el('div', { class: 'chart wide', id: 'phases-box' }, el('h3', {}, el('span', { text: 'where the step time went, over the run ' }), phaseRank),
    el('div', {}, phaseCanvas));
  const logRank = el('select', { id: 'log-rank', onchange: (e) => { state.rank = Number(e.target.value); save(); loadLog(); } },
    (doc.ranks && doc.ranks.length ? doc.ranks : [{ rank: 0 }]).map((r) => el('option', { value: r.rank, selected: r.rank === state.rank, text: 'rank ' + r.rank })));
  const logBox2 = el('pre', { id: 'log', class: 'mono' });
  const env = doc.environment ? el('details', {}, el('summary', { text: 'environment fingerprint' }), el('pre', { class: 'mono', text: JSON.stringify(doc.environment, null, 2) })) : el('p', { class: 'muted', text: 'no environment fingerprint recorded' });
  show(el('h1', {}, el('span', { class: 'run-name', text: run.name }), ' ', el('span', { class: 'muted mono', text: run.id })),
    dl,
    el('div', { class: 'toolbar' }, el('label', {}, 'x axis ', xSelect), el('label', {}, logBox, ' log scale'),
      el('label', {}, 'smoothing ', smoothInput), picker, zoomReset, liveNote, link(pagePath('compare'), { a: run.id, b: '' }, 'compare with\u2026'),
      link(pagePath('group'), { like: run.id }, 'its seeds')),
    el('p', { class: 'muted hint', text: 'drag across a chart to zoom (the points of the steps shown are read again, at full resolution where they fit); double-click to zoom out' }),
    chartsBox, phaseBox,
    el('h2', { text: 'Ranks' }), ranksTable,
    el('h2', { text: 'Metrics' }),
    el('table', { id: 'metrics' }, el('thead', {}, el('tr', {}, ['metric', 'points', 'ranks', 'first (step)', 'last (step)'].map((t) => el('th', { text: t })))),
      el('tbody', {}, (doc.metrics || []).map((m) => el('tr', {}, el('td', { class: 'mono', text: m.name }), el('td', { class: 'num', text: m.points }),
        el('td', { class: 'num', text: m.ranks }), el('td', { class: 'num', text: `${number(m.first_value)} (${m.first_step})` }),
        el('td', { class: 'num', text: `${number(m.last_value)} (${m.last_step})` }))))),
    el('h2', { text: 'Spec' }), doc.spec && doc.spec.values ? keyValueTable(flatten('', doc.spec.values, []), 'spec') : el('p', { class: 'muted', text: 'not recorded' }),
    el('h2', { text: 'Fingerprint' }), env,
    el('h2', { text: 'Summary' }), keyValueTable(flatten('', doc.summary || {}, []), 'summary'),
    el('h2', {}, 'Log ', logRank), logBox2);

  function datasets(metric) {
    return chartState.get(metric).raw.map((rank, i) => ({
      label: 'rank ' + rank.rank, data: ema(rank.points, state.smooth), borderColor: palette[i % palette.length],
      backgroundColor: palette[i % palette.length],
    }));
  }
  function redrawSmoothing() {
    for (const metric of chartState.keys()) {
      const chart = expctl.charts[metric];
      if (!chart) continue;
      chart.data.datasets = datasets(metric);
      chart.update('none');
    }
  }
  // The x range shown: on the step axis the points of those steps are asked for again (exact when
  // they fit in `points` per rank); on the time axis the range is cut from the points at hand.
  function zoomTo(low, high) {
    if (low === null) state.from = state.to = null;
    else if (state.x === 'step') { state.from = Math.floor(low); state.to = Math.ceil(high); }
    else { state.from = Math.round(low * 1000) / 1000; state.to = Math.round(high * 1000) / 1000; }
    save();
    zoomReset.hidden = !zoomed();
    if (state.x === 'step') {
      expctl.zoomed = false;
      eachAtOnce([...chartState.keys()], 3, (metric) => drawOne(metric).catch((error) => chartsBox.append(failure(error))))
        .then(() => { expctl.zoomed = true; });
      return;
    }
    for (const metric of chartState.keys()) {
      const chart = expctl.charts[metric];
      if (chart) { setRange(chart); chart.update('none'); }
    }
    expctl.zoomed = true;
  }
  function setRange(chart) {
    chart.options.scales.x.min = state.from === null ? undefined : state.from;
    chart.options.scales.x.max = state.to === null ? undefined : state.to;
  }
  async function drawOne(metric) {
    const st = chartState.get(metric);
    const params = { id, metric, x: state.x, points: state.points };
    if (state.x === 'step' && state.from !== null) params.from = state.from;
    if (state.x === 'step' && state.to !== null) params.to = state.to;
    st.csv.setAttribute('href', '/api/series.csv?' + searchParams(params));
    st.csv.setAttribute('download', 'series.csv');
    const series = await api('/api/series', params);
    st.raw = series.ranks.map((rank) => ({ rank: rank.rank, points: seriesPoints(rank) }));
    st.seq = series.seq;
    // A metric this run did not record (loss of a program that logs none) has no chart; one with
    // no point in the zoomed range keeps its box.
    st.box.hidden = series.ranks.length === 0 && !zoomed();
    st.canvas.setAttribute('data-downsampled', series.ranks.some((rank) => rank.downsampled) ? '1' : '0');
    const chart = makeChart(st.canvas, metric, state.x === 'wall' ? 'seconds of step time' : 'step', state.log);
    setRange(chart);
    chart.data.datasets = datasets(metric);
    chart.update('none');
    countPoints(chart);
  }
  async function drawAll() {
    try {
      await drawOne('loss');  // the first chart is the one awaited
      await eachAtOnce([...chartState.keys()].filter((metric) => metric !== 'loss'), 3, drawOne);
      await drawPhases();
    } catch (error) {
      chartsBox.append(failure(error));
    }
  }
  async function drawPhases() {
    let doc;
    try {
      doc = await api('/api/phases', { id: run.id, rank: state.prank, x: state.x });
    } catch (error) {
      phaseBox.append(failure(error));
      return;
    }
    phaseBox.hidden = doc.steps === 0 || !doc.measured;  // no step times, or no phase timed (a program's run)
    if (!expctl.charts.phases) {
      const chart = makeChart(phaseCanvas, 'phases', state.x === 'wall' ? 'seconds of step time' : 'step', false);
      chart.options.scales.y = { type: 'linear', stacked: true, min: 0, max: 100, title: { display: true, text: '% of step time' } };
    }
    const chart = expctl.charts.phases;
    chart.options.scales.x.title.text = state.x === 'wall' ? 'seconds of step time' : 'step';
    chart.data.datasets = phaseNames.filter(([key]) => Array.isArray(doc.phases[key])).map(([key, label, color]) => ({
      label, borderColor: color, backgroundColor: color + 'b0', fill: true, pointRadius: 0,
      data: doc.at.map((x, i) => ({ x, y: doc.phases[key][i] === null ? null : Math.round(doc.phases[key][i] * 1000) / 10 })),
    }));
    chart.update('none');
    countPoints(chart);
  }
  async function loadLog() {
    try {
      const response = await fetch('/api/log?' + new URLSearchParams({ id: run.id, rank: state.rank }), { credentials: 'same-origin' });
      logBox2.textContent = response.ok ? await response.text() : '(no log of this rank on the server\u2019s host)';
    } catch (error) {
      logBox2.textContent = String(error);
    }
  }
  // Live: each chart asks for the points after the last step it holds (its sequence number).
  let polls = 0;
  async function poll() {
    try {
      const view = await api('/api/watch', { id: run.id });
      statusNode.textContent = view.run.status;
      statusNode.className = 'status-' + view.run.status;
      for (const [metric, st] of chartState) {
        const params = { id: run.id, metric, x: state.x, points: state.points };
        if (st.seq !== null && st.seq !== undefined) params.after = st.seq;
        const series = await api('/api/series', params);
        for (const rank of series.ranks) {
          let target = st.raw.find((r) => r.rank === rank.rank);
          if (!target) st.raw.push((target = { rank: rank.rank, points: [] }));
          target.points.push(...seriesPoints(rank));
        }
        st.seq = series.seq;
        if (series.ranks.length) st.box.hidden = false;
        const chart = expctl.charts[metric];
        if (chart) { chart.data.datasets = datasets(metric); chart.update('none'); countPoints(chart); }
      }
      // The phase shares read every step of the rank again: every tenth poll, and once at the end.
      polls = (polls + 1) % 10;
      if (polls === 0 || view.ended) await drawPhases();
      liveNote.textContent = view.ended ? 'run ended' : 'live: updated ' + new Date().toLocaleTimeString();
      if (!view.ended) setTimeout(poll, 1000);
    } catch (error) {
      liveNote.textContent = 'live updates stopped: ' + error.message;
      setTimeout(poll, 5000);
    }
  }
  await drawPhases();
  expctl.ready = true;
  loadLog();
  if (run.status === 'running') setTimeout(poll, 1000);
}

// ---- groups: a mean line with its 95 % band -------------------------------------------------
// The band is the server's (api/group.cpp: compare's t interval of the members' mean per bucket of
// steps); the page draws it as two edges with the area between them filled, under the mean.
function bandDatasets(band, color, label) {
  const points = (values) => band.x.map((x, i) => ({ x, y: values[i] }));
  const runs = band.members.length;
  return [
    { label: label + ' 95% low', data: points(band.low), borderColor: 'transparent', backgroundColor: color + '30', pointRadius: 0, fill: false, band: 'low' },
    { label: label + ' 95% band', data: points(band.high), borderColor: 'transparent', backgroundColor: color + '30', pointRadius: 0, fill: '-1', band: 'high' },
    { label: `${label} mean of ${runs} run${runs === 1 ? '' : 's'}`, data: points(band.mean), borderColor: color, backgroundColor: color, band: 'mean' },
  ];
}
function hideLowEdge(chart) {
  chart.options.plugins.legend.labels.filter = (item, data) => data.datasets[item.datasetIndex].band !== 'low';
}
// Each member's own line (its lowest rank, as the band reads it), thin, for "show the members".
async function memberDatasets(band, metric, color) {
  const sets = [];
  await eachAtOnce(band.members.filter((m) => m.points > 0), 3, async (member) => {
    const series = await api('/api/series', { id: member.id, metric });
    const rank = series.ranks.find((r) => r.rank === member.rank) || series.ranks[0];
    if (rank) sets.push({ label: member.id, data: seriesPoints(rank), borderColor: color + '80', backgroundColor: color + '80', borderWidth: 0.8, member: true });
  });
  return sets;
}
const memberLabel = (m) => m.name + (m.seed === null || m.seed === undefined ? '' : ' (seed ' + m.seed + ')');

async function groupPage() {
  document.title = 'expctl: group';
  const q = query();
  const state = { like: q.get('like') || '', runs: q.get('runs') || '', metric: q.getAll('metric'), members: q.get('members') === '1' };
  const runsInput = el('input', { id: 'group-runs', value: state.runs, placeholder: 'all:tag:ab:NAME:a, A1,A2,A3', size: 40 });
  const form = el('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); location.href = pagePath('group') + '?' + searchParams({ runs: runsInput.value.trim() }); } },
    el('label', {}, 'runs', runsInput), el('button', { type: 'submit', text: 'draw' }));
  if (!state.like && !state.runs) {
    show(el('h1', { text: 'Group' }), form, el('p', { class: 'muted', text: 'name the runs of a group (a run page\u2019s \u201Cits seeds\u201D link names the runs of its spec but the seed)' }));
    expctl.ready = true;
    return;
  }
  const selector = state.runs ? { runs: state.runs } : { like: state.like };
  const save = () => setQuery({ ...selector, metric: state.metric, members: state.members ? '1' : '' });
  const membersBox = el('div', { id: 'members' });
  const chartsBox = el('div', { class: 'charts', id: 'bands' });
  const membersToggle = el('input', { type: 'checkbox', id: 'show-members', checked: state.members, onchange: async (e) => {
    state.members = e.target.checked;
    save();
    await eachAtOnce(metrics, 3, drawBand);
  } });
  const picker = el('select', { id: 'metric-picker', onchange: (e) => {
    if (!e.target.value) return;
    metrics.push(e.target.value);
    state.metric = metrics.filter((m) => m !== 'loss');
    save();
    fillPicker();
    drawBand(e.target.value);
  } });
  show(el('h1', { text: state.runs ? 'Group ' + state.runs : 'The seeds of run ' + state.like }), form,
    el('div', { class: 'toolbar' }, el('label', {}, membersToggle, ' show the members'), picker),
    membersBox, chartsBox);
  const bands = new Map();
  let names = [];
  const metrics = ['loss', ...state.metric.filter((m) => m !== 'loss')];
  async function drawBand(metric) {
    let box = chartsBox.querySelector(`[data-metric="${CSS.escape(metric)}"]`);
    if (!box) {
      const canvas = el('canvas', { id: 'band-' + metric, 'data-metric': metric });
      box = el('div', { class: 'chart', 'data-metric': metric }, el('h3', {}, el('span', { text: metric + ': mean and 95% band' })), el('div', {}, canvas));
      chartsBox.append(box);
    }
    const band = bands.get(metric) || await api('/api/group', { ...selector, metric });
    bands.set(metric, band);
    const chart = makeChart(box.querySelector('canvas'), 'band-' + metric, 'step', false);
    hideLowEdge(chart);
    chart.data.datasets = bandDatasets(band, palette[0], metric);
    if (state.members) chart.data.datasets.push(...await memberDatasets(band, metric, palette[1]));
    chart.update('none');
    countPoints(chart);
    box.hidden = band.x.length === 0;
    return band;
  }
  function fillPicker() {
    const left = names.filter((n) => !metrics.includes(n));
    put(picker, el('option', { value: '', text: left.length ? 'add a metric\u2026' : 'every metric is drawn' }), left.map((n) => el('option', { value: n, text: n })));
  }
  try {
    const band = await drawBand('loss');
    expctl.firstChart = performance.now();
    put(membersBox, el('table', { id: 'group-members' },
      el('thead', {}, el('tr', {}, ['run', 'name', 'seed', 'status', 'points'].map((t) => el('th', { text: t })))),
      el('tbody', {}, band.members.map((m) => el('tr', { 'data-run': m.id }, el('td', { class: 'mono' }, link(pagePath('run'), { id: m.id }, m.id)),
        el('td', { text: m.name }), el('td', { class: 'num', text: m.seed === null ? '-' : JSON.stringify(m.seed) }),
        el('td', {}, statusCell(m.status)), el('td', { class: 'num', text: m.points }))))),
    band.members.length > 1 ? link(pagePath('compare'), { runs: band.members.map((m) => m.id).join(',') }, 'compare the members\u2019 specs') : null);
    // The eval series of the first member that has points, and a picker of its other series.
    const first = band.members.find((m) => m.points > 0) || band.members[0];
    if (first) {
      names = (await api('/api/metrics', { id: first.id })).names;
      for (const name of names) if (name.startsWith('eval_') && !metrics.includes(name)) metrics.push(name);
    }
    fillPicker();
    await eachAtOnce(metrics.filter((m) => m !== 'loss'), 3, drawBand);
    expctl.allCharts = performance.now();
  } catch (error) {
    chartsBox.append(failure(error));
  }
  expctl.ready = true;
}

// ---- compare page --------------------------------------------------------------------------
// Two runs or groups: compare's verdict, its tables and the loss curves (a group of two or more
// runs as its mean and band). N runs (runs=A,B,C): the spec fields that differ, and only those,
// their numeric summaries and loss curves.
async function comparePage() {
  document.title = 'expctl: compare';
  const q = query();
  const state = { a: q.get('a') || '', b: q.get('b') || '', runs: q.get('runs') || '', members: q.get('members') === '1' };
  const aInput = el('input', { id: 'side-a', value: state.a, placeholder: 'run id, tag:NAME, all:tag:NAME, A1,A2', size: 36 });
  const bInput = el('input', { id: 'side-b', value: state.b, placeholder: 'run id, tag:NAME, @latest', size: 36 });
  const runsInput = el('input', { id: 'runs-n', value: state.runs, placeholder: 'or N runs: A,B,C or all:tag:NAME', size: 36 });
  const result = el('div', { id: 'result' });
  const form = el('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    Object.assign(state, { a: aInput.value.trim(), b: bInput.value.trim(), runs: runsInput.value.trim() });
    if (state.runs) state.a = state.b = '';
    setQuery(state);
    load();
  } },
  el('label', {}, 'baseline A', aInput), el('label', {}, 'candidate B', bInput), el('label', {}, 'N runs', runsInput), el('button', { type: 'submit', text: 'compare' }));
  show(el('h1', { text: 'Compare' }), form, result);
  async function load() {
    if (state.runs) return loadMany();
    if (!state.a || !state.b) {
      put(result, el('p', { class: 'muted', text: 'name a baseline and a candidate, or N runs (the runs table can pick them)' }));
      expctl.ready = true;
      return;
    }
    let doc;
    try {
      doc = await api('/api/compare', { a: state.a, b: state.b });
    } catch (error) {
      put(result, failure(error));
      expctl.ready = true;
      return;
    }
    const list = (items) => el('ul', {}, items.map((t) => el('li', { text: t })));
    const canvas = el('canvas', { id: 'chart-compare-loss' });
    const grouped = doc.a.runs.length > 1 || doc.b.runs.length > 1;
    const membersToggle = grouped ? el('label', {}, el('input', { type: 'checkbox', id: 'show-members', checked: state.members,
      onchange: (e) => { state.members = e.target.checked; setQuery(state); drawCurves(); } }), ' show the members') : null;
    put(result,
      el('p', { id: 'verdict', class: 'verdict outcome-' + doc.outcome, text: doc.verdict }),
      doc.not_comparable.length ? [el('h2', { text: 'Not comparable' }), list(doc.not_comparable)] : null,
      doc.regressions.length ? [el('h2', { text: 'Regressions' }), list(doc.regressions)] : null,
      el('h2', { text: grouped ? 'Loss (a group: its mean and 95% band; a run: its rank 0)' : 'Loss (rank 0 of each run)' }), membersToggle,
      el('div', { class: 'chart' }, canvas),
      el('h2', { text: 'Metrics' }),
      el('table', { id: 'metrics' }, el('thead', {}, el('tr', {}, ['metric', 'A', 'B', 'change', 'threshold', 'status', 'why'].map((t) => el('th', { text: t })))),
        el('tbody', {}, doc.metrics.map((m) => el('tr', {}, el('td', { text: m.metric }), el('td', { class: 'num', text: number(m.a) }),
          el('td', { class: 'num', text: number(m.b) }), el('td', { text: m.change }), el('td', { text: m.threshold }),
          el('td', { class: 'outcome-' + m.status, text: m.status }), el('td', { text: m.reason }))))),
      el('h2', { text: 'Spec differences' }),
      doc.spec_changes.length ? el('table', { id: 'spec-changes' }, el('tbody', {}, doc.spec_changes.map((c) => el('tr', {}, el('td', { class: 'mono', text: c.path }), el('td', { text: JSON.stringify(c.a) }), el('td', { text: JSON.stringify(c.b) })))))
        : el('p', { class: 'muted', text: 'none' }),
      el('h2', { text: 'Environment differences' }),
      !doc.environment.available ? el('p', { class: 'muted', text: 'no fingerprint on one side' })
        : doc.environment.changes.length ? el('table', { id: 'env-changes' }, el('tbody', {}, doc.environment.changes.map((c) => el('tr', {}, el('td', { text: c.group + '.' + c.field }), el('td', { text: c.a }), el('td', { text: c.b })))))
          : el('p', { class: 'muted', text: 'none' }));
    async function drawCurves() {
      const chart = makeChart(canvas, 'compare-loss', 'step', false);
      hideLowEdge(chart);
      const sides = [['A', state.a, doc.a.runs, 0], ['B', state.b, doc.b.runs, 4]];
      for (const [side, text, runs, shift] of sides) {
        try {
          if (runs.length > 1) {
            const band = await api('/api/group', { runs: text, metric: 'loss' });
            chart.data.datasets.push(...bandDatasets(band, palette[shift], side));
            if (state.members) chart.data.datasets.push(...await memberDatasets(band, 'loss', palette[shift]));
            continue;
          }
          for (const [i, id] of runs.entries()) {
            const series = await api('/api/series', { id, metric: 'loss' });
            const rank = series.ranks.find((r) => r.rank === 0) || series.ranks[0];
            if (!rank) continue;
            const color = palette[(shift + i) % palette.length];
            chart.data.datasets.push({ label: side + ' ' + id, data: seriesPoints(rank), borderColor: color, backgroundColor: color });
          }
        } catch (error) {
          result.append(failure(error));
        }
      }
      chart.update('none');
      countPoints(chart);
    }
    await drawCurves();
    expctl.ready = true;
  }
  async function loadMany() {
    let doc;
    try {
      doc = await api('/api/spec-diff', { runs: state.runs });
    } catch (error) {
      put(result, failure(error));
      expctl.ready = true;
      return;
    }
    const head = el('tr', {}, el('th', { text: '' }), doc.runs.map((run) => el('th', { 'data-run': run.id },
      link(pagePath('run'), { id: run.id }, run.id), el('div', { class: 'muted run-name', text: run.name }))));
    const cell = (value) => el('td', { class: typeof value === 'number' ? 'num' : 'mono', text: value === null ? '-' : typeof value === 'string' ? value : JSON.stringify(value) });
    const canvas = el('canvas', { id: 'chart-compare-runs' });
    put(result,
      el('h2', { text: `${doc.runs.length} runs: the spec fields that differ` }),
      doc.fields.length ? el('table', { id: 'spec-diff' }, el('thead', {}, head),
        el('tbody', {}, doc.fields.map((f) => el('tr', { 'data-path': f.path }, el('td', { class: 'mono', text: f.path }), f.values.map(cell)))))
        : el('p', { class: 'muted', text: 'none: every run has the same spec' }),
      el('p', { class: 'muted', id: 'same-fields', text: `${doc.same} other field${doc.same === 1 ? '' : 's'} the same in every run` }),
      el('h2', { text: 'Summaries' }),
      doc.metrics.length ? el('table', { id: 'summary-metrics' }, el('thead', {}, head.cloneNode(true)),
        el('tbody', {}, doc.metrics.map((m) => el('tr', {}, el('td', { class: 'mono', text: m.name }), m.values.map((v) => el('td', { class: 'num', text: number(v) }))))))
        : el('p', { class: 'muted', text: 'no run has a summary' }),
      el('h2', { text: 'Loss (rank 0 of each run)' }), el('div', { class: 'chart' }, canvas));
    const chart = makeChart(canvas, 'compare-runs', 'step', false);
    const curves = new Array(doc.runs.length).fill(null);
    await eachAtOnce(doc.runs.map((run, i) => [run, i]), 3, async ([run, i]) => {
      try {
        const series = await api('/api/series', { id: run.id, metric: 'loss' });
        const rank = series.ranks.find((r) => r.rank === 0) || series.ranks[0];
        const color = palette[i % palette.length];
        if (rank) curves[i] = { label: run.name + ' ' + run.id.slice(-6), data: seriesPoints(rank), borderColor: color, backgroundColor: color };
      } catch (error) {
        result.append(failure(error));
      }
    });
    chart.data.datasets = curves.filter((c) => c !== null);
    chart.update('none');
    countPoints(chart);
    expctl.ready = true;
  }
  await load();
}

// ---- sweep page ----------------------------------------------------------------------------
// The results across a sweep's points, as `expctl sweep FILE --report` makes them: the server
// builds the same report (api/sweep.cpp), this page draws its table and its plots of each
// metric against each numeric axis (each configuration's runs as small dots, its median as a
// large one with a bar of the run-to-run spread).
// A sweep's points in parallel coordinates: an x position per axis and one for the chosen metric,
// one line per completed run through its configuration's axis values and its own value of the
// metric, each axis scaled to [0, 1] (a numeric one by value, logarithmically when it spans 100x
// or more; any other by its values' order; each axis's label says its range), the line coloured by
// the metric from blue (its lowest) to orange (its highest).
function parallelCoordinates(canvas, doc, metric) {
  const axes = doc.axes;
  const scaleOf = (values) => {
    const numeric = values.every((v) => typeof v === 'number');
    if (!numeric) {
      const distinct = [...new Set(values.map((v) => JSON.stringify(v)))];
      return { text: (v) => JSON.stringify(v), range: distinct.join(' \u2192 '),
        at: (v) => (distinct.length > 1 ? distinct.indexOf(JSON.stringify(v)) / (distinct.length - 1) : 0.5) };
    }
    const low = Math.min(...values);
    const high = Math.max(...values);
    const log = low > 0 && high / low >= 100;
    const f = log ? Math.log : (v) => v;
    return { text: (v) => number(v), range: `${number(low)} \u2192 ${number(high)}${log ? ' (log)' : ''}`,
      at: (v) => (high > low ? (f(v) - f(low)) / (f(high) - f(low)) : 0.5) };
  };
  const lines = [];
  for (const c of doc.configurations) {
    const cell = c.metrics[metric];
    for (const value of cell ? cell.values : []) if (value !== null) lines.push({ axes: axes.map((a) => c.axes[a]), value });
  }
  const scales = axes.map((a, i) => scaleOf(lines.map((l) => l.axes[i])));
  const metricScale = scaleOf(lines.map((l) => l.value));
  const names = [...axes, metric];
  const ranges = [...scales.map((scale) => scale.range), lines.length ? metricScale.range : ''];
  const chart = makeChart(canvas, 'parallel', '', false);
  chart.options.scales.x = { type: 'linear', min: -0.05, max: names.length - 0.95, grid: { display: false },
    ticks: { stepSize: 1, autoSkip: false, callback: (v) => (Number.isInteger(v) && v < names.length ? [names[v], ranges[v]] : '') } };
  chart.options.scales.y = { min: -0.05, max: 1.05, ticks: { display: false } };
  chart.options.plugins.legend = { display: false };
  chart.options.plugins.tooltip = { callbacks: { label: (item) => {
    const line = item.dataset.line;
    return names.map((n, i) => n + ' ' + (i < axes.length ? scales[i].text(line.axes[i]) : number(line.value))).join(', ');
  } } };
  chart.data.datasets = lines.map((line) => {
    const t = metricScale.at(line.value);
    const color = `hsl(${Math.round(220 - 200 * t)}, 70%, ${Math.round(35 + 20 * t)}%)`;
    return { label: metric, line, borderColor: color, backgroundColor: color, pointRadius: 3, borderWidth: 1.5,
      data: [...line.axes.map((v, i) => ({ x: i, y: scales[i].at(v) })), { x: axes.length, y: t }] };
  });
  chart.update('none');
  countPoints(chart);
  canvas.setAttribute('data-lines', String(lines.length));
  return chart;
}

const plotId = (metric, axis) => ('plot-' + metric + '-' + axis).replace(/[^A-Za-z0-9_-]/g, '-');
async function sweepPage() {
  document.title = 'expctl: sweep';
  const q = query();
  const state = { name: q.get('name') || '', metric: q.getAll('metric'), pc: q.get('pc') || '' };
  if (!state.name) {
    const list = await api('/api/sweeps');
    show(el('h1', { text: 'Sweeps' }), list.sweeps.length
      ? el('ul', { id: 'sweeps' }, list.sweeps.map((s) => el('li', {}, link(pagePath('sweep'), { name: s.name }, s.name),
        el('span', { class: 'muted', text: ` ${s.points} points, ${s.runs_expected} runs, hash ${String(s.hash).slice(0, 12)}` }))))
      : el('p', { class: 'muted', text: 'no sweeps: start the server with --sweep FILE (one per sweep file)' }));
    expctl.ready = true;
    return;
  }
  const doc = await api('/api/sweep', { name: state.name, metric: state.metric });
  const plotsBox = el('div', { class: 'charts', id: 'plots' });
  // The parallel coordinates' metric: chosen among the report's metrics, or any other summary
  // metric typed in (it joins the report's metrics: metric=NAME in the URL).
  const chosen = doc.metrics.includes(state.pc) ? state.pc : doc.metrics[0];
  const pcCanvas = el('canvas', { id: 'chart-parallel', 'data-metric': chosen });
  const pcSelect = el('select', { id: 'pc-metric', onchange: (e) => {
    state.pc = e.target.value;
    setQuery(state);
    pcCanvas.setAttribute('data-metric', state.pc);
    parallelCoordinates(pcCanvas, doc, state.pc);
  } }, doc.metrics.map((m) => el('option', { value: m, selected: m === chosen, text: m })));
  const otherMetric = el('input', { id: 'pc-other', placeholder: 'another summary metric', onkeydown: (e) => {
    if (e.key !== 'Enter' || !e.target.value.trim()) return;
    const metric = e.target.value.trim();
    location.href = pagePath('sweep') + '?' + searchParams({ name: state.name, metric: [...(state.metric.length ? state.metric : doc.metrics), metric], pc: metric });
  } });
  show(el('h1', { id: 'sweep-title', text: doc.title }),
    el('h2', { text: 'Points in parallel coordinates' }),
    el('div', { class: 'toolbar' }, el('label', {}, 'metric ', pcSelect), otherMetric),
    doc.metrics.length ? el('div', { class: 'chart wide' }, el('div', {}, pcCanvas)) : el('p', { class: 'muted', text: 'no metric to draw' }),
    el('table', { id: 'configurations' },
      el('thead', {}, el('tr', {}, doc.table.header.map((h) => el('th', { text: h })))),
      el('tbody', {}, doc.table.rows.map((row) => el('tr', {}, row.map((cell, i) => el('td', { class: i > doc.axes.length ? 'num' : undefined, text: cell })))))),
    doc.notes.length ? el('ul', { id: 'notes' }, doc.notes.map((n) => el('li', { text: n }))) : null,
    el('h2', { text: 'Metrics against the axes' }),
    doc.numeric_axes.length ? plotsBox : el('p', { class: 'muted', text: 'No numeric axis to plot against.' }));
  if (doc.metrics.length) parallelCoordinates(pcCanvas, doc, chosen);
  for (const axis of doc.numeric_axes) {
    for (const metric of doc.metrics) {
      const id = plotId(metric, axis);
      const canvas = el('canvas', { id, 'data-metric': metric, 'data-axis': axis });
      plotsBox.append(el('div', { class: 'chart' }, el('h3', {}, el('span', { text: metric + ' against ' + axis })), el('div', {}, canvas)));
      const runs = [];
      const medians = [];
      const spreads = [];
      for (const c of doc.configurations) {
        const x = Number(c.axes[axis]);
        const cell = c.metrics[metric];
        for (const value of cell.values) if (value !== null) runs.push({ x, y: value });
        if (cell.median !== null) medians.push({ x, y: cell.median });
        if (cell.median !== null && cell.spread !== null) spreads.push({ x, y: cell.median - cell.spread }, { x, y: cell.median + cell.spread }, { x, y: null });
      }
      const xs = doc.configurations.map((c) => Number(c.axes[axis]));
      const log = xs.length > 1 && xs.every((x) => x > 0) && Math.max(...xs) / Math.min(...xs) >= 100;
      const chart = makeChart(canvas, id, axis, false);
      chart.options.scales.x.type = log ? 'logarithmic' : 'linear';
      chart.options.scales.y.title = { display: true, text: metric };
      chart.data.datasets = [
        { label: 'runs', data: runs, showLine: false, pointRadius: 2, borderColor: palette[0] + '66', backgroundColor: palette[0] + '66' },
        { label: 'median', data: medians, showLine: false, pointRadius: 4, borderColor: palette[0], backgroundColor: palette[0] },
        { label: 'spread', data: spreads, spanGaps: false, pointRadius: 0, borderColor: palette[0], backgroundColor: palette[0] },
      ];
      chart.update('none');
      countPoints(chart);
    }
  }
  expctl.ready = true;
}

// ---- start ---------------------------------------------------------------------------------
applyTheme();
document.getElementById('theme').addEventListener('click', toggleTheme);
// Each page row's view drawn by its function; a row whose view has none here fails on its page.
const views = { runs: runsPage, run: runPage, group: groupPage, compare: comparePage, sweep: sweepPage };
const current = pageList.find((p) => p.path === location.pathname);
const draw = current ? views[current.view] : runsPage;
(draw || (async () => { throw new Error('app.js draws no view ' + current.view + ' (' + current.path + ')'); }))()
  .catch((error) => { show(failure(error)); expctl.ready = true; });
