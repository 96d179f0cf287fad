import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoginThrottle, PER_ACCOUNT, PER_ADDRESS } from '../../src/core/login-throttle.js';
import { coreCtxOf } from '../../src/cli/context.js';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open-store.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRows } from '../helpers/rows.js';
import { Client, PASSWORD, loggedIn, type Answer } from './helpers.js';

// The login throttle under real concurrency: many parallel HTTP requests with a valid CSRF
// token, against a real msgd. An attempt counts from when it starts, so attempts still being
// hashed count against the limit. Each test comes from its own client address
// (server.trustProxy is on), so the address limit of one test does not leak into the next.

let s: TestServer;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let nextAddress = 1;
const newAddress = () => `198.51.100.${nextAddress++}`;

beforeAll(async () => {
  s = await startTestServer({ 'server.trustProxy': true });
  acme = await setupPartner(s.ctx, { slug: 'acme' });
});
afterAll(async () => {
  await s?.stop();
});

const audited = async (email: string, action: string) =>
  (
    (await sqlRows(
      s.ctx,
      'SELECT details FROM audit_log WHERE action = ? AND details LIKE ?',
      action,
      `%"${email}"%`,
    )) as { details: string }[]
  ).map((r) => JSON.parse(r.details));

/** A client that has read the login page: it holds the anonymous cookie and its CSRF token. */
async function loginClient(address: string) {
  const c = new Client(s.url);
  await c.get('/ui/login', { 'x-forwarded-for': address });
  expect(c.csrf).not.toBe('');
  return c;
}

const statuses = (answers: Answer[]) => answers.map((a) => a.status);
const count = (answers: Answer[], status: number) => answers.filter((a) => a.status === status).length;

