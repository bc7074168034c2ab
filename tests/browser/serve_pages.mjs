// expctl serve's pages in headless Chromium (Debian's), driven by puppeteer-core: one browser
// for every page, against a store the fixture builds (tests/unit/serve/serve_fixture.cpp).
// Checks: the runs table shows the store's runs; a run page draws its curves (points counted in
// the charts); a live page gains points while a run writes; 60 hostile strings render literally
// as run names, tags, metric names, root causes and summary keys on every page, with the
// document.title canary unchanged, no script of theirs run and no CSP violation; the compare page
// shows the verdict and both curves; a program's run charts every series it logged, per rank, and
// zooms to full resolution; a seed group's band has the members' mean; two groups compare as two
// bands; N runs show only the spec fields that differ; a sweep's points in parallel coordinates.
// Screenshots of each page go to --out.
// Exit 0 pass, 1 fail, 77 skip (no chromium, or no node_modules: scripts/install-deps.sh); with
// EXPCTL_REQUIRE_ALL=1 (.ci/run) a skip is a failure unless what is missing is in EXPCTL_ALLOWED_SKIPS.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: { expctl: { type: 'string' }, fixture: { type: 'string' }, hostile: { type: 'string' }, out: { type: 'string' } },
});
for (const name of ['expctl', 'fixture', 'hostile', 'out']) {
  if (!args[name]) { console.error(`usage: serve_pages.mjs --expctl BIN --fixture BIN --hostile FILE --out DIR (missing --${name})`); process.exit(2); }
}
// skip(need, why): exit 77 (ctest: Skipped), or 1 under EXPCTL_REQUIRE_ALL=1 (docs/contributing.md).
function skip(need, why) {
  const allowed = (process.env.EXPCTL_ALLOWED_SKIPS ?? '').split(/[\s,]+/);
  if (process.env.EXPCTL_REQUIRE_ALL === '1' && !allowed.includes(need)) {
    console.log(`FAIL: EXPCTL_REQUIRE_ALL=1 but this test cannot run here: ${need} is missing (${why})`);
    process.exit(1);
  }
  console.log(`SKIP: ${why}`);
  process.exit(77);
}
const browserPath = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']
  .find((candidate) => { try { execFileSync(candidate, ['--version'], { stdio: 'ignore' }); return true; } catch { return false; } });
if (!browserPath) skip('chromium', 'no chromium installed (apt-get install chromium)');
let puppeteer;
try {
  puppeteer = (await import('puppeteer-core')).default;
} catch {
  skip('node', 'puppeteer-core is not installed in tests/browser (scripts/install-deps.sh runs npm ci there)');
}

const hostile = JSON.parse(readFileSync(args.hostile, 'utf8'));
const tagOf = (text) => [...text].map((c) => (c === ',' || c.charCodeAt(0) <= 32 || c === '\x7f' ? '_' : c)).join('').slice(0, 200);
const work = mkdtempSync(path.join(tmpdir(), 'expctl-serve-browser-'));
const db = path.join(work, 'expctl.db');
mkdirSync(args.out, { recursive: true });
const failures = [];
const check = (ok, what) => { if (!ok) { failures.push(what); console.error('FAIL: ' + what); } };
const children = [];
// A sweep over the sweep tests' base spec (tests/data/sweep/base.yaml): 3 learning rates x 2 seeds.
const sweepFile = path.join(work, 'sweep-lr.yaml');
writeFileSync(sweepFile, `base: ${path.resolve(path.dirname(args.hostile), '..', 'sweep', 'base.yaml')}\nname: lr-sweep\n` +
  'grid:\n  optim.lr: [0.01, 0.1, 1.0]\nseeds: 2\n');

function run(bin, argv) {
  return execFileSync(bin, argv, { encoding: 'utf8' });
}
function startServer() {
  const tokenFile = path.join(work, 'token');
  writeFileSync(tokenFile, 'browser-test-token-0123456789\n', { mode: 0o600 });  // expctl serve refuses a token file others can read
  const child = spawn(args.expctl, ['--db', db, 'serve', '--port', '0', '--token-file', tokenFile, '--sweep', sweepFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('expctl serve printed no URL in 20 s: ' + out)), 20000);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      // A --token-file token is not printed: the URL names the file, and the test knows its token.
      const match = out.match(/open +http:\/\/127\.0\.0\.1:(\d+)\/\?token=<the token in /);
      if (match) {
        clearTimeout(timer);
        const base = `http://127.0.0.1:${match[1]}`;
        resolve({ url: `${base}/?token=browser-test-token-0123456789`, base });
      }
    });
    child.stderr.on('data', (chunk) => { out += chunk; });
    child.on('exit', (code) => reject(new Error(`expctl serve exited with ${code}: ${out}`)));
  });
}

