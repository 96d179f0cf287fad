import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activatePartner, suspendPartner } from '../../src/core/partners.js';
import { setUserStatus } from '../../src/core/users.js';
import { createHash } from 'node:crypto';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow, sqlRows } from '../helpers/rows.js';
import { Client, PASSWORD, loggedIn } from './helpers.js';

// Sessions and logins over real HTTP: what ends a session, throttling, cookies and headers.

let s: TestServer;
let acme: Awaited<ReturnType<typeof setupPartner>>;

beforeAll(async () => {
  s = await startTestServer();
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '5.00' });
});
afterAll(async () => {
  await s?.stop();
});

const sessionCount = async (email: string) =>
  (
    (await sqlRow(
      s.ctx,
      'SELECT COUNT(*) AS n FROM ui_sessions s JOIN users u ON u.id = s.user_id WHERE u.email = ?',
      email,
    )) as { n: number }
  ).n;

describe('console sessions', () => {
  it('keep only a hash of the session secret; the cookie is HttpOnly and SameSite=Lax', async () => {
    const { client } = await loggedIn(s.ctx, s.url, acme.partnerId);
    const secret = client.cookies.get('msgd_session')!;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const rows = (await sqlRows(s.ctx, 'SELECT * FROM ui_sessions')) as any[];
    expect(JSON.stringify(rows)).not.toContain(secret);
    expect(rows.map((r) => r.hash)).toContain(createHash('sha256').update(secret).digest('hex'));
    const c = new Client(s.url);
    await c.get('/ui/login');
    const r = await c.login('nobody@example.com', 'whatever it is');
    expect(r.status).toBe(401);
  });

  it('end when the user is disabled, the partner suspended, or after the idle limit', async () => {
    const a = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    expect((await a.client.get('/ui/messages')).status).toBe(200);
    await setUserStatus(s.ctx, acme.partnerId, a.email, 'disabled', 'test');
    expect(await sessionCount(a.email)).toBe(0);
    const r = await a.client.get('/ui/messages');
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/ui/login?next=%2Fui%2Fmessages');
    expect((await a.client.login(a.email)).status).toBe(401);

    const b = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    await suspendPartner(s.ctx, acme.partnerId, 'test');
    expect((await b.client.get('/ui/ledger')).status).toBe(303);
    expect((await b.client.login(b.email)).status).toBe(401);
    await activatePartner(s.ctx, acme.partnerId, 'test');
    expect((await b.client.login(b.email)).status).toBe(303);
    expect((await b.client.get('/ui/ledger')).status).toBe(200);
    // Idle for longer than ui.sessionIdleMinutes (30 by default).
    s.clock.advance(31 * 60_000);
    expect((await b.client.get('/ui/ledger')).status).toBe(303);
    expect(await sessionCount(b.email)).toBe(0);
  });

  it('end everywhere on "log out everywhere" and on a password change', async () => {
    const a = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const second = new Client(s.url);
    expect((await second.login(a.email)).status).toBe(303);
    expect(await sessionCount(a.email)).toBe(2);

    await a.client.get('/ui/account');
    const changed = await a.client.post('/ui/account/password', {
      current: PASSWORD,
      password: 'a brand new passphrase',
    });
    expect(changed.status).toBe(303);
    // The browser that changed it stays in, on a fresh session; the other one is out.
    expect((await a.client.get('/ui/account')).status).toBe(200);
    expect((await second.get('/ui/account')).status).toBe(303);
    expect(await sessionCount(a.email)).toBe(1);

    expect((await second.login(a.email, 'a brand new passphrase')).status).toBe(303);
    await a.client.get('/ui/account');
    const out = await a.client.post('/ui/logout-everywhere', {});
    expect(out.headers.get('location')).toBe('/ui/login?done=logout');
    expect(await sessionCount(a.email)).toBe(0);
    expect((await second.get('/ui/overview')).status).toBe(303);
  });

  it('role limits pages: billing sees the ledger, not tokens; developer sees tokens, not the ledger', async () => {
    const billing = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    expect((await billing.client.get('/ui/ledger')).status).toBe(200);
    expect((await billing.client.get('/ui/ledger.csv')).status).toBe(200);
    const denied = await billing.client.get('/ui/tokens');
    expect(denied.status).toBe(403);
    expect(denied.text).toContain('your role (billing) does not include this page');
    const dev = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    expect((await dev.client.get('/ui/tokens')).status).toBe(200);
    expect((await dev.client.get('/ui/ledger')).status).toBe(403);
    expect((await dev.client.get('/ui/users')).status).toBe(403);
  });
});

