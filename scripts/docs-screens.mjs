// npm run docs:screens: screenshots of every console page into docs/ui/, for docs/ui.md.
// msgd runs in this process on a fixed clock (2026-11-20 09:30 UTC, with 30 days of history
// before it) over a temporary data directory; Chromium comes from @sparticuz/chromium.
// Run after a build (npm ci or npx tsc -p tsconfig.json). Not part of npm test: it rewrites
// tracked files.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { selfSignedCert } from '../bench/self-signed-cert.mjs';

const DAY = 86_400_000;
const FIXED = Date.UTC(2026, 10, 20, 9, 30, 0);
const start = performance.now();
let shift = -30 * DAY;
// The clock only ever moves forward, so ids (which start with their time) stay in order.
Date.now = () => Math.floor(FIXED + shift + (performance.now() - start));

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'docs', 'ui');
const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));
const { loadConfig } = await dist('config/load.js');
const { startServer } = await dist('server.js');
const { createPartner, setCreditLimit } = await dist('core/partners.js');
const { addGateway } = await dist('core/gateways.js');
const { assignChannel } = await dist('core/channels.js');
const { setPrice } = await dist('core/prices.js');
const { topup } = await dist('core/ledger.js');
const { applyStatus, createOutbound, getMessageState } = await dist('core/messages.js');
const { issueToken } = await dist('core/tokens.js');
const { acceptJoinLink, acceptLink, findUserByEmail, inviteUser } = await dist('core/users.js');
const { parseMoney } = await dist('lib/money.js');
const chromium = (await import('@sparticuz/chromium')).default;
const puppeteer = (await import('puppeteer-core')).default;
const { Secret, TOTP } = await import('otpauth');

const work = mkdtempSync(join(tmpdir(), 'msgd-screens-'));
const { key, cert } = selfSignedCert(work);
const receiver = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200).end('ok'));
});
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));

const config = loadConfig({
  env: {},
  dataDir: join(work, 'data'),
  overrides: {
    'server.port': 0,
    'demo.enabled': false,
    'log.level': 'warn',
    'webhooksOut.caFile': cert,
    'webhooksOut.allowPrivateTargets': true,
  },
});
const server = await startServer({ config, print: () => {} });
const ctx = server.rt.ctx;
const base = server.url;
const wait = (ms) => new Promise((r) => setTimeout(r, ms));

// The partner as the operator set it up a month ago.
const partner = createPartner(ctx, { slug: 'acme', name: 'Acme Ltd' }, 'cli:ops');
setCreditLimit(ctx, partner.id, parseMoney('50.00'), 'cli:ops');
const gw = addGateway(ctx, { kind: 'sandbox', name: 'sandbox', settings: {} }, 'cli:ops');
const senders = { sms: '+15550000001', whatsapp: '+15550000002', email: 'hello@acme.example' };
const channels = {};
for (const [type, sender] of Object.entries(senders))
  channels[type] = assignChannel(ctx, { partner: partner.id, gateway: gw.id, type, sender }, 'cli:ops');
setPrice(ctx, { channel: 'sms', amount: parseMoney('0.0075'), partner: partner.id }, 'cli:ops');
setPrice(ctx, { channel: 'whatsapp', amount: parseMoney('0.02'), partner: partner.id }, 'cli:ops');
topup(ctx, partner.id, parseMoney('250.00'), 'invoice 2026-118', 'cli:ops');

// Thirty days of traffic, day by day, so the chart and the ledger have a history.
const people = ['+14155550101', '+14155550102', '+14155550103', '+442071838750', '+4930901820'];
for (let d = 29; d >= 1; d--) {
  shift = -d * DAY;
  const n = 4 + ((d * 7) % 11);
  for (let i = 0; i < n; i++) {
    const type = i % 4 === 3 ? 'whatsapp' : 'sms';
    const price = type === 'sms' ? 7_500 : 20_000;
    const ch = channels[type];
    const m = createOutbound(ctx, {
      partnerId: partner.id,
      channel: { id: ch.id, type, gatewayId: gw.id, sender: ch.sender },
      to: people[(d + i) % people.length],
      content: {
        kind: 'text',
        text: ['Your code is 482913', 'Your order has shipped', 'See you at 10:00 tomorrow'][i % 3],
      },
      price,
      segments: 1,
      actor: 'token:prod',
      lowBalanceThreshold: null,
    });
    const failed = (d + i) % 13 === 0;
    const steps = failed
      ? [{ status: 'failed', errorCode: '30007', errorMessage: 'carrier filtered the message', refundOnFailure: true }]
      : [{ status: 'sent' }, { status: 'delivered' }];
    ctx.db.sqlite.transaction(() => {
      for (const step of steps) applyStatus(ctx, getMessageState(ctx, m.id), step);
    })();
  }
}
shift = 0;