let browser;
try {
  const ids = JSON.parse(run(args.fixture, ['store', db, args.hostile]));
  const sweepMade = JSON.parse(run(args.fixture, ['sweep', db, sweepFile]));
  const { url, base } = await startServer();
  browser = await puppeteer.launch({
    executablePath: browserPath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', `--user-data-dir=${path.join(work, 'profile')}`],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const consoleErrors = [];
  page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()); });
  page.on('pageerror', (error) => consoleErrors.push(String(error)));
  // Before any script of the page: record CSP violations and any dialog a payload might open.
  await page.evaluateOnNewDocument(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
    window.alert = window.confirm = window.prompt = () => { window.__violations.push('dialog'); };
  });
  const ready = async () => {
    await page.waitForFunction(() => window.__expctl && window.__expctl.ready, { timeout: 20000 });
  };
  const canary = async (expected, where) => {
    const state = await page.evaluate(() => ({ title: document.title, violations: window.__violations, errors: window.__expctl.errors }));
    check(state.title === expected, `${where}: document.title is ${JSON.stringify(state.title)}, not ${JSON.stringify(expected)}`);
    check(state.violations.length === 0, `${where}: CSP violations or dialogs: ${state.violations.join('; ')}`);
    return state;
  };
  // Text a page printed by mistake: a null, an undefined or an element turned into a string (not
  // for the pages of hostile runs, whose names include "null" and "undefined" on purpose).
  const noStrays = async (where) => {
    const strays = await page.evaluate(() => {
      const found = [];
      const walker = document.createTreeWalker(document.getElementById('main'), NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.textContent.trim();
        if (/^(null|undefined)+$/.test(text) || text.includes('[object ')) found.push(text);
      }
      return found;
    });
    check(strays.length === 0, `${where}: stray text ${JSON.stringify(strays)} (a null or an object printed as text)`);
  };
  const points = (id) => page.$eval(id, (canvas) => Number(canvas.getAttribute('data-points') || 0));

  // 1. The token once in the URL becomes a cookie; the runs table shows every run of the store.
  await page.goto(url.replace('/?', '/?limit=200&'), { waitUntil: 'load' });
  await ready();
  check(!page.url().includes('token='), 'the token stays in the URL after the first visit: ' + page.url());
  const table = await page.evaluate(() => ({
    rows: [...document.querySelectorAll('#runs tbody tr')].map((tr) => tr.getAttribute('data-run')),
    names: [...document.querySelectorAll('#runs .run-name')].map((td) => td.textContent),
    tags: [...document.querySelectorAll('#runs .tags')].map((td) => td.getAttribute('title')),
    shown: [...document.querySelectorAll('#runs .tags')].map((td) => td.textContent),
    defaultColumns: [...document.querySelectorAll('#runs th.metric-column')].map((th) => th.textContent),
    info: document.getElementById('page-info').textContent,
  }));
  const expectedRuns = 3 + hostile.length + 1 + 1 + ids.seeds_a.length + ids.seeds_b.length + (sweepMade.points - 1);
  check(table.rows.length === expectedRuns, `runs table has ${table.rows.length} rows, the store ${expectedRuns}`);
  for (const id of [ids.alpha, ids.beta, ids.failed, ...ids.hostile]) check(table.rows.includes(id), `run ${id} missing from the table`);
  for (const text of hostile) {
    check(table.names.includes(text), 'run name not rendered literally: ' + JSON.stringify(text).slice(0, 80));
    check(table.tags.includes(tagOf(text)), 'tag not rendered literally: ' + JSON.stringify(tagOf(text)).slice(0, 80));
  }
  // By default the table shows each run's last loss and eval accuracy; a sweep's 64-hex hash tag
  // is shortened in the cell and whole in its title.
  check(JSON.stringify(table.defaultColumns) === JSON.stringify(['last loss', 'last eval_accuracy']),
    'default metric columns: ' + table.defaultColumns.join(','));
  const hashTag = table.tags.flatMap((t) => (t || '').split(', ')).find((t) => t.startsWith('sweep-hash:'));
  check(hashTag && hashTag.length > 24, 'a sweep-hash tag in the titles: ' + hashTag);
  check(hashTag && table.shown.some((t) => t.includes(hashTag.slice(0, 20) + '\u2026')) &&
    !table.shown.some((t) => t.includes(hashTag)), 'the long tag is shortened in the cell');
  await canary('expctl: runs', 'runs table');
  await page.screenshot({ path: path.join(args.out, 'runs.png') });

  // Filters and sorting live in the URL: a shared link shows the same rows.
  await page.goto(`${base}/?status=completed&sort=name&order=asc&limit=200`, { waitUntil: 'load' });
  await ready();
  const filtered = await page.evaluate(() => [...document.querySelectorAll('#runs tbody tr td:nth-child(3)')].map((td) => td.textContent));
  check(filtered.length > 0 && filtered.every((s) => s === 'completed'), 'status filter from the URL: ' + filtered.join(','));
  const sortedNames = await page.evaluate(() => [...document.querySelectorAll('#runs .run-name')].map((td) => td.textContent));
  check(sortedNames.length > 1 && sortedNames.every((n, i) => i === 0 || sortedNames[i - 1] <= n), 'names are not sorted ascending');

  // Metric columns: several, chosen by the user, kept in the URL (col=AGG:METRIC each).
  await page.goto(`${base}/?col=min:loss&col=max:samples_per_sec&limit=200`, { waitUntil: 'load' });
  await ready();
  const columnsShown = await page.evaluate((alpha) => ({
    heads: [...document.querySelectorAll('#runs th.metric-column')].map((th) => th.textContent),
    cells: [...document.querySelectorAll(`#runs tr[data-run="${alpha}"] td.metric-cell`)].map((td) => td.textContent),
  }), ids.alpha);
  check(JSON.stringify(columnsShown.heads) === JSON.stringify(['min loss', 'max samples_per_sec']), 'metric columns: ' + columnsShown.heads.join(','));
  check(columnsShown.cells.length === 2 && columnsShown.cells.every((c) => c !== '-' && Number.isFinite(Number(c))), 'metric cells of alpha: ' + columnsShown.cells.join(','));
  await page.select('select[data-column=agg]', 'last');
  await page.type('input[data-column=metric]', 'step_time_ms');
  await page.click('button[data-column=add]');
  await page.waitForFunction(() => document.querySelectorAll('#runs th.metric-column').length === 3, { timeout: 10000 });
  check(new URL(page.url()).searchParams.getAll('col').join(',') === 'min:loss,max:samples_per_sec,last:step_time_ms', 'columns in the URL: ' + page.url());
  await page.click('.chip .remove');
  await page.waitForFunction(() => document.querySelectorAll('#runs th.metric-column').length === 2, { timeout: 10000 });
  check(new URL(page.url()).searchParams.getAll('col').join(',') === 'max:samples_per_sec,last:step_time_ms', 'a removed column stays in the URL: ' + page.url());
  await page.screenshot({ path: path.join(args.out, 'runs-columns.png') });

  // 2. A run page draws its curves: 2 ranks x 300 steps in each chart.
  await page.goto(`${base}/run?id=${encodeURIComponent(ids.alpha)}`, { waitUntil: 'load' });
  await ready();
  for (const metric of ['loss', 'samples_per_sec', 'step_time_ms']) {
    const count = await points('#chart-' + metric);
    check(count === 600, `run page: chart ${metric} has ${count} points, the store 600`);
  }
  // The phase timers are the phase chart's, not charts of their own (the picker adds them).
  check(await page.$('#chart-forward_ms') === null, 'run page: forward_ms charted by default');
  // Straggler scores per rank and the phase shares over the run (stacked, one rank at a time).
  check(await points('#chart-straggler_score') === 600, 'run page: straggler chart points: ' + await points('#chart-straggler_score'));
  const phaseSets = await page.evaluate(() => window.__expctl.charts.phases.data.datasets.map((d) => d.label));
  check(JSON.stringify(phaseSets) === JSON.stringify(['data', 'forward', 'backward', 'exposed all-reduce wait', 'optimizer', 'other']),
    'phase shares chart: ' + phaseSets.join(','));
  check(await points('#chart-phases') === 6 * 300, 'phase shares chart points: ' + await points('#chart-phases'));
  const forwardShare = await page.evaluate(() => window.__expctl.charts.phases.data.datasets[1].data[5].y);
  check(forwardShare === 30, 'forward share of rank 0 is 30 % in the fixture, drawn: ' + forwardShare);
  await page.select('#phase-rank', '1');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('prank') === '1', { timeout: 10000 });
  const csvHref = await page.$eval('#chart-loss', (canvas) => canvas.closest('.chart').querySelector('a.csv').getAttribute('href'));
  check(csvHref.startsWith('/api/series.csv?'), 'CSV link: ' + csvHref);
  await canary('expctl: run', 'run page');
  await noStrays('run page');
  await page.screenshot({ path: path.join(args.out, 'run.png'), fullPage: true });
  // The x axis and log scale come from the URL too.
  await page.goto(`${base}/run?id=${encodeURIComponent(ids.alpha)}&x=wall&log=1`, { waitUntil: 'load' });
  await ready();
  const axis = await page.evaluate(() => ({ x: window.__expctl.charts.loss.options.scales.x.title.text, y: window.__expctl.charts.loss.options.scales.y.type }));
  check(axis.x === 'seconds of step time' && axis.y === 'logarithmic', 'x=wall&log=1 not applied: ' + JSON.stringify(axis));
  // Smoothing from the URL (an exponential moving average: the drawn line is not the raw one),
  // and dark mode from the theme button.
  await page.goto(`${base}/run?id=${encodeURIComponent(ids.alpha)}&smooth=0.9`, { waitUntil: 'load' });
  await ready();
  const smoothed = await page.evaluate(async (id) => {
    const raw = await (await fetch('/api/series?id=' + encodeURIComponent(id) + '&metric=samples_per_sec')).json();
    const drawn = window.__expctl.charts.samples_per_sec.data.datasets[0].data;
    return { slider: document.getElementById('smooth').value, first: drawn[0].y === raw.ranks[0].y[0], later: drawn[50].y !== raw.ranks[0].y[50] };
  }, ids.alpha);
  check(smoothed.slider === '0.9' && smoothed.first && smoothed.later, 'smooth=0.9 not applied: ' + JSON.stringify(smoothed));
  const themeBefore = await page.evaluate(() => document.documentElement.classList.contains('dark'));
  await page.click('#theme');
  const themeAfter = await page.evaluate(() => ({ dark: document.documentElement.classList.contains('dark'), stored: localStorage.getItem('expctl-theme') }));
  check(themeAfter.dark !== themeBefore && themeAfter.stored === (themeAfter.dark ? 'dark' : 'light'), 'the theme button: ' + JSON.stringify(themeAfter));
  await page.screenshot({ path: path.join(args.out, 'run-dark.png') });
  await page.click('#theme');

  // 2b. A program's run: every series it logged is charted, per rank, in order (loss, the eval
  // series, its own, the supervisor's sys_*); the picker adds a series left out by default.
  await page.goto(`${base}/run?id=${encodeURIComponent(ids.program)}`, { waitUntil: 'load' });
  await ready();
  const programCharts = await page.$$eval('#charts .chart:not([hidden]) canvas', (canvases) => canvases.map((c) => [c.getAttribute('data-metric'), Number(c.getAttribute('data-points'))]));
  check(JSON.stringify(programCharts) === JSON.stringify([['loss', 400], ['eval_accuracy', 4], ['kl_divergence', 400], ['reward', 400],
    ['sys_cpu_percent', 40], ['sys_rss_mb', 40]]), 'program run charts: ' + JSON.stringify(programCharts));
  const reward = await page.evaluate(() => window.__expctl.charts.reward.data.datasets.map((d) => [d.label, d.data[9].x, d.data[9].y]));
  check(JSON.stringify(reward) === JSON.stringify([['rank 0', 10, 5], ['rank 1', 10, 6]]), 'reward per rank at step 10 (0.5 * step + rank): ' + JSON.stringify(reward));
  const pickable = await page.$$eval('#metric-picker option', (options) => options.map((o) => o.value).filter((v) => v));
  check(JSON.stringify(pickable) === JSON.stringify(['data_wait_ms']), 'the picker offers the series not charted: ' + pickable.join(','));
  await page.select('#metric-picker', 'data_wait_ms');
  await page.waitForFunction(() => Number(document.querySelector('[id="chart-data_wait_ms"]')?.getAttribute('data-points')) === 400, { timeout: 10000 });
  check(new URL(page.url()).searchParams.getAll('m').join(',') === 'data_wait_ms', 'a picked series stays in the URL: ' + page.url());
  await canary('expctl: run', 'program run page');
  await noStrays('program run page');
  await page.screenshot({ path: path.join(args.out, 'run-program.png'), fullPage: true });
  // Zoom: with 30 points a rank the reward chart is downsampled; the steps 50-75 asked for again
  // come at full resolution (26 a rank); a drag across the chart asks for the steps it covers.
  await page.goto(`${base}/run?id=${encodeURIComponent(ids.program)}&points=30`, { waitUntil: 'load' });
  await ready();
  check(await page.$eval('#chart-reward', (c) => c.getAttribute('data-downsampled')) === '1', 'reward not downsampled at points=30');
  const box = await (await page.$('#chart-reward')).boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.45, box.y + box.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.waitForFunction(() => window.__expctl.zoomed === true, { timeout: 10000 });
  const dragged = await page.evaluate(async () => {
    const url = new URL(location.href);
    const from = Number(url.searchParams.get('from'));
    const to = Number(url.searchParams.get('to'));
    const xs = window.__expctl.charts.reward.data.datasets.flatMap((d) => d.data.map((p) => p.x));
    const api = await (await fetch(`/api/series?id=${url.searchParams.get('id')}&metric=reward&points=30&from=${from}&to=${to}`)).json();
    return { from, to, min: Math.min(...xs), max: Math.max(...xs), drawn: xs.length, api: api.ranks.reduce((n, r) => n + r.x.length, 0) };
  });
  check(dragged.to > dragged.from && dragged.min >= dragged.from && dragged.max <= dragged.to && dragged.drawn === dragged.api && dragged.drawn > 0,
    'a drag zooms to its steps: ' + JSON.stringify(dragged));
  await page.goto(`${base}/run?id=${encodeURIComponent(ids.program)}&points=30&from=50&to=75`, { waitUntil: 'load' });
  await ready();
  const zoomed = await page.evaluate(() => ({ points: Number(document.querySelector('#chart-reward').getAttribute('data-points')),
    downsampled: document.querySelector('#chart-reward').getAttribute('data-downsampled'), min: window.__expctl.charts.reward.options.scales.x.min }));
  check(zoomed.points === 52 && zoomed.downsampled === '0' && zoomed.min === 50, 'zoomed to steps 50-75 at full resolution: ' + JSON.stringify(zoomed));
  await page.screenshot({ path: path.join(args.out, 'run-zoomed.png') });

  // 2c. A group over seeds: the runs of one spec but the seed, as a mean and its 95 % band; the
  // mean at a step is the mean of the members' own values there.
  const memberLoss = (id, step) => page.evaluate(async (run, at) => {
    const series = await (await fetch('/api/series?id=' + encodeURIComponent(run) + '&metric=loss&points=5000')).json();
    const rank = series.ranks[0];
    return rank.y[rank.x.indexOf(at)];
  }, id, step);
  const expectedMean = async (members, step) => {
    const values = [];
    for (const id of members) values.push(await memberLoss(id, step));
    return values.reduce((a, b) => a + b, 0) / values.length;
  };
  await page.goto(`${base}/group?like=${encodeURIComponent(ids.seeds_a[0])}`, { waitUntil: 'load' });
  await ready();
  const group = await page.evaluate(() => {
    const sets = window.__expctl.charts['band-loss'].data.datasets;
    const at = (band, step) => sets.find((d) => d.band === band).data.find((p) => p.x === step).y;
    return { members: [...document.querySelectorAll('#group-members tbody tr')].map((tr) => tr.getAttribute('data-run')),
      mean: at('mean', 100), low: at('low', 100), high: at('high', 100), sets: sets.length,
      evalBand: window.__expctl.charts['band-eval_accuracy'] ? window.__expctl.charts['band-eval_accuracy'].data.datasets.find((d) => d.band === 'mean').data.length : 0 };
  });
  check(JSON.stringify([...group.members].sort()) === JSON.stringify([...ids.seeds_a].sort()), 'the seed group of a run: ' + group.members.join(','));
  const mean100 = await expectedMean(ids.seeds_a, 100);
  check(Math.abs(group.mean - mean100) <= 1e-4 * Math.abs(mean100), `band mean at step 100 is ${group.mean}, the members' mean ${mean100}`);
  check(group.low < group.mean && group.mean < group.high, 'the band holds its mean: ' + JSON.stringify(group));
  check(group.evalBand === 3, 'the eval_accuracy band has its 3 evaluations: ' + group.evalBand);
  await page.click('#show-members');
  await page.waitForFunction(() => window.__expctl.charts['band-loss'].data.datasets.filter((d) => d.member).length === 3, { timeout: 10000 });
  check(new URL(page.url()).searchParams.get('members') === '1', 'members shown stays in the URL');
  await canary('expctl: group', 'group page');
  await noStrays('group page');
  await page.screenshot({ path: path.join(args.out, 'group.png'), fullPage: true });

  // 2d. Compare of two groups (an A/B's tagged sides): both bands; N runs: only the fields that differ.
  await page.goto(`${base}/compare?a=all:tag:ab:fixture:a&b=all:tag:ab:fixture:b`, { waitUntil: 'load' });
  await ready();
  const sides = await page.evaluate(() => window.__expctl.charts['compare-loss'].data.datasets.filter((d) => d.band === 'mean').map((d) => [d.label, d.data.find((p) => p.x === 100).y]));
  check(sides.length === 2 && sides[0][0].startsWith('A mean of 3') && sides[1][0].startsWith('B mean of 3'), 'compare of two groups draws both means: ' + JSON.stringify(sides));
  const mean100b = await expectedMean(ids.seeds_b, 100);
  check(sides.length === 2 && Math.abs(sides[0][1] - mean100) <= 1e-4 * mean100 && Math.abs(sides[1][1] - mean100b) <= 1e-4 * mean100b,
    `the two bands' means at step 100: ${JSON.stringify(sides)}, the members' ${mean100} and ${mean100b}`);
  check(await page.evaluate(() => window.__expctl.charts['compare-loss'].data.datasets.filter((d) => d.band === 'high').length) === 2, 'two bands');
  await canary('expctl: compare', 'compare page of two groups');
  await page.screenshot({ path: path.join(args.out, 'compare-groups.png'), fullPage: true });
  const nRuns = [ids.seeds_a[0], ids.seeds_a[1], ids.seeds_b[0]];
  await page.goto(`${base}/?limit=200`, { waitUntil: 'load' });
  await ready();
  for (const id of nRuns) await page.click(`#runs tr[data-run="${id}"] input[type=checkbox]`);
  check(await page.$eval('#compare-selected', (b) => b.textContent) === 'compare 3 selected', 'the compare button counts the selected runs');
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#compare-selected')]);
  await ready();
  const nCompare = await page.evaluate(() => ({
    runs: [...document.querySelectorAll('#spec-diff thead th[data-run]')].map((th) => th.getAttribute('data-run')),
    rows: [...document.querySelectorAll('#spec-diff tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)),
    points: Number(document.querySelector('#chart-compare-runs').getAttribute('data-points')),
  }));
  check(new Set(nCompare.runs).size === 3 && nRuns.every((id) => nCompare.runs.includes(id)), 'N-run compare columns: ' + nCompare.runs.join(','));
  const column = (id) => nCompare.runs.indexOf(id) + 1;
  const row = (path) => nCompare.rows.find((r) => r[0] === path) || [];
  check(JSON.stringify(nCompare.rows.map((r) => r[0])) === JSON.stringify(['optim.lr', 'seed']), 'only the differing fields: ' + JSON.stringify(nCompare.rows));
  check(row('seed')[column(ids.seeds_a[1])] === '2' && row('optim.lr')[column(ids.seeds_b[0])] === '0.02', 'the differing values: ' + JSON.stringify(nCompare.rows));
  check(nCompare.points === 900, 'N-run compare chart: ' + nCompare.points + ' points, 300 per run');
  await canary('expctl: compare', 'N-run compare page');
  await noStrays('N-run compare page');
  await page.screenshot({ path: path.join(args.out, 'compare-n.png'), fullPage: true });

  // 3. Hostile strings on run pages: name, root cause, metric names, summary keys and values.
  const allPage = await (async () => {
    await page.goto(`${base}/run?id=${encodeURIComponent(ids.all_hostile)}`, { waitUntil: 'load' });
    await ready();
    return page.evaluate(() => [...document.querySelectorAll('#summary td')].map((td) => td.textContent));
  })();
  for (const text of hostile) {
    check(allPage.includes(text), 'summary key/value not rendered literally: ' + JSON.stringify(text).slice(0, 80));
  }
  await canary('expctl: run', 'run page of every hostile string');
  await page.screenshot({ path: path.join(args.out, 'run-hostile.png') });
  for (const [i, id] of ids.hostile.entries()) {
    if (i % 6 !== 0) continue; // ten of them: each page load costs ~0.2 s
    await page.goto(`${base}/run?id=${encodeURIComponent(id)}`, { waitUntil: 'load' });
    await ready();
    const shown = await page.evaluate(() => ({
      name: document.querySelector('h1 .run-name').textContent,
      cause: document.querySelector('.root-cause').textContent,
      metrics: [...document.querySelectorAll('#metrics td')].map((td) => td.textContent),
    }));
    check(shown.name === hostile[i], `run page ${i}: name ${JSON.stringify(shown.name).slice(0, 60)}`);
    check(shown.cause === hostile[(i + 1) % hostile.length], `run page ${i}: root cause not literal`);
    check(shown.metrics.includes(hostile[i]), `run page ${i}: metric name not literal`);
    await canary('expctl: run', `run page of hostile string ${i}`);
  }

  // 4. Compare: the verdict of expctl compare and both runs' loss curves overlaid.
  await page.goto(`${base}/compare?a=${encodeURIComponent(ids.alpha)}&b=${encodeURIComponent(ids.beta)}`, { waitUntil: 'load' });
  await ready();
  const verdict = await page.$eval('#verdict', (node) => node.textContent);
  const cliDocument = JSON.parse(run(args.expctl, ['--db', db, 'compare', ids.alpha, ids.beta, '--format', 'json']).toString() || '{}');
  const cliVerdict = cliDocument.verdict;
  // Each metric's A and B as the CLI has them, to the 4 significant digits shown (3000 once
  // showed as "3": trailing zeros of an integer were cut as if they were a fraction's).
  const shown = await page.evaluate(() => [...document.querySelectorAll('#metrics tbody tr')].map((tr) =>
    [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent)));
  for (const metric of cliDocument.metrics || []) {
    const row = shown.find((cells) => cells[0] === metric.metric);
    check(row !== undefined, `compare page: no row for ${metric.metric}`);
    if (!row) continue;
    for (const [side, cell] of [['a', row[1]], ['b', row[2]]]) {
      const want = metric[side];
      const ok = want === null ? cell === '-' : Math.abs(Number(cell) - want) <= Math.abs(want) * 5e-4 + 1e-12;
      check(ok, `compare page: ${metric.metric} ${side.toUpperCase()} shows ${cell}, the CLI has ${want}`);
    }
  }
  check(verdict.length > 0 && verdict === cliVerdict, `compare verdict ${JSON.stringify(verdict)} differs from the CLI's ${JSON.stringify(cliVerdict)}`);
  const overlaid = await points('#chart-compare-loss');
  check(overlaid === 600, `compare chart has ${overlaid} points, expected 300 per run`);
  await canary('expctl: compare', 'compare page');
  await noStrays('compare page');
  await page.screenshot({ path: path.join(args.out, 'compare.png'), fullPage: true });
  await page.goto(`${base}/compare?a=${encodeURIComponent(ids.hostile[0])}&b=${encodeURIComponent(ids.hostile[1])}`, { waitUntil: 'load' });
  await ready();
  await canary('expctl: compare', 'compare page of hostile runs');

  // 4b. Sweep: the list of the sweeps served, then one sweep's table (the CLI's text, cell for
  // cell) and a plot of each metric against the numeric axis.
  await page.goto(`${base}/sweep`, { waitUntil: 'load' });
  await ready();
  const listed = await page.$$eval('#sweeps a', (links) => links.map((a) => a.textContent));
  check(JSON.stringify(listed) === JSON.stringify(['lr-sweep']), 'sweeps listed: ' + listed.join(','));
  await page.click('#sweeps a');
  await page.waitForSelector('#configurations');
  await ready();
  const sweepShown = await page.evaluate(() => ({
    title: document.getElementById('sweep-title').textContent,
    rows: [...document.querySelectorAll('#configurations tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)),
    plots: [...document.querySelectorAll('#plots canvas')].map((c) => [c.id, Number(c.getAttribute('data-points'))]),
  }));
  const cliReport = JSON.parse(run(args.expctl, ['--db', db, 'sweep', sweepFile, '--report', '--format', 'json']));
  check(sweepShown.title.includes(`5 of ${cliReport.runs_expected} runs completed`), 'sweep title: ' + sweepShown.title);
  check(sweepShown.rows.length === cliReport.configurations.length && sweepShown.rows.length === 3, `sweep table has ${sweepShown.rows.length} rows`);
  const cliText = run(args.expctl, ['--db', db, 'sweep', sweepFile, '--report']);
  for (const row of sweepShown.rows) check(row.every((cell) => cliText.includes(cell)), 'a sweep table row the CLI does not print: ' + row.join(' | '));
  // Parallel coordinates: a line per completed run through optim.lr and the metric; the lowest
  // final_train_loss (lr 0.1 in the fixture) at the bottom of the metric's axis.
  const parallel = await page.evaluate(() => {
    const sets = window.__expctl.charts.parallel.data.datasets;
    return { metric: document.getElementById('chart-parallel').getAttribute('data-metric'), lines: sets.length,
      shape: sets.map((d) => d.data.length), best: sets.filter((d) => d.data[1].y === 0).map((d) => d.line.axes[0]) };
  });
  check(parallel.metric === 'final_train_loss' && parallel.lines === 5 && parallel.shape.every((n) => n === 2),
    'parallel coordinates: ' + JSON.stringify(parallel));
  check(JSON.stringify(parallel.best) === JSON.stringify([0.1]), 'the best run of the parallel coordinates has lr 0.1: ' + JSON.stringify(parallel.best));
  await page.select('#pc-metric', 'eval_accuracy');
  check(await page.$eval('#chart-parallel', (c) => c.getAttribute('data-metric')) === 'eval_accuracy' &&
    new URL(page.url()).searchParams.get('pc') === 'eval_accuracy', 'the parallel coordinates follow the chosen metric');
  check(sweepShown.plots.length === cliReport.metrics.length && sweepShown.plots.every(([, n]) => n >= 5),
    'sweep plots: ' + JSON.stringify(sweepShown.plots));
  check(sweepShown.plots.some(([id]) => id === 'plot-final_train_loss-optim-lr'), 'plot ids as the HTML report names them: ' + JSON.stringify(sweepShown.plots));
  await canary('expctl: sweep', 'sweep page');
  await noStrays('sweep page');
  await page.screenshot({ path: path.join(args.out, 'sweep.png'), fullPage: true });

  // 5. Live: the page polls with its sequence number and gains points while the run writes.
  const live = spawn(args.fixture, ['live', db, '150', '40'], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(live);
  const liveId = await new Promise((resolve) => live.stdout.once('data', (chunk) => resolve(String(chunk).trim())));
  await new Promise((resolve) => setTimeout(resolve, 400));
  await page.goto(`${base}/run?id=${encodeURIComponent(liveId)}`, { waitUntil: 'load' });
  await ready();
  const before = await points('#chart-loss');
  await page.waitForFunction((n) => Number(document.querySelector('#chart-loss').getAttribute('data-points')) > n + 20, { timeout: 15000 }, before)
    .catch(() => {});
  const after = await points('#chart-loss');
  check(after > before + 20, `live page: ${before} points, then ${after}: no new points arrived`);
  await page.screenshot({ path: path.join(args.out, 'live.png') });
  await canary('expctl: run', 'live page');

  const cspErrors = consoleErrors.filter((text) => /Content Security Policy|Refused to/.test(text));
  check(cspErrors.length === 0, 'CSP errors in the console: ' + cspErrors.join(' | '));
  console.log(`pages checked: runs, filtered runs, run, run (wall, log), run (smooth, dark), program run, program run zoomed (drag, URL), seed group, compare of two groups, N-run compare, every-hostile run, 10 hostile runs, compare x2, sweep list, sweep (parallel coordinates), live (${before} -> ${after} points)`);
} catch (error) {
  failures.push(String(error && error.stack || error));
  console.error(error);
} finally {
  if (browser) await browser.close();
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}
if (failures.length) {
  console.error(`${failures.length} check(s) failed`);
  process.exit(1);
}
console.log(`ok: expctl serve's pages render in headless chromium; screenshots in ${args.out}`);
