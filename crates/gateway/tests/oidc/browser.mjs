// Signs in through the gateway's OIDC browser flow in headless Chromium (Debian's, driven by
// playwright-core), for the gateway's tests.
// Usage: node browser.mjs <gateway URL of a protected page>
// Prints one JSON line on stdout: {"url", "body", "cookies", "set_cookie"}: `url` is where the
// browser ended, `body` the document it got there (as served, not as rendered), `cookies` the
// browser's cookies for the gateway (name and attributes only: the value is an encrypted
// session) and `set_cookie` the Set-Cookie headers of the gateway's redirects (values
// redacted), since playwright reports a cookie without a SameSite attribute as "Lax".
// Exit status 2 when Chromium cannot be launched (the message on stderr starts with "LAUNCH:"),
// 1 on any other failure. CHROMIUM overrides the executable (default /usr/bin/chromium).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const target = process.argv[2];
if (!target) {
  console.error('usage: node browser.mjs <url>');
  process.exit(1);
}
const EXECUTABLE = process.env.CHROMIUM || '/usr/bin/chromium';
// A page that never shows up should fail the test, not hang it.
const STEP_MS = 20_000;

// A fresh profile per run, so no earlier session or provider cookie leaks in.
const profile = mkdtempSync(join(tmpdir(), 'gateway-chromium-'));
let context;
try {
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: EXECUTABLE,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      timeout: 60_000,
    });
  } catch (e) {
    console.error(`LAUNCH: ${e.message.split('\n')[0]}`);
    process.exitCode = 2;
    throw e;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(STEP_MS);
  const want = new URL(target);
  // Main-frame documents from the gateway: its redirects' Set-Cookie headers, and the last one.
  const redirects = [];
  let landed;
  page.on('response', (response) => {
    const request = response.request();
    if (!request.isNavigationRequest() || new URL(response.url()).origin !== want.origin) return;
    if (response.status() >= 300 && response.status() < 400) {
      redirects.push(response.headersArray().catch(() => []));
    } else {
      landed = response;
    }
  });

  // The protected page: the gateway redirects to the provider's login page.
  await page.goto(target);
  await page.locator('input[name="login"]').fill('alice');
  await page.locator('input[name="password"]').fill('any password');
  await page.locator('button[type="submit"]').click();
  // Consent, then the provider redirects to the gateway's callback, which sets the session
  // cookie and sends the browser back to the page first asked for.
  await page.locator('input[name="prompt"][value="consent"]').waitFor({ state: 'attached' });
  await Promise.all([
    page.waitForURL((u) => u.origin === want.origin && u.pathname === want.pathname),
    page.locator('button[type="submit"]').click(),
  ]);
  await page.waitForLoadState('load');

  if (!landed) throw new Error(`no document from the gateway at ${page.url()}`);
  const body = await landed.text();
  const setCookie = (await Promise.all(redirects))
    .flat()
    .filter((h) => h.name.toLowerCase() === 'set-cookie')
    // The value is a live session: only the name and attributes are printed.
    .map((h) => h.value.replace(/^([^=;]*)=[^;]*/, '$1=<redacted>'));
  const cookies = (await context.cookies(want.origin)).map(
    ({ name, domain, path, expires, httpOnly, secure, sameSite }) => ({
      name, domain, path, expires, httpOnly, secure, sameSite,
    }),
  );
  process.stdout.write(
    `${JSON.stringify({ url: page.url(), body, cookies, set_cookie: setCookie })}\n`,
  );
} catch (e) {
  if (!process.exitCode) {
    process.exitCode = 1;
    console.error(`FAILED: ${e.stack || e}`);
  }
} finally {
  await context?.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