// Today, live: a token sends through the real API; the sandbox delivers; a customer replies.
const { secret: token } = issueToken(
  ctx,
  { partner: partner.id, name: 'production', scopes: 'messages:send messages:read webhooks:manage' },
  'cli:ops',
);
issueToken(ctx, { partner: partner.id, name: 'ci', scopes: 'messages:read' }, 'cli:ops');
const sent = [];
for (const [to, text] of [
  ['+14155550101', 'Your table for 2 is booked for Friday 19:30.'],
  ['+14155550102', 'Your code is 771204'],
  ['+442071838750', 'Your parcel arrives today between 14:00 and 16:00.'],
]) {
  const r = await fetch(`${base}/api/send-sms.php`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to, text }),
  });
  sent.push((await r.json()).id);
}
const { openGatewaysOfKind } = await dist('core/gateway-secrets.js');
const { sandboxBody } = await dist('providers/sandbox/webhook.js');
const { createHmac } = await import('node:crypto');
const signing = openGatewaysOfKind(ctx, ['sandbox'])[0].secrets.signing_secret;
const inbound = sandboxBody([
  {
    id: 'sbx_in_1',
    type: 'message',
    channel: 'sms',
    from: '+14155550101',
    to: senders.sms,
    text: 'Perfect, thank you! Can we make it 20:00?',
    timestamp: Math.floor(Date.now() / 1000),
  },
]);
await fetch(`${base}/api/webhook.php?gateway=${gw.id}`, {
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    'x-msgd-sandbox-signature': `sha256=${createHmac('sha256', signing).update(inbound).digest('hex')}`,
  },
  body: inbound,
});
for (let i = 0; i < 200; i++) {
  const n = ctx.db.sqlite
    .prepare(
      `SELECT COUNT(*) AS n FROM messages WHERE id IN (${sent.map(() => '?').join(',')}) AND status = 'delivered'`,
    )
    .get(...sent).n;
  if (n === sent.length) break;
  await wait(50);
}

const { secret: adminLink } = inviteUser(
  ctx,
  { partner: partner.id, email: 'ann@acme.example', role: 'admin' },
  'cli:ops',
);
inviteUser(ctx, { partner: partner.id, email: 'dev@acme.example', role: 'developer' }, 'user:ann');
const { secret: billingLink } = inviteUser(
  ctx,
  { partner: partner.id, email: 'bill@acme.example', role: 'billing' },
  'user:ann',
);
await acceptLink(ctx, billingLink, 'ledger lamp orbit canyon');

