// The web console as its users drive it, in headless Chromium (Debian's, driven by
// playwright-core), against `server --dev`: a super_admin signs in, creates a cluster from the
// form (a field error first), watches its own page and the list reach Provisioned without
// reloading, sends a refused pool form that keeps what was typed, scales its pool,
// allocates and releases an Elastic IP, creates, edits and deletes an auth server of each type,
// downloads a kubeconfig that `kubectl config view --minify` accepts, uses the forms with
// JavaScript off, deletes the cluster and signs out; a
// member sees the same cluster with no control that changes it, and a delete forced past the
// page is refused; the assistant asks over /mcp to create a cluster, the member opening that
// approval learns nothing, and the super_admin follows its link signed out, signs in, comes
// back to it and approves it. Every page is scanned with axe-core: no serious or critical violation. Fails
// on any script error, Content-Security-Policy violation or request leaving the server.
// Usage: BASE_URL=http://127.0.0.1:8080 node check.mjs   (SCREENSHOTS=dir also saves pages)
// CHROMIUM overrides the executable (default /usr/bin/chromium); KUBECTL the kubectl to use.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.BASE_URL;
if (!base) {
  console.error('BASE_URL is required');
  process.exit(1);
}
const origin = new URL(base).origin;
const shots = process.env.SCREENSHOTS;
const STEP_MS = 30_000;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const problems = [];
const expected = new Set(); // responses a step provokes on purpose (the field error, the refusal)

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});

async function person(label) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on('pageerror', (e) => problems.push(`${label}: script error: ${e.message}`));
  page.on('console', (m) => {
    // A refused status logs a console error too; the response listener below judges each one
    // by its URL (only the ones a step provokes are expected).
    if (m.type() === 'error' && !/status of (422|403|404)/.test(m.text())) {
      problems.push(`${label}: console error: ${m.text()}`);
    }
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !expected.has(`${r.status()} ${new URL(r.url()).pathname}`)) {
      problems.push(`${label}: ${r.status()} for ${r.url()}`);
    }
  });
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith('data:') && new URL(url).origin !== origin) {
      problems.push(`${label}: a request left the server: ${url}`);
    }
  });
  return page;
}

