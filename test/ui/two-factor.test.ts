import { Secret, TOTP } from 'otpauth';
import type { Page } from 'puppeteer-core';
import { renderSVG } from 'uqr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PER_ACCOUNT } from '../../src/core/login-throttle.js';
import { PENDING_LOGIN_MS } from '../../src/core/pending-logins.js';
import { setTwoFactorRequired } from '../../src/core/two-factor.js';
import { acceptJoinLink, acceptLink, inviteUser, setUserStatus } from '../../src/core/users.js';
import { runCli } from '../helpers/cli.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow, sqlRows } from '../helpers/rows.js';
import {
  Client,
  PASSWORD,
  axeViolations,
  freshPage,
  launchBrowser,
  loggedIn,
  login,
  mainText,
  userSession,
  type Answer,
  type TestBrowser,
} from './helpers.js';

// Two-factor authentication as its users meet it: enrolment and login in a real Chromium, with
// codes computed here from the secret read off the enrolment page, as an authenticator app
// would; throttling, replays and the partner's requirement over real HTTP.

let s: TestServer;
let b: TestBrowser;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let nextAddress = 1;
const newAddress = () => `192.0.2.${nextAddress++}`;

beforeAll(async () => {
  s = await startTestServer({ 'server.trustProxy': true });
  acme = await setupPartner(s.ctx, { slug: 'acme' });
  b = await launchBrowser();
});
afterAll(async () => {
  await b?.close();
  await s?.stop();
});