const browser = await puppeteer.launch({
  executablePath: await chromium.executablePath(),
  headless: true,
  defaultViewport: { width: 1280, height: 800 },
  args: [
    '--no-sandbox',
    '--no-zygote',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    `--user-data-dir=${join(work, 'chromium')}`,
  ],
});
try {
  const page = await browser.newPage();
  // The same pictures on any machine: times in UTC unless a shot sets a zone.
  await page.emulateTimezone('UTC');
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
  mkdirSync(out, { recursive: true });
  const shot = (name) => page.screenshot({ path: join(out, `${name}.png`) });
  const go = (path) => page.goto(base + path, { waitUntil: 'networkidle0' });
  const submit = (selector) =>
    Promise.all([page.waitForNavigation({ waitUntil: 'networkidle0' }), page.click(selector)]);
  const password = 'correct horse battery staple';

  await go(`/ui/invite/${adminLink}`);
  await page.type('#password', password);
  await page.type('#confirm', password);
  await submit('main button[type=submit]');
  await page.type('#email', 'ann@acme.example');
  await shot('login');
  await page.type('#password', password);
  await submit('main button[type=submit]');

  await go('/ui/webhooks');
  await page.type('#w-url', `https://127.0.0.1:${receiver.address().port}/msgd-events`);
  await page.type('#w-desc', 'order system');
  await submit('form[action="/ui/webhooks"] button');
  await submit('form[action$="/test"] button');
  const endpoint = page.url().split('?')[0];
  await wait(1500);

  await go('/ui/overview');
  await shot('overview');
  await go('/ui/messages');
  await shot('messages');
  // A browser in Berlin: each time also in its zone, beside UTC.
  await page.emulateTimezone('Europe/Berlin');
  await go(`/ui/messages/${sent[0]}`);
  await shot('message');
  await page.emulateTimezone('UTC');
  await go('/ui/conversations');
  await shot('conversations');
  await submit('main table tbody tr a');
  // The thread ends with the newest messages, the customer's reply among them.
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await shot('conversation');
  await go('/ui/webhooks');
  await shot('webhooks');
  await page.goto(endpoint, { waitUntil: 'networkidle0' });
  await shot('webhook');
  await submit('main a[href*="/deliveries/"]');
  await shot('webhook-delivery');
  await go('/ui/tokens');
  await shot('tokens');
  await go('/ui/ledger');
  await shot('ledger');
  await go('/ui/channels');
  await shot('channels');
  // Two-factor authentication, set up under Your account: the key as text, as a QR code and a link.
  // The key is a fresh one of this throwaway data directory, as are the recovery codes.
  await go('/ui/account/2fa');
  await submit('form[action="/ui/account/2fa/setup"] button');
  await page.screenshot({ path: join(out, 'two-factor-setup.png'), fullPage: true });
  const totp = new TOTP({
    algorithm: 'SHA1',
    digits: 6,
    period: 30,
    secret: Secret.fromBase32((await page.$eval('#totp-secret', (e) => e.textContent)).replace(/\s/g, '')),
  });
  await page.type('#code', totp.generate({ timestamp: Date.now() }));
  await submit('form[action="/ui/account/2fa/confirm"] button');
  await shot('recovery-codes');
  // Who has it on (ann), who has not (bill), nothing yet for an invitation; then require it.
  await go('/ui/users');
  await submit('form[action="/ui/users/2fa-requirement"] button');
  await shot('users');
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
  await go('/ui/overview');
  await shot('overview-dark');
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
  await page.setViewport({ width: 390, height: 844 });
  await go('/ui/messages');
  // Past the filters, to the list: its table scrolls sideways inside its box.
  await page.evaluate(() => document.querySelector('main table')?.scrollIntoView());
  await shot('messages-phone');
  await page.setViewport({ width: 1280, height: 800 });
  await go('/ui/tokens');
  await page.type('#t-name', 'staging');
  await page.$eval('form[action="/ui/tokens"] input[name=_csrf]', (e) => (e.value = 'tampered'));
  await submit('form[action="/ui/tokens"] button');
  await shot('page-expired');

  // Ann works for a second partner too, and a third one's invitation waits for her.
  const ann = findUserByEmail(ctx, 'ann@acme.example');
  const globex = createPartner(ctx, { slug: 'globex', name: 'Globex Corp' }, 'cli:ops');
  const globexJoin = inviteUser(ctx, { partner: globex.id, email: 'ann@acme.example', role: 'developer' }, 'cli:ops');
  acceptJoinLink(ctx, globexJoin.secret, ann.id);
  const initech = createPartner(ctx, { slug: 'initech', name: 'Initech' }, 'cli:ops');
  inviteUser(ctx, { partner: initech.id, email: 'ann@acme.example', role: 'billing' }, 'cli:ops');
  await submit('form[action="/ui/logout"] button');
  await go('/ui/login');
  await page.type('#email', 'ann@acme.example');
  await page.type('#password', password);
  await submit('main button[type=submit]');
  await shot('login-code');
  // A later 30-second step than the one that confirmed the set-up: a code is never accepted twice.
  shift += 60_000;
  await page.type('#code', totp.generate({ timestamp: Date.now() }));
  await submit('main button[type=submit]');
  await shot('partners');
  await submit(`form[action="/ui/partners"]:has(input[value="${partner.id}"]) button`);
  await shot('partner-switcher');
  process.stdout.write(`screenshots written to ${out}\n`);
} finally {
  await browser.close();
  await server.close();
  receiver.close();
  rmSync(work, { recursive: true, force: true });
}
