// bench/serve.sh's series and band parts: opens URL in headless Chromium (Debian's, through the
// puppeteer-core that tests/browser installs) REPEAT times and prints, per load, the page's own
// marks in ms from the navigation's start (performance.now(), so the HTML, app.js and Chart.js
// are counted): "first" when its first chart was drawn and "all" when every chart was.
// With SERVER_PID, also the CPU the server spent on the load (utime + stime of /proc/PID/stat, all
// its threads) and the page's own (Chromium's TaskDuration): load-independent figures, where the
// wall times above follow whatever else the machine runs.
// Usage: node charts.mjs URL-WITH-TOKEN REPEAT; SETTLE_MS between loads (3000)
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../tests/browser/package.json'));
const puppeteer = require('puppeteer-core');
const [url, repeat] = process.argv.slice(2);
const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage();
await page.setViewport({ width: 1280, height: 900 });
const origin = new URL(url).origin;
// The token becomes a cookie on a page that reads nothing.
await page.goto(origin + '/compare?token=' + new URL(url).searchParams.get('token'), { waitUntil: 'load', timeout: 120000 });
const target = new URL(url);
target.searchParams.delete('token');
// The server's CPU time in ms (0 without SERVER_PID); clock ticks are 10 ms on Linux.
const serverCpu = () => {
  if (!process.env.SERVER_PID) return 0;
  const fields = readFileSync(`/proc/${process.env.SERVER_PID}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
const pageCpu = async () => (await page.metrics()).TaskDuration * 1000;
for (let i = 0; i < Number(repeat || 5); i++) {
  await page.goto('about:blank');
  await new Promise((resolve) => setTimeout(resolve, Number(process.env.SETTLE_MS || 3000)));
  const cpu = [serverCpu(), await pageCpu()];
  await page.goto(target.toString(), { waitUntil: 'domcontentloaded', timeout: 120000 });
  await page.waitForFunction(() => window.__expctl && window.__expctl.allCharts, { timeout: 120000, polling: 20 });
  const spent = [serverCpu() - cpu[0], Math.round(await pageCpu() - cpu[1])];
  const marks = await page.evaluate(() => {
    const charts = [...document.querySelectorAll('canvas[data-points]')].filter((c) => !c.closest('[hidden]'));
    return { first: window.__expctl.firstChart, all: window.__expctl.allCharts, charts: charts.length,
      points: charts.reduce((n, c) => n + Number(c.getAttribute('data-points')), 0), errors: window.__expctl.errors };
  });
  console.log(`load ${i}: first ${Math.round(marks.first)} all ${Math.round(marks.all)} charts ${marks.charts} points ${marks.points}` +
    ` server_cpu ${spent[0]} page_cpu ${spent[1]}` +
    (marks.errors.length ? ' errors ' + JSON.stringify(marks.errors) : ''));
}
await browser.close();