describe('login throttle under concurrency', () => {
  it('checks at most 5 of 100 parallel guesses at one account; the rest get 429 with Retry-After', async () => {
    const { email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const address = newAddress();
    const c = await loginClient(address);
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        c.post('/ui/login', { email, password: `wrong guess ${i}` }, { 'x-forwarded-for': address }),
      ),
    );
    expect(count(answers, 401)).toBe(PER_ACCOUNT);
    expect(count(answers, 429)).toBe(100 - PER_ACCOUNT);
    for (const a of answers.filter((x) => x.status === 429)) {
      expect(Number(a.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(a.text).toContain('Too many attempts');
    }
    expect(await audited(email, 'ui.login_failed')).toHaveLength(PER_ACCOUNT);
    expect(await audited(email, 'ui.login_throttled')).toHaveLength(100 - PER_ACCOUNT);

    // The limit is reached: the right password, even from another address, is not checked.
    const other = newAddress();
    const right = await (
      await loginClient(other)
    ).post(
      '/ui/login',
      { email, password: PASSWORD },
      {
        'x-forwarded-for': other,
      },
    );
    expect(right.status).toBe(429);
    expect(right.headers.getSetCookie().some((h) => h.startsWith('msgd_session='))).toBe(false);
  });

  it('refuses the right password sent with 40 wrong ones once the limit is taken, and lets it in later', async () => {
    const { email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    const address = newAddress();
    const c = await loginClient(address);
    const wrong = Array.from({ length: 40 }, (_, i) =>
      c.post('/ui/login', { email, password: `wrong guess ${i}` }, { 'x-forwarded-for': address }),
    );
    // The right one goes out as soon as one wrong guess has been refused: the five admitted
    // ones are still being hashed or just done, and they hold every place.
    const firstRefusal = Promise.race(wrong.map((p) => p.then((a) => (a.status === 429 ? a : new Promise(() => {})))));
    await firstRefusal;
    const right = await c.post('/ui/login', { email, password: PASSWORD }, { 'x-forwarded-for': address });
    const answers = await Promise.all(wrong);
    expect(statuses(answers).filter((x) => x !== 401 && x !== 429)).toEqual([]);
    expect(count(answers, 401)).toBe(PER_ACCOUNT);
    expect(right.status).toBe(429);
    expect(c.cookies.has('msgd_session')).toBe(false);
    expect((await c.get('/ui/overview')).status).toBe(303);

    // 15 minutes after the oldest counted attempt, the account may be tried again.
    s.clock.advance(Number(right.headers.get('retry-after')) * 1000);
    const later = await c.post('/ui/login', { email, password: PASSWORD }, { 'x-forwarded-for': address });
    expect(later.status).toBe(303);
    expect((await c.get('/ui/overview')).status).toBe(200);
  });

  it('checks at most 20 of 100 parallel guesses from one address, across accounts', async () => {
    const address = newAddress();
    const c = await loginClient(address);
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        c.post(
          '/ui/login',
          { email: `spray-${i}@example.com`, password: 'summer2026 summer' },
          { 'x-forwarded-for': address },
        ),
      ),
    );
    expect(count(answers, 401)).toBe(PER_ADDRESS);
    expect(count(answers, 429)).toBe(100 - PER_ADDRESS);
  });

  it('a successful login clears the account count; only failures use up the address', async () => {
    const { email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const address = newAddress();
    const attempt = async (who: string, password: string) => {
      const c = await loginClient(address);
      return (await c.post('/ui/login', { email: who, password }, { 'x-forwarded-for': address })).status;
    };
    // Twice 4 failures then a login: the login clears the account's count each time.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < PER_ACCOUNT - 1; i++) expect(await attempt(email, 'not the one at all')).toBe(401);
      expect(await attempt(email, PASSWORD)).toBe(303);
    }
    // 8 failures from the address so far; the two logins do not count: 12 more may be checked.
    for (let i = 0; i < PER_ADDRESS - 8; i++) expect(await attempt(`other-${i}@example.com`, 'not it')).toBe(401);
    expect(await attempt('one-more@example.com', 'not it')).toBe(429);
  });

  it('is shared through the database: another connection (another msgd) sees the same count', async () => {
    const { email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const address = newAddress();
    const c = await loginClient(address);
    for (let i = 0; i < PER_ACCOUNT - 1; i++)
      await c.post('/ui/login', { email, password: 'wrong guess' }, { 'x-forwarded-for': address });
    // msgd's store opened again, as another msgd on it would (its data directory or database).
    const config = loadConfig({ env: s.storeEnv, dataDir: s.dataDir });
    const opened = await openStore(config, { env: s.storeEnv, create: false, migrate: false, poolSize: 2 });
    try {
      const other = new LoginThrottle({ ...coreCtxOf(opened, config), now: s.clock.now });
      expect(await other.begin(email, '203.0.113.50')).toMatchObject({ ok: true });
      expect(await other.begin(email, '203.0.113.51')).toMatchObject({ ok: false });
    } finally {
      await opened.close();
    }
    const refused = await c.post('/ui/login', { email, password: PASSWORD }, { 'x-forwarded-for': address });
    expect(refused.status).toBe(429);
  });
});

describe('"Your account": the current password', () => {
  it('is throttled and audited like a login, in parallel too', async () => {
    const { client, email } = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await client.get('/ui/account');
    const answers = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        client.post('/ui/account/password', { current: `guess number ${i}`, password: 'a brand new passphrase' }),
      ),
    );
    expect(count(answers, 400)).toBe(PER_ACCOUNT);
    expect(count(answers, 429)).toBe(25 - PER_ACCOUNT);
    const refused = answers.find((a) => a.status === 429)!;
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.text).toContain('Too many attempts');
    const failed = await audited(email, 'ui.login_failed');
    expect(failed).toHaveLength(PER_ACCOUNT);
    expect(failed.every((d) => d.step === 'account_password')).toBe(true);
    expect(JSON.stringify(failed)).not.toContain('guess number');
    expect(await audited(email, 'ui.login_throttled')).toHaveLength(25 - PER_ACCOUNT);
    // Locked: the right current password is not checked either, and the password is unchanged.
    const right = await client.post('/ui/account/password', { current: PASSWORD, password: 'a brand new passphrase' });
    expect(right.status).toBe(429);
    expect((await new Client(s.url).login(email, 'a brand new passphrase')).status).not.toBe(303);
  });
});
