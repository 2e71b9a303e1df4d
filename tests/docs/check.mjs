// The API reference at /docs, as a person would use it, in headless Chromium (Debian's, driven
// by playwright-core): the page renders every operation of the live document, "Authorize"
// takes a pasted token, and "Try it out" on the cluster list gets a 200 from the server. Fails
// on any script error, any Content-Security-Policy violation, and any request that leaves the
// server's origin (the page must work with no network beyond it).
// Usage: BASE_URL=http://127.0.0.1:8080 TOKEN=<bearer> node check.mjs
// CHROMIUM overrides the executable (default /usr/bin/chromium).
import { chromium } from 'playwright-core';

const base = process.env.BASE_URL;
const token = process.env.TOKEN;
if (!base || !token) {
  console.error('BASE_URL and TOKEN are required');
  process.exit(1);
}
const origin = new URL(base).origin;
const STEP_MS = 20_000;

const problems = [];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => problems.push(`script error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`);
  });
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith('data:') && new URL(url).origin !== origin) {
      problems.push(`a request left the server: ${url}`);
    }
  });

  const response = await page.goto(`${base}/docs`, { timeout: STEP_MS });
  if (response.status() !== 200) throw new Error(`/docs answered ${response.status()}`);
  // The page opens with every operation folded under its tag; a reader opens a tag first.
  await page.waitForSelector('.opblock-tag', { timeout: STEP_MS });
  const open = await page.locator('.opblock').count();
  if (open !== 0) throw new Error(`${open} operations shown unfolded on opening`);
  const tags = page.locator('.opblock-tag');
  for (let i = 0; i < (await tags.count()); i++) await tags.nth(i).click();
  await page.waitForSelector('.opblock', { timeout: STEP_MS });
  const operations = await page.locator('.opblock').count();
  const documented = await (await fetch(`${base}/v1/openapi.json`)).json();
  const expected = Object.values(documented.paths)
    .map((item) => Object.keys(item).filter((k) => ['get', 'post', 'patch', 'put', 'delete'].includes(k)).length)
    .reduce((a, b) => a + b, 0);
  if (operations !== expected) throw new Error(`${operations} operations shown, ${expected} documented`);

  // Authorize with a pasted token.
  await page.click('button.authorize');
  await page.fill('.modal-ux input', token);
  await page.click('.modal-ux button.authorize');
  await page.click('.modal-ux button.btn-done');

  // Try it out: the cluster list of the token's organization.
  const list = page.locator('#operations-clusters-list_clusters');
  await list.locator('.opblock-summary').click();
  await list.locator('button.try-out__btn').click();
  await list.locator('button.execute').click();
  const status = list.locator('.live-responses-table tbody .response-col_status');
  await status.first().waitFor({ timeout: STEP_MS });
  const code = (await status.first().innerText()).trim();
  if (code !== '200') throw new Error(`try it out answered ${code}`);

  // Try it out on a write: its body comes filled in with the document's example, which works
  // as it is.
  const create = page.locator('#operations-clusters-create_cluster');
  await create.locator('.opblock-summary').click();
  await create.locator('button.try-out__btn').click();
  await create.locator('button.execute').click();
  const created = create.locator('.live-responses-table tbody .response-col_status');
  await created.first().waitFor({ timeout: STEP_MS });
  const createdCode = (await created.first().innerText()).trim();
  if (createdCode !== '201') throw new Error(`try it out on the create example answered ${createdCode}`);

  if (problems.length > 0) throw new Error(problems.join('\n'));
  console.log(`/docs: folded on opening, ${operations} operations, authorized, try-it-out answered ${code}, the create example ${createdCode}, no outside request`);
} catch (e) {
  console.error(`FAILED: ${e.message}`);
  for (const p of problems) console.error(`  ${p}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
