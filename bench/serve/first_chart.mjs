// bench/serve.sh's browser part: opens URL in headless Chromium (Debian's, through the
// puppeteer-core that tests/browser installs) and prints the milliseconds from navigation to the
// first chart drawn (canvas data-points > 0) or to the runs table's first page (window.__expctl.ready).
// Usage: node first_chart.mjs URL-WITH-TOKEN (chart|table) REPEAT; SETTLE_MS between loads (10000)
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../tests/browser/package.json'));
const puppeteer = require('puppeteer-core');
const [url, what, repeat] = process.argv.slice(2);
const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage();
// The token becomes a cookie on a page that reads nothing (compare without runs), so no request
// of it is still running on the server when the first measured load starts.
const origin = new URL(url).origin;
await page.goto(origin + '/compare?token=' + new URL(url).searchParams.get('token'), { waitUntil: 'load', timeout: 120000 });
const target = new URL(url);
target.searchParams.delete('token');
const base = target.toString();
const times = [];
for (let i = 0; i < Number(repeat || 5); i++) {
  if (i > 0) {
    // The previous load's other requests (the run's document, the other charts) run on after
    // its first chart: let them end, so each load starts on an idle server.
    await page.goto('about:blank', { timeout: 120000 });
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.SETTLE_MS || 10000)));
  }
  const start = Date.now();
  // Navigation waits for the page's HTML and scripts only; the table or chart is waited for
  // below. A navigation cut short (ERR_ABORTED while the previous page's requests end, or
  // puppeteer's 30 s default timeout on a loaded machine) is said and retried once, not fatal.
  const to = base + (base.includes('?') ? '&' : '?') + 'n=' + i;
  try {
    await page.goto(to, { waitUntil: 'domcontentloaded', timeout: 120000 });
  } catch (error) {
    console.error(`first_chart.mjs: load ${i}: ${error.message}: once more`);
    await page.goto(to, { waitUntil: 'domcontentloaded', timeout: 120000 });
  }
  if (what === 'chart') {
    await page.waitForFunction(() => { const c = document.querySelector('#chart-loss'); return c && Number(c.getAttribute('data-points')) > 0; }, { timeout: 60000, polling: 10 });
  } else {
    await page.waitForFunction(() => window.__expctl && window.__expctl.ready, { timeout: 60000, polling: 10 });
  }
  times.push(Date.now() - start);
}
if (what === 'chart') {
  // The spike: the highest point drawn on each rank's line at the default zoom.
  const peaks = await page.evaluate(() => window.__expctl.charts.loss.data.datasets.map((d) => Math.max(...d.data.map((p) => p.y))));
  console.log('peaks ' + peaks.join(' '));
}
console.log('ms ' + times.join(' '));
await browser.close();