describe('login throttling', () => {
  it('locks an account after 5 failures with one generic message, and audits every attempt', async () => {
    const { email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const c = new Client(s.url);
    for (let i = 0; i < 5; i++) {
      const r = await c.login(email, `wrong password ${i}`);
      expect(r.status).toBe(401);
      expect(r.text).toContain('The email or password is not right, or the account cannot log in.');
    }
    const locked = await c.login(email, PASSWORD);
    expect(locked.status).toBe(429);
    expect(locked.text).toContain('Too many attempts');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(800);
    const actions = (await sqlRows(
      s.ctx,
      `SELECT action, details FROM audit_log WHERE action LIKE 'ui.login%' AND details LIKE ?`,
      `%${email}%`,
    )) as { action: string; details: string }[];
    expect(actions.map((a) => a.action)).toEqual([...Array(5).fill('ui.login_failed'), 'ui.login_throttled']);
    expect(actions.every((a) => !a.details.includes('wrong password'))).toBe(true);
  });

  it('counts failures per client address too; X-Forwarded-For is ignored without trustProxy', async () => {
    // Rotating the header does not escape the limit: every attempt counts against 127.0.0.1.
    let status = 0;
    for (let i = 0; i < 21 && status !== 429; i++) {
      const c = new Client(s.url);
      await c.get('/ui/login');
      status = (
        await c.post(
          '/ui/login',
          { email: `someone-${i}@example.com`, password: 'not it at all' },
          { 'x-forwarded-for': `198.51.100.${i}` },
        )
      ).status;
    }
    expect(status).toBe(429);
  });

  it('takes the client address from X-Forwarded-For when server.trustProxy is set', async () => {
    const t = await startTestServer({ 'server.trustProxy': true });
    try {
      const attempt = async (ip: string, i: number) => {
        const c = new Client(t.url);
        await c.get('/ui/login');
        return (
          await c.post('/ui/login', { email: `u${i}@example.com`, password: 'wrong one' }, { 'x-forwarded-for': ip })
        ).status;
      };
      for (let i = 0; i < 20; i++) expect(await attempt('203.0.113.9', i)).toBe(401);
      expect(await attempt('203.0.113.9', 99)).toBe(429);
      expect(await attempt('203.0.113.10', 100)).toBe(401);
    } finally {
      await t.stop();
    }
  });
});

describe('behind HTTPS', () => {
  it('uses __Host- cookies with Secure, and sends HSTS, CSP and frame-ancestors', async () => {
    const t = await startTestServer({ 'server.publicUrl': 'https://console.example.com' });
    try {
      const p = await setupPartner(t.ctx, { slug: 'acme' });
      const c = new Client(t.url);
      const page = await c.get('/ui/login');
      expect(page.headers.get('strict-transport-security')).toMatch(/max-age=\d+/);
      const csp = page.headers.get('content-security-policy')!;
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(page.headers.get('referrer-policy')).toBe('same-origin');
      expect(page.headers.getSetCookie()[0]).toMatch(
        /^__Host-msgd_csrf=[\w-]+; Path=\/; HttpOnly; SameSite=Lax; Secure$/,
      );
      const { client } = await loggedIn(t.ctx, t.url, p.partnerId);
      expect([...client.cookies.keys()]).toContain('__Host-msgd_session');
    } finally {
      await t.stop();
    }
  });
});