/** The code an authenticator app shows for this secret at msgd's clock, `steps` periods from now. */
const codeFor = (secret: string, steps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({
    timestamp: s.clock.now() + steps * 30_000,
  });
/** A 6-digit code that is not valid now (nor a step either side). */
const wrongCode = (secret: string, n = 0) => {
  const valid = new Set([-1, 0, 1].map((d) => codeFor(secret, d)));
  for (let i = n; ; i++) {
    const c = String((i * 7919 + 123456) % 1_000_000).padStart(6, '0');
    if (!valid.has(c)) return c;
  }
};

const audited = async (email: string, action: string) =>
  (
    (await sqlRows(
      s.ctx,
      'SELECT details FROM audit_log WHERE action = ? AND details LIKE ?',
      action,
      `%"${email}"%`,
    )) as { details: string }[]
  ).map((r) => JSON.parse(r.details));

const submit = (page: Page, selector = 'main button[type=submit]') =>
  Promise.all([page.waitForNavigation(), page.click(selector)]);

/** Set up two-factor authentication from Your account over HTTP, reading the key off the page. */
async function enrol(c: Client): Promise<{ secret: string; codes: string[] }> {
  await c.get('/ui/account/2fa');
  const setup = await c.post('/ui/account/2fa/setup', {});
  expect(setup.status).toBe(200);
  const secret = /id="totp-secret">([A-Z2-7 ]+)</.exec(setup.text)![1].replace(/ /g, '');
  const done = await c.post('/ui/account/2fa/confirm', { code: codeFor(secret) });
  expect(done.status).toBe(200);
  const codes = /id="recovery-codes">([^<]+)</.exec(done.text)![1].split('\n');
  return { secret, codes };
}

/** Log in with the password; the answer sends the browser to the code step. */
async function passwordStep(email: string, address = newAddress()) {
  const c = new Client(s.url);
  await c.get('/ui/login', { 'x-forwarded-for': address });
  const r = await c.post('/ui/login', { email, password: PASSWORD }, { 'x-forwarded-for': address });
  expect([r.status, r.headers.get('location')]).toEqual([303, '/ui/login/code']);
  await c.get('/ui/login/code', { 'x-forwarded-for': address });
  return { c, address };
}

describe('two-factor authentication in a browser', () => {
  it('is set up from Your account, then asked for at login; codes are not replayed, recovery codes work once', async () => {
    const page = await freshPage(b);
    const email = await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/account`);
    expect(await mainText(page)).toContain('Off: logging in takes only your password.');
    await submit(page, 'a[href="/ui/account/2fa"]');
    await submit(page, 'main form[action="/ui/account/2fa/setup"] button');
    const secret = (await page.$eval('#totp-secret', (e) => e.textContent!)).replace(/\s/g, '');
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(await axeViolations(page)).toEqual([]);
    const uri = await page.$eval('#totp-uri', (e) => e.textContent!);
    expect(uri).toMatch(/^otpauth:\/\/totp\/msgd:developer-\w+%40example\.com\?/);
    expect(new URL(uri).searchParams.get('secret')).toBe(secret);
    // The QR code is an SVG drawn by msgd, and the page's CSP lets the browser show it.
    const qr = await page.$eval('#totp-qr', (e) => ({
      src: (e as HTMLImageElement).src,
      shown: (e as HTMLImageElement).complete && (e as HTMLImageElement).naturalWidth > 0,
    }));
    expect(qr.shown).toBe(true);
    expect(Buffer.from(qr.src.replace('data:image/svg+xml;base64,', ''), 'base64').toString()).toBe(renderSVG(uri));
    // Stored sealed, and not on until a first code confirms it.
    const row = (await sqlRow(s.ctx, 'SELECT totp_secret, totp_enabled_at FROM users WHERE email = ?', email)) as {
      totp_secret: string;
      totp_enabled_at: number | null;
    };
    expect(row.totp_secret).toMatch(/^v1:/);
    expect(row.totp_secret).not.toContain(secret);
    expect(row.totp_enabled_at).toBeNull();

    await page.type('#code', wrongCode(secret));
    await submit(page);
    expect(await mainText(page)).toContain('that code is not right');
    const firstCode = codeFor(secret);
    await page.type('#code', firstCode);
    await submit(page);
    const codes = (await page.$eval('#recovery-codes', (e) => e.textContent!)).split('\n');
    expect(codes).toHaveLength(10);
    expect(codes.every((c) => /^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/.test(c))).toBe(true);
    expect(new Set(codes).size).toBe(10);
    // As the user sees them: one code a line, not run together into a paragraph.
    expect(await page.$eval('#recovery-codes', (e) => (e as HTMLElement).innerText)).toBe(codes.join('\n'));
    // Shown once: the page afterwards has neither the key nor the codes.
    await page.goto(`${s.url}/ui/account/2fa`);
    const after = await page.content();
    expect(after).not.toContain(secret);
    expect(after).not.toContain(codes[0]);
    expect(await mainText(page)).toContain('Recovery codes left: 10 of 10');

    // Log out; the password alone now leads to the code step.
    await submit(page, 'form[action="/ui/logout"] button');
    await login(page, s.url, email);
    expect(new URL(page.url()).pathname).toBe('/ui/login/code');
    expect(await axeViolations(page)).toEqual([]);
    // The code that confirmed enrolment is still within its window, but used: not again.
    await page.type('#code', firstCode);
    await submit(page);
    expect(await mainText(page)).toContain('That code was already used');
    s.clock.advance(30_000);
    await page.type('#code', codeFor(secret));
    await submit(page);
    expect(new URL(page.url()).pathname).toBe('/ui/overview');

    // A recovery code logs in once.
    await submit(page, 'form[action="/ui/logout"] button');
    await login(page, s.url, email);
    await page.type('#code', codes[3].toUpperCase());
    await submit(page);
    expect(new URL(page.url()).pathname).toBe('/ui/overview');
    await submit(page, 'form[action="/ui/logout"] button');
    await login(page, s.url, email);
    await page.type('#code', codes[3]);
    await submit(page);
    expect(await mainText(page)).toContain('That code is not right');
    await page.type('#code', codes[4]);
    await submit(page);
    expect(new URL(page.url()).pathname).toBe('/ui/overview');
    await page.goto(`${s.url}/ui/account/2fa`);
    expect(await mainText(page)).toContain('Recovery codes left: 8 of 10');

    // Neither the key nor a recovery code reaches the log or the audit log.
    const audit = JSON.stringify(await sqlRows(s.ctx, 'SELECT * FROM audit_log'));
    for (const text of [s.logs.join(''), audit]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(codes[0]);
    }
    await page.browserContext().close();
  });
});

describe('the code step over HTTP', () => {
  it('is throttled with the password: of 100 parallel guesses at most the limit are checked', async () => {
    const { client, email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const { secret } = await enrol(client);
    s.clock.advance(30_000);
    const { c, address } = await passwordStep(email);
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        c.post('/ui/login/code', { code: wrongCode(secret, i) }, { 'x-forwarded-for': address }),
      ),
    );
    const count = (status: number) => answers.filter((a: Answer) => a.status === status).length;
    // The password was one attempt of the account's five.
    expect(count(401)).toBe(PER_ACCOUNT - 1);
    expect(count(429)).toBe(100 - (PER_ACCOUNT - 1));
    for (const a of answers.filter((x) => x.status === 429))
      expect(Number(a.headers.get('retry-after'))).toBeGreaterThan(0);
    const failed = (await audited(email, 'ui.login_failed')).filter((d) => d.step === 'code');
    expect(failed).toHaveLength(PER_ACCOUNT - 1);
    // The limit is reached: the right code is not checked.
    const right = await c.post('/ui/login/code', { code: codeFor(secret) }, { 'x-forwarded-for': address });
    expect(right.status).toBe(429);
    expect(c.cookies.has('msgd_session')).toBe(false);
  });

  it('is bound to one pending login: single use, and short-lived', async () => {
    const { client, email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    const { secret } = await enrol(client);
    s.clock.advance(30_000);
    const { c, address } = await passwordStep(email);
    const pending = c.cookies.get('msgd_login')!;
    expect(pending).toMatch(/^[\w-]{43}$/);
    // Two requests racing with one pending login and the right code: one login comes of it.
    const both = await Promise.all(
      [0, 1].map(() => c.post('/ui/login/code', { code: codeFor(secret) }, { 'x-forwarded-for': address })),
    );
    const inside = both.filter((r) => r.status === 303 && r.headers.get('location') === '/ui/overview');
    expect(inside).toHaveLength(1);
    // Used: presenting it again, even with a fresh code, leads back to the login page.
    const replayer = new Client(s.url);
    await replayer.get('/ui/login');
    replayer.cookies.set('msgd_login', pending);
    s.clock.advance(30_000);
    const again = await replayer.post('/ui/login/code', { code: codeFor(secret) });
    expect([again.status, again.headers.get('location')]).toEqual([303, '/ui/login?done=expired']);

    // A pending login older than its few minutes is gone too.
    const late = await passwordStep(email);
    s.clock.advance(PENDING_LOGIN_MS);
    const r = await late.c.post('/ui/login/code', { code: codeFor(secret) }, { 'x-forwarded-for': late.address });
    expect([r.status, r.headers.get('location')]).toEqual([303, '/ui/login?done=expired']);
    // Nor one whose user was disabled after the password step.
    const disabled = await passwordStep(email);
    await setUserStatus(s.ctx, acme.partnerId, email, 'disabled', 'test');
    s.clock.advance(30_000);
    const d = await disabled.c.post(
      '/ui/login/code',
      { code: codeFor(secret) },
      { 'x-forwarded-for': disabled.address },
    );
    expect([d.status, d.headers.get('location')]).toEqual([303, '/ui/login?done=expired']);
    await setUserStatus(s.ctx, acme.partnerId, email, 'active', 'test');
    // Without a pending login the code step is not a way in.
    const none = new Client(s.url);
    await none.get('/ui/login');
    expect((await none.post('/ui/login/code', { code: codeFor(secret) })).headers.get('location')).toBe(
      '/ui/login?done=expired',
    );
  });

  it('is turned off with the password and a code, both throttled and audited', async () => {
    const { client, email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const { secret } = await enrol(client);
    await client.get('/ui/account/2fa');
    const wrong = await client.post('/ui/account/2fa/disable', { current: 'not my password', code: codeFor(secret) });
    expect(wrong.status).toBe(400);
    expect(wrong.text).toContain('The current password is not right.');
    s.clock.advance(30_000);
    const wrongCodeAnswer = await client.post('/ui/account/2fa/disable', {
      current: PASSWORD,
      code: wrongCode(secret),
    });
    expect(wrongCodeAnswer.text).toContain('That code is not right.');
    expect((await audited(email, 'ui.login_failed')).map((d) => d.step)).toEqual(['account_2fa', 'account_2fa']);
    const off = await client.post('/ui/account/2fa/disable', { current: PASSWORD, code: codeFor(secret) });
    expect([off.status, off.headers.get('location')]).toEqual([303, '/ui/account?done=2fa-off']);
    expect((await client.get('/ui/account?done=2fa-off')).text).toContain('Two-factor authentication is off.');
    // The password alone logs in again.
    expect((await new Client(s.url).login(email)).headers.get('location')).toBe('/ui/overview');
  });
});

describe("a partner's requirement and the operator's reset", () => {
  it('sends users without two-factor authentication to set it up, and lets them do nothing else', async () => {
    const globex = await setupPartner(s.ctx, { slug: 'globex' });
    const admin = await loggedIn(s.ctx, s.url, globex.partnerId, 'admin');
    const adminKey = await enrol(admin.client);
    const dev = await loggedIn(s.ctx, s.url, globex.partnerId, 'developer');
    await admin.client.get('/ui/users');
    const on = await admin.client.post('/ui/users/2fa-requirement', { required: 'yes' });
    expect(on.text).toContain('Two-factor authentication is required');
    expect(
      await sqlRow(
        s.ctx,
        `SELECT COUNT(*) AS n FROM audit_log WHERE action = 'partner.require_2fa' AND target_id = ?`,
        globex.partnerId,
      ),
    ).toEqual({ n: 1 });

    // The developer's next click, and a fresh login, land on the set-up page.
    const blocked = await dev.client.get('/ui/messages');
    expect([blocked.status, blocked.headers.get('location')]).toEqual([303, '/ui/account/2fa']);
    const fresh = await new Client(s.url).login(dev.email);
    expect(fresh.headers.get('location')).toBe('/ui/account/2fa');
    // A form post elsewhere changes nothing.
    const tokensBefore = await sqlRow(s.ctx, 'SELECT COUNT(*) AS n FROM tokens');
    const post = await dev.client.post('/ui/tokens', { name: 'sneaky', scopes: 'messages:send', expires: 'never' });
    expect([post.status, post.headers.get('location')]).toEqual([303, '/ui/account/2fa']);
    expect(await sqlRow(s.ctx, 'SELECT COUNT(*) AS n FROM tokens')).toEqual(tokensBefore);
    const page = await dev.client.get('/ui/account/2fa');
    expect(page.status).toBe(200);
    expect(page.text).toContain('globex requires two-factor authentication');
    // The admin, who has it, works on.
    expect((await admin.client.get('/ui/messages')).status).toBe(200);

    const devKey = await enrol(dev.client);
    expect((await dev.client.get('/ui/messages')).status).toBe(200);

    const listed = await runCli(['--json', 'user', 'list', 'globex'], { dataDir: s.dataDir, env: s.storeEnv });
    expect(JSON.parse(listed.stdout).data.find((u: any) => u.email === dev.email).two_factor).toBe(true);
    // The operator resets the developer's: it asks at a terminal, a script must say --yes.
    const noYes = await runCli(['user', 'reset-2fa', 'globex', dev.email], { dataDir: s.dataDir, env: s.storeEnv });
    expect(noYes.code).toBe(2);
    expect(noYes.stderr).toContain('add --yes');
    expect((await dev.client.get('/ui/messages')).status).toBe(200);
    const reset = await runCli(['user', 'reset-2fa', 'globex', dev.email, '--yes'], {
      dataDir: s.dataDir,
      env: s.storeEnv,
    });
    expect([reset.code, reset.stderr]).toEqual([0, '']);
    expect(reset.stdout).toContain(`Reset two-factor authentication of ${dev.email}`);
    expect(reset.stdout + reset.stderr).not.toContain(devKey.secret);
    // Their sessions ended; the password alone logs in, straight to set it up again.
    expect((await dev.client.get('/ui/messages')).status).toBe(303);
    expect((await new Client(s.url).login(dev.email)).headers.get('location')).toBe('/ui/account/2fa');
    const row = (await sqlRow(
      s.ctx,
      `SELECT actor, details FROM audit_log WHERE action = 'user.reset_2fa' ORDER BY id DESC LIMIT 1`,
    )) as { actor: string; details: string };
    expect(JSON.parse(row.details)).toEqual({ email: dev.email, partner: globex.partnerId });

    const noneLeft = await runCli(['user', 'reset-2fa', 'globex', dev.email, '--yes'], {
      dataDir: s.dataDir,
      env: s.storeEnv,
    });
    expect([noneLeft.code, noneLeft.stderr]).toEqual([1, expect.stringContaining('has no two-factor authentication')]);
    const otherPartner = await runCli(['user', 'reset-2fa', 'acme', admin.email, '--yes'], {
      dataDir: s.dataDir,
      env: s.storeEnv,
    });
    expect(otherPartner.code).toBe(1);
    expect(otherPartner.stderr).toContain('not found');
    expect(adminKey.codes).toHaveLength(10);
  });

  it('binds the requirement to the partner picked for the session; the partner switcher stays open', async () => {
    const initech = await setupPartner(s.ctx, { slug: 'initech' });
    const email = `agency-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const { secret } = await inviteUser(s.ctx, { partner: acme.partnerId, email, role: 'developer' }, 'test');
    const person = await acceptLink(s.ctx, secret, PASSWORD);
    const join = await inviteUser(s.ctx, { partner: initech.partnerId, email, role: 'developer' }, 'test');
    await acceptJoinLink(s.ctx, join.secret, person.id);
    await setTwoFactorRequired(s.ctx, initech.partnerId, true, 'test');

    // Two partners, none picked yet: the login goes to the partner picker, which is not held back.
    const c = new Client(s.url);
    expect((await c.login(email)).headers.get('location')).toBe('/ui/partners');
    expect((await c.get('/ui/partners')).status).toBe(200);
    await c.post('/ui/partners', { partner: initech.partnerId });
    const held = await c.get('/ui/overview');
    expect([held.status, held.headers.get('location')]).toEqual([303, '/ui/account/2fa']);
    // Switching to the partner that does not require it is still possible, and works there.
    expect((await c.get('/ui/partners')).status).toBe(200);
    await c.post('/ui/partners', { partner: acme.partnerId });
    expect((await c.get('/ui/overview')).status).toBe(200);
  });
});
