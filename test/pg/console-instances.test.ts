import { randomBytes } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testClock } from '../helpers/clock.js';
import { type PartnerSetup, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { Client, loggedIn, PASSWORD } from '../ui/helpers.js';
import { migratedDatabase } from './helpers.js';

// The partner console behind a load balancer: two msgd on one PostgreSQL, and one browser
// whose consecutive requests land on either. Whatever one instance began (a login form's CSRF
// token, a session, the note a POST leaves for the page it redirects to) the other finishes.

const db = migratedDatabase();
let a: TestServer;
let b: TestServer;
let acme: PartnerSetup;

beforeAll(async () => {
  // What every instance shares: the database and the master key (and here one clock).
  const env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex') };
  const clock = testClock();
  a = await startTestServer({}, { env, clock });
  b = await startTestServer({}, { env, clock });
  acme = await setupPartner(a.ctx, { slug: 'acme' });
}, 60_000);

afterAll(async () => {
  await a?.stop();
  await b?.stop();
});

/** The same browser (one cookie jar, one CSRF token) talking to the other instance. */
function sameBrowser(c: Client, base: string): Client {
  const other = new Client(base);
  other.cookies = c.cookies;
  Object.defineProperty(other, 'csrf', { get: () => c.csrf, set: (v: string) => (c.csrf = v) });
  return other;
}

describe('a browser whose requests alternate between two instances', () => {
  it("shows the token's secret once on the page the other instance answers", async () => {
    const { client: onA } = await loggedIn(a.ctx, a.url, acme.partnerId, 'developer');
    const onB = sameBrowser(onA, b.url);
    await onA.get('/ui/tokens');
    const posted = await onA.post('/ui/tokens', { name: 'balanced', scopes: 'messages:read' });
    expect(posted.status).toBe(303);
    const location = posted.headers.get('location')!;
    expect(location).toMatch(/^\/ui\/tokens\?flash=[\w-]+$/);

    const shown = await onB.get(location);
    expect(shown.status).toBe(200);
    const secret = /id="new-secret">(msgd_live_[^<]+)</.exec(shown.text)?.[1];
    expect(secret).toBeDefined();
    // A reload, on either instance, shows it no more.
    expect((await onA.get(location)).text).not.toContain(secret!);
    expect((await onB.get(location)).text).not.toContain('id="new-secret"');
  });

  it("shows a note on the other instance, and never to another person's session", async () => {
    const { client: onA } = await loggedIn(a.ctx, a.url, acme.partnerId, 'admin');
    const onB = sameBrowser(onA, b.url);
    await onA.get('/ui/suppressions');
    const posted = await onA.post('/ui/suppressions', { channel: 'sms', address: '+15557654321' });
    expect(posted.status).toBe(303);
    const location = posted.headers.get('location')!;

    // Someone else given the link and the note's cookie (but their own session) sees nothing.
    const { client: other } = await loggedIn(b.ctx, b.url, acme.partnerId, 'admin');
    for (const [name, value] of onA.cookies) if (name.startsWith('msgd_flash_')) other.cookies.set(name, value);
    const note = '+15557654321 is suppressed on sms: sends to it are refused from now on.';
    const seen = await other.get(location);
    expect(seen.status).toBe(200);
    expect(seen.text).not.toContain(note);

    expect((await onB.get(location)).text).toContain(note);
    expect((await onA.get(location)).text).not.toContain(note);
  });

  it('logs in with the form of one instance through the other, and the session holds on both', async () => {
    const { email } = await loggedIn(a.ctx, a.url, acme.partnerId, 'developer');
    const onA = new Client(a.url);
    const onB = sameBrowser(onA, b.url);
    // The login form (and its CSRF token) from one, the password to the other.
    await onA.get('/ui/login');
    const r = await onB.post('/ui/login', { email, password: PASSWORD });
    expect(r.status).toBe(303);
    expect((await onA.get('/ui/tokens')).status).toBe(200);
    expect((await onB.get('/ui/tokens')).status).toBe(200);
    // Logging out on one instance ends the session on the other.
    expect((await onA.post('/ui/logout', {})).status).toBe(303);
    expect((await onB.get('/ui/tokens')).status).toBe(303);
  });

  it('sets up two-factor on one and confirms on the other; the code step finishes where the password was not', async () => {
    const code = (secret: string) =>
      new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({
        timestamp: a.clock.now(),
      });
    const { client: onA, email } = await loggedIn(a.ctx, a.url, acme.partnerId, 'developer');
    const onB = sameBrowser(onA, b.url);
    await onA.get('/ui/account/2fa');
    const setup = await onA.post('/ui/account/2fa/setup', {});
    expect(setup.status).toBe(200);
    const secret = /id="totp-secret">([A-Z2-7 ]+)</.exec(setup.text)![1].replace(/ /g, '');
    const confirmed = await onB.post('/ui/account/2fa/confirm', { code: code(secret) });
    expect(confirmed.status).toBe(200);
    expect(confirmed.text).toContain('id="recovery-codes"');

    // A new login: the password to one instance, the code to the other.
    a.clock.advance(30_000);
    const loginA = new Client(a.url);
    const loginB = sameBrowser(loginA, b.url);
    await loginA.get('/ui/login');
    const password = await loginA.post('/ui/login', { email, password: PASSWORD });
    expect([password.status, password.headers.get('location')]).toEqual([303, '/ui/login/code']);
    await loginA.get('/ui/login/code');
    const done = await loginB.post('/ui/login/code', { code: code(secret) });
    expect(done.status).toBe(303);
    expect((await loginA.get('/ui/tokens')).status).toBe(200);
  });
});