// axe-core runs in a page of its own context that may run injected script (the console's
// policy forbids it, rightly); it scans the same HTML the person's page has.
const scanner = await (await browser.newContext({ bypassCSP: true })).newPage();
async function scan(page, name) {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  await scanner.setContent(await page.content(), { waitUntil: 'domcontentloaded' });
  await scanner.addScriptTag({ content: axeSource });
  const result = await scanner.evaluate(async () => await globalThis.axe.run(document, {
    resultTypes: ['violations'],
    rules: { 'color-contrast': { enabled: true } },
  }));
  for (const v of result.violations) {
    if (v.impact === 'serious' || v.impact === 'critical') {
      problems.push(`${name}: axe ${v.impact}: ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    }
  }
}

// The assistant's side, as an MCP client over plain HTTP (the 2025-11-25 framing, no session),
// with the demo super_admin's development token: one tool call, its result.
const ASSISTANT_TOKEN = 'dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d';
async function assistant(tool, args) {
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${ASSISTANT_TOKEN}`,
      Accept: 'application/json, text/event-stream',
      'Content-Type': 'application/json',
      'MCP-Protocol-Version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: args } }),
  });
  if (res.status !== 200) throw new Error(`/mcp ${tool} answered ${res.status}: ${await res.text()}`);
  return (await res.json()).result;
}

async function signIn(page, who) {
  await page.goto(`${base}/console/sign-in`, { timeout: STEP_MS });
  await scan(page, 'sign-in');
  await page.getByRole('button', { name: who }).click();
  await page.waitForURL('**/console/clusters', { timeout: STEP_MS });
}

const name = `console-${Date.now().toString(36)}`;
let clusterPath;
try {
  // A super_admin creates a cluster, a field error first.
  const admin = await person('super_admin');
  await signIn(admin, 'super_admin of acme (postpaid)');
  await admin.getByRole('link', { name: 'Create cluster' }).click();
  await scan(admin, 'create-cluster');
  expected.add('422 /console/clusters/new');
  await admin.getByLabel('Name', { exact: true }).fill('Not_A_Label');
  await admin.getByRole('button', { name: 'Create cluster' }).click();
  await admin.locator('#name-error').waitFor({ timeout: STEP_MS });
  if ((await admin.getByLabel('Name', { exact: true }).getAttribute('aria-invalid')) !== 'true') {
    problems.push('the name field is not marked invalid');
  }
  await scan(admin, 'create-cluster-error');
  await admin.getByLabel('Name', { exact: true }).fill(name);
  await admin.getByRole('button', { name: 'Create cluster' }).click();
  await admin.waitForURL(/\/console\/clusters\/[0-9a-f-]{36}$/, { timeout: STEP_MS });
  clusterPath = new URL(admin.url()).pathname;

  // The new cluster's own page follows it: its phase and the progress in words change
  // without a reload, and the page says when it is done.
  let moved = 0;
  const count = (f) => { if (f === admin.mainFrame()) moved += 1; };
  admin.on('framenavigated', count);
  await admin.locator('#cluster-phase', { hasText: 'Provisioned' }).waitFor({ timeout: 60_000 });
  await admin.locator('#progress', { hasText: 'Done' }).waitFor({ timeout: STEP_MS });
  admin.off('framenavigated', count);
  if (moved !== 0) problems.push(`the cluster page reloaded ${moved} times on its way to Provisioned`);
  await scan(admin, 'cluster-live');

  // The list follows the phase without a reload.
  const row = admin.locator('tr', { has: admin.getByRole('link', { name, exact: true }) });
  // The list is in creation order, 20 a page: the new cluster is on the last page.
  for (let p = 1; p <= 50; p += 1) {
    await admin.goto(`${base}/console/clusters?page=${p}`, { timeout: STEP_MS });
    if (await row.count()) break;
  }
  let navigations = 0;
  admin.on('framenavigated', (f) => { if (f === admin.mainFrame()) navigations += 1; });
  await row.locator('.badge', { hasText: 'Provisioned' }).waitFor({ timeout: 60_000 });
  if (navigations !== 0) problems.push(`the clusters page reloaded ${navigations} times`);
  await scan(admin, 'clusters');
  // The same page at a phone's width: nothing wider than the screen.
  const phone = await admin.context().newPage();
  await phone.setViewportSize({ width: 390, height: 844 });
  await phone.goto(`${base}/console/clusters`, { timeout: STEP_MS });
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (overflow > 0) problems.push(`the clusters page is ${overflow}px wider than a phone`);
  if (shots) await phone.screenshot({ path: join(shots, 'clusters-phone.png'), fullPage: true });
  await phone.close();

  // The kubeconfig, checked by kubectl.
  await row.getByRole('link', { name }).click();
  await scan(admin, 'cluster-overview');
  clusterPath = new URL(admin.url()).pathname;

  // A refused pool form keeps what was typed and says what is wrong beside the field; then
  // the pool is scaled, and an Elastic IP allocated and released once it is Ready.
  await admin.getByRole('link', { name: 'Node pools' }).click();
  expected.add(`422 ${clusterPath}/node-pools`);
  await admin.locator('#new-pool-name').fill('Bad_Name');
  await admin.locator('#new-pool-count').fill('3');
  await admin.getByRole('button', { name: 'Add node pool' }).click();
  await admin.locator('#new-pool-name-error').waitFor({ timeout: STEP_MS });
  if ((await admin.locator('#new-pool-name').inputValue()) !== 'Bad_Name') problems.push('the refused pool form lost the typed name');
  if ((await admin.locator('#new-pool-count').inputValue()) !== '3') problems.push('the refused pool form lost the typed count');
  if ((await admin.locator('#new-pool-name').getAttribute('aria-invalid')) !== 'true') problems.push('the pool name is not marked invalid');
  await scan(admin, 'cluster-node-pools-error');
  await admin.locator('#default-count').fill('4');
  await admin.getByRole('button', { name: 'Scale pool default' }).click();
  await admin.waitForURL('**/node-pools', { timeout: STEP_MS });
  if ((await admin.locator('#default-count').inputValue()) !== '4') problems.push('the pool did not take 4 nodes');
  await scan(admin, 'cluster-node-pools');
  await admin.getByRole('link', { name: 'Nodes', exact: true }).click();
  await scan(admin, 'cluster-nodes');
  await admin.getByRole('link', { name: 'Networking' }).click();
  await admin.getByLabel('Name (optional)').fill('ingress');
  await admin.getByRole('button', { name: /^Allocate .*Elastic IP$/ }).click();
  await admin.waitForURL('**/networking', { timeout: STEP_MS });
  // Release is offered once the address is Ready (the table follows it live), behind a
  // question that says what follows.
  const ask = admin.locator('summary', { hasText: 'Release ingress' });
  await ask.waitFor({ timeout: 60_000 });
  await scan(admin, 'cluster-networking');
  await ask.click();
  await admin.getByRole('button', { name: 'Release ingress', exact: true }).click();
  await admin.waitForURL('**/networking', { timeout: STEP_MS });
  if (await admin.locator('summary', { hasText: 'Release ingress' }).count()) problems.push('the Elastic IP can still be released after its release');
  await admin.goto(`${base}${clusterPath}`, { timeout: STEP_MS });
  const [download] = await Promise.all([
    admin.waitForEvent('download', { timeout: STEP_MS }),
    admin.getByRole('link', { name: 'Download kubeconfig' }).click(),
  ]);
  const file = join(mkdtempSync(join(tmpdir(), 'console-')), 'kubeconfig.yaml');
  await download.saveAs(file);
  const view = execFileSync(process.env.KUBECTL || 'kubectl', ['config', 'view', '--minify', '--kubeconfig', file], { encoding: 'utf8' });
  if (!view.includes(name)) problems.push(`kubectl config view --minify does not name the cluster:\n${view}`);

  // The gateway's auth servers: one of each type from its form, edited, then deleted.
  const suffix = Date.now().toString(36);
  const servers = [
    ['OIDC', `sso-${suffix}`, async () => {
      await admin.getByLabel('Issuer URL').fill('https://id.example.com');
      await admin.getByLabel('Redirect path').fill('/callback');
      await admin.getByLabel('Client ID').fill('console');
      await admin.getByLabel('Client secret').fill('a-client-secret-for-the-check');
      await admin.getByLabel('Authorized domain').fill('app.example.com');
      await admin.getByText('Advanced').click();
      await admin.getByLabel('Email claim').fill('email');
    }],
    ['Basic', `partners-${suffix}`, async () => {
      await admin.getByLabel('Username').first().fill('alice');
      await admin.getByLabel('Password').first().fill('a-password-for-the-check');
    }],
    ['Token', `machines-${suffix}`, async () => {
      await admin.getByLabel('Token 1').fill('a-static-token-for-the-check');
    }],
  ];
  for (const [kind, serverName, fill] of servers) {
    await admin.goto(`${base}/console/auth-servers`, { timeout: STEP_MS });
    await admin.getByRole('link', { name: `Add ${kind} auth server` }).click();
    await admin.getByLabel('Name', { exact: true }).fill(serverName);
    await admin.getByLabel('Environment').fill('production');
    await fill();
    await scan(admin, `auth-server-new-${kind.toLowerCase()}`);
    await admin.getByRole('button', { name: 'Add auth server' }).click();
    await admin.waitForURL(/\/console\/auth-servers\/[0-9a-f-]{36}$/, { timeout: STEP_MS });
    if ((await admin.content()).includes('for-the-check')) problems.push(`${kind}: a secret reached the page`);
    await scan(admin, `auth-server-${kind.toLowerCase()}`);
    await admin.locator('#edit-environment').fill('staging');
    await admin.getByRole('button', { name: 'Save changes' }).click();
    await admin.waitForURL(/\/console\/auth-servers\/[0-9a-f-]{36}$/, { timeout: STEP_MS });
    if (!(await admin.locator('dl.facts').innerText()).includes('staging')) problems.push(`${kind}: the edit did not show`);
    await admin.getByLabel(/Type the auth server's name/).fill(serverName);
    await admin.getByRole('button', { name: 'Delete auth server' }).click();
    await admin.waitForURL('**/console/auth-servers?organization=acme', { timeout: STEP_MS });
    if (await admin.getByRole('link', { name: serverName }).count()) problems.push(`${kind}: still listed after its deletion`);
  }
  await scan(admin, 'auth-servers');
  await admin.goto(`${base}${clusterPath}`, { timeout: STEP_MS });

  // With JavaScript off, reads and forms still work: the pool editor redraws on the server.
  const noScript = await browser.newContext({ javaScriptEnabled: false });
  const plain = await noScript.newPage();
  await plain.goto(`${base}/console/sign-in`, { timeout: STEP_MS });
  await plain.getByRole('button', { name: 'super_admin of acme (postpaid)' }).click();
  await plain.waitForURL('**/console/clusters', { timeout: STEP_MS });
  await plain.getByRole('link', { name: 'Create cluster' }).click();
  await plain.getByRole('button', { name: 'Add node pool' }).click();
  if (!(await plain.getByText('Node pool 2').count())) problems.push('without JavaScript, "Add node pool" did not add a pool');
  await plain.goto(`${base}${clusterPath}/node-pools`, { timeout: STEP_MS });
  if (!(await plain.getByRole('button', { name: 'Scale pool default' }).count())) problems.push('without JavaScript, the Node pools tab has no scale form');
  await noScript.close();

  // A member reads everything and changes nothing; a forced delete is the use case's 403.
  const member = await person('member');
  await signIn(member, 'member of acme (read-only)');
  if (await member.getByRole('link', { name: 'Create cluster' }).count()) problems.push('a member is offered "Create cluster"');
  await member.goto(`${base}${clusterPath}`, { timeout: STEP_MS });
  if (await member.getByRole('button', { name: 'Delete cluster' }).count()) problems.push('a member is offered "Delete cluster"');
  const csrf = await member.locator('input[name=csrf]').first().inputValue();
  expected.add(`403 ${clusterPath}/delete`);
  const forced = await member.request.post(`${base}${clusterPath}/delete`, {
    form: { csrf, confirm: name },
    headers: { Origin: origin },
    maxRedirects: 0,
  });
  if (forced.status() !== 403) problems.push(`a member's forced delete answered ${forced.status()}, not 403`);

  // The header's Approvals link: the member's own approvals (none).
  await member.getByRole('link', { name: /^Approvals/ }).click();
  await member.waitForURL('**/console/approvals**', { timeout: STEP_MS });
  await member.getByText('Your assistant has not asked for anything yet').waitFor({ timeout: STEP_MS });
  await scan(member, 'approvals');

  // The assistant asks, over /mcp with the super_admin's token, to create a cluster: the tool
  // answers with the approval's page (this client opens no URL itself).
  const aiName = `${name}-ai`;
  const create = { name: aiName, node_pools: [{ name: 'default', size: 'kube.c5.large', count: 1 }] };
  const asked = await assistant('create_cluster', create);
  const approvalUrl = asked?.structuredContent?.url;
  if (asked?.structuredContent?.code !== 'approval_required' || !approvalUrl) {
    throw new Error(`the assistant's create was not held for approval: ${JSON.stringify(asked)}`);
  }
  const approvalPath = new URL(approvalUrl).pathname;

  // Another person opening it learns nothing: the same "not found" as no approval at all.
  expected.add(`404 ${approvalPath}`);
  await member.goto(`${base}${approvalPath}`, { timeout: STEP_MS });
  await member.getByRole('heading', { name: 'Approval not found' }).waitFor({ timeout: STEP_MS });
  if (await member.getByText(aiName).count()) problems.push("another person's approval page named the cluster");
  await scan(member, 'approval-not-found');

  // The person opens the link signed out, signs in, comes back to it, reads it and approves.
  const approver = await person('approver');
  await approver.goto(approvalUrl, { timeout: STEP_MS });
  if (!approver.url().includes('/console/sign-in?next=')) problems.push(`a signed-out approval link went to ${approver.url()}`);
  await approver.getByRole('button', { name: 'super_admin of acme (postpaid)' }).click();
  await approver.waitForURL(`**${approvalPath}`, { timeout: STEP_MS });
  const summary = await approver.locator('#approval-summary').innerText();
  if (!summary.startsWith(`Create the cluster ${aiName} in acme`)) problems.push(`the approval page says: ${summary}`);
  await scan(approver, 'approval');
  await approver.getByRole('button', { name: 'Approve', exact: true }).click();
  await approver.locator('#approval-status', { hasText: `Approved: the cluster ${aiName} is being created.` }).waitFor({ timeout: STEP_MS });
  if (await approver.getByRole('button', { name: 'Approve', exact: true }).count()) problems.push('a decided approval still offers Approve');
  await scan(approver, 'approval-approved');
  await approver.getByRole('link', { name: 'Follow the cluster' }).click();
  await approver.waitForURL(/\/console\/clusters\/[0-9a-f-]{36}$/, { timeout: STEP_MS });
  // The assistant's retry answers what its approved change made.
  const retried = await assistant('create_cluster', create);
  if (retried?.isError || retried?.structuredContent?.approval?.status !== 'approved') {
    problems.push(`the assistant's retry after approval answered ${JSON.stringify(retried)}`);
  }

  // The super_admin deletes it, confirming with its name, and signs out.
  await admin.getByLabel(/Type the cluster's name/).fill(name);
  await admin.getByRole('button', { name: 'Delete cluster' }).click();
  await admin.waitForURL('**/console/clusters?organization=acme', { timeout: STEP_MS });
  await admin.getByRole('button', { name: 'Sign out', exact: true }).click();
  await admin.waitForURL('**/console/sign-in', { timeout: STEP_MS });
  await admin.goto(`${base}/console/clusters`, { timeout: STEP_MS });
  if (!admin.url().endsWith('/console/sign-in')) problems.push('after signing out, the clusters page still opened');
} catch (e) {
  problems.push(`step failed: ${e.message}`);
} finally {
  await browser.close();
}

if (problems.length) {
  console.error(`the console check found ${problems.length} problem(s):\n- ${problems.join('\n- ')}`);
  process.exit(1);
}
console.log(`the console worked end to end in Chromium (cluster ${name}); no serious accessibility violation`);
