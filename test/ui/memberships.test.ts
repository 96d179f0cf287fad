import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptLink, inviteUser, resetUser } from '../../src/core/users.js';
import { runCli } from '../helpers/cli.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { Client, PASSWORD, loggedIn } from './helpers.js';

// Console users as persons with memberships, over real HTTP: what one partner's admin can learn
// and do about other partners' people, the own-account guard, resets, links that end, and the
// passwords refused.

let s: TestServer;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let globex: Awaited<ReturnType<typeof setupPartner>>;

beforeAll(async () => {
  s = await startTestServer();
  acme = await setupPartner(s.ctx, { slug: 'acme' });
  globex = await setupPartner(s.ctx, { slug: 'globex' });
});
afterAll(async () => {
  await s?.stop();
});

let n = 0;
const fresh = (tag: string) => `${tag}-${++n}-${Math.random().toString(36).slice(2, 6)}@example.com`;

/** A person with PASSWORD who accepted an invitation of `partnerId`. */
async function person(partnerId: string, role = 'developer', email = fresh(role)) {
  const { secret } = await inviteUser(s.ctx, { partner: partnerId, email, role }, 'test');
  const user = await acceptLink(s.ctx, secret, PASSWORD);
  return { email, userId: user.id };
}

/** The page's main text, without the parts that differ on every answer (the link's secret, its expiry). */
const answerShape = (html: string, email: string) =>
  html
    .replace(/<input type="hidden" name="_csrf" value="[^"]*"\/>/g, '')
    .replace(/\/ui\/invite\/[\w-]{43}/g, '/ui/invite/SECRET')
    .replace(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/g, 'TIME')
    .replace(/dateTime="[^"]*"/g, 'dateTime="TIME"')
    .replaceAll(email, 'EMAIL')
    .replace(/<tbody>.*<\/tbody>/s, '');

const linkIn = (html: string) => /\/ui\/invite\/([\w-]{43})/.exec(html)![1];

describe('inviting from the console', () => {
  it('answers the same whether the address is new, known in another partner, or invited there', async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const elsewhere = await person(globex.partnerId, 'admin');
    expect((await new Client(s.url).login(elsewhere.email)).status).toBe(303);
    const pendingElsewhere = fresh('pending');
    await inviteUser(s.ctx, { partner: globex.partnerId, email: pendingElsewhere, role: 'billing' }, 'test');

    const shapes: string[] = [];
    const rows: string[] = [];
    for (const email of [fresh('new'), elsewhere.email, pendingElsewhere]) {
      await admin.client.get('/ui/users');
      const t0 = performance.now();
      const r = await admin.client.post('/ui/users', { email: email.toUpperCase(), role: 'developer' });
      const ms = performance.now() - t0;
      expect(r.status).toBe(201);
      expect(r.text).toContain('Send this link to');
      expect(r.text).not.toContain('already');
      // No password hashing or other slow path on either side: the same timing class.
      expect(ms).toBeLessThan(500);
      shapes.push(answerShape(r.text, email));
      // The new row in the list says no more: an invited address, nothing of its other logins.
      const row = new RegExp(`<tr><td>${email.replace(/[.+]/g, '\\$&')}</td>.*?</tr>`).exec(r.text)![0];
      rows.push(row.replaceAll(email, 'EMAIL').replace(/usr_[0-9a-z]+/g, 'ID'));
    }
    expect(shapes[1]).toBe(shapes[0]);
    expect(shapes[2]).toBe(shapes[0]);
    expect(rows[0]).toContain('invited');
    expect(rows[1]).toBe(rows[0]);
    expect(rows[2]).toBe(rows[0]);

    // The globex people are untouched: the admin still logs in to globex, and globex can still
    // invite its pending address (a fresh link), which acme's invitation did not claim.
    const c = new Client(s.url);
    expect((await c.login(elsewhere.email)).headers.get('location')).toBe('/ui/overview');
    expect((await c.get('/ui/overview')).text).toContain('(admin, globex)');
    const again = await runCli(['--json', 'user', 'invite', 'globex', pendingElsewhere, '--role', 'billing'], {
      dataDir: s.dataDir,
      env: s.storeEnv,
    });
    expect(again.code).toBe(0);
  });

  it('a member of this partner already gets a clear 409; a pending invitation gets a fresh link', async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const dev = await person(acme.partnerId, 'developer');
    await admin.client.get('/ui/users');
    const dup = await admin.client.post('/ui/users', { email: dev.email, role: 'billing' });
    expect(dup.status).toBe(409);
    expect(dup.text).toContain(`${dev.email} is already a user of acme`);

    const email = fresh('twice');
    const first = linkIn((await admin.client.post('/ui/users', { email, role: 'developer' })).text);
    const second = await admin.client.post('/ui/users', { email, role: 'billing' });
    expect(second.status).toBe(201);
    expect(linkIn(second.text)).not.toBe(first);
    expect((await new Client(s.url).get(`/ui/invite/${first}`)).status).toBe(410);
    expect((await new Client(s.url).get(`/ui/invite/${linkIn(second.text)}`)).text).toContain('as billing');
  });

  it("a link for a person known elsewhere sets no password; accepting another partner's invitation needs its own link", async () => {
    // P is new: acme's link sets the password. Globex invites P before P used it.
    const email = fresh('p');
    const acmeLink = await inviteUser(s.ctx, { partner: acme.partnerId, email, role: 'admin' }, 'test');
    const globexLink = await inviteUser(s.ctx, { partner: globex.partnerId, email, role: 'admin' }, 'test');
    expect([acmeLink.kind, globexLink.kind]).toEqual(['invite', 'join']);
    const c = new Client(s.url);
    const join = await c.get(`/ui/invite/${globexLink.secret}`);
    expect(join.status).toBe(200);
    expect(join.text).toContain('Log in with');
    expect(join.text).not.toContain('type="password"');
    await c.get('/ui/login');
    expect((await c.post(`/ui/invite/${globexLink.secret}`, { password: PASSWORD, confirm: PASSWORD })).status).toBe(
      410,
    );

    // Whoever holds acme's link sets the password and logs in: globex's invitation shows, but
    // only its own link accepts it.
    await c.get(`/ui/invite/${acmeLink.secret}`);
    expect((await c.post(`/ui/invite/${acmeLink.secret}`, { password: PASSWORD, confirm: PASSWORD })).status).toBe(303);
    expect((await c.login(email)).headers.get('location')).toBe('/ui/overview');
    const picker = await c.get('/ui/partners');
    expect(picker.text).toContain('Accept it through the link it came with');
    const refused = await c.post(`/ui/invitations/${globex.partnerId}/accept`, {});
    expect(refused.status).toBe(403);
    expect((await c.get('/ui/overview')).text).toContain('(admin, acme)');

    await c.get(`/ui/invite/${globexLink.secret}`);
    const ok = await c.post(`/ui/invite/${globexLink.secret}/accept`, {});
    expect(ok.headers.get('location')).toBe('/ui/overview');
    expect((await c.get('/ui/overview')).text).toContain('(admin, globex)');
  });
});

describe('the own-account guard', () => {
  it('holds with the own email in the URL, in any case; another user by email works', async () => {
    const email = `Admin2-${Math.random().toString(36).slice(2, 6)}@acme.example`.toLowerCase();
    const { secret } = await inviteUser(s.ctx, { partner: acme.partnerId, email, role: 'admin' }, 'test');
    await acceptLink(s.ctx, secret, PASSWORD);
    const c = new Client(s.url);
    expect((await c.login(email)).status).toBe(303);
    for (const action of ['disable', 'reset', 'remove']) {
      await c.get('/ui/users');
      const r = await c.post(`/ui/users/${encodeURIComponent(email.toUpperCase())}/${action}`, {});
      expect(r.status).toBe(409);
      expect(r.text).toContain('You cannot change your own account here.');
    }
    expect((await c.get('/ui/users')).status).toBe(200);

    const dev = await person(acme.partnerId, 'developer');
    const off = await c.post(`/ui/users/${encodeURIComponent(dev.email.toUpperCase())}/disable`, {});
    expect(off.status).toBe(200);
    expect(off.text).toContain(`${dev.email} is disabled`);
  });
});

describe('memberships', () => {
  it('a person of two partners picks one, switches, and loses one partner at once when disabled there', async () => {
    const p = await person(acme.partnerId, 'developer');
    const { secret } = await inviteUser(s.ctx, { partner: globex.partnerId, email: p.email, role: 'billing' }, 'test');
    const c = new Client(s.url);
    await c.login(p.email);
    await c.get(`/ui/invite/${secret}`);
    expect((await c.post(`/ui/invite/${secret}/accept`, {})).status).toBe(303);
    await c.post('/ui/logout', {});

    const login = await c.login(p.email);
    expect(login.headers.get('location')).toBe('/ui/partners');
    expect((await c.get('/ui/overview')).headers.get('location')).toBe('/ui/partners?next=%2Fui%2Foverview');
    await c.get('/ui/partners');
    await c.post('/ui/partners', { partner: globex.partnerId });
    const billing = await c.get('/ui/ledger');
    expect(billing.status).toBe(200);
    expect(billing.text).toContain('(billing, globex)');
    expect((await c.get('/ui/tokens')).status).toBe(403);
    // A partner the person is not in cannot be picked.
    const other = await setupPartner(s.ctx, { slug: 'initech' });
    expect((await c.post('/ui/partners', { partner: other.partnerId })).status).toBe(404);

    await c.post('/ui/partners', { partner: acme.partnerId });
    expect((await c.get('/ui/tokens')).text).toContain('(developer, acme)');
    const second = new Client(s.url);
    await second.login(p.email);
    await second.get('/ui/partners');
    await second.post('/ui/partners', { partner: globex.partnerId });

    // Disabled in acme: the acme session ends on its next click; the globex one goes on.
    await runCli(['user', 'disable', 'acme', p.email], { dataDir: s.dataDir, env: s.storeEnv });
    expect((await c.get('/ui/tokens')).status).toBe(303);
    expect((await second.get('/ui/ledger')).status).toBe(200);
    const again = new Client(s.url);
    expect((await again.login(p.email)).headers.get('location')).toBe('/ui/overview');
    expect((await again.get('/ui/overview')).text).toContain('(billing, globex)');
  });
});

describe('reset links', () => {
  it('the console resets only developer and billing users of this partner alone; msgctl resets anyone', async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const otherAdmin = await person(acme.partnerId, 'admin');
    const shared = await person(acme.partnerId, 'developer');
    await inviteUser(s.ctx, { partner: globex.partnerId, email: shared.email, role: 'developer' }, 'test');
    const solo = await person(acme.partnerId, 'billing');

    await admin.client.get('/ui/users');
    for (const who of [otherAdmin, shared]) {
      const r = await admin.client.post(`/ui/users/${who.userId}/reset`, {});
      expect(r.status).toBe(403);
      expect(r.text).toContain('ask your operator to run: msgctl user reset');
      expect(r.text).not.toMatch(/\/ui\/invite\/[\w-]{43}/);
    }
    const ok = await admin.client.post(`/ui/users/${solo.userId}/reset`, {});
    expect(ok.status).toBe(200);
    expect(linkIn(ok.text)).toBeTruthy();

    const cli = await runCli(['user', 'reset', 'acme', shared.email], { dataDir: s.dataDir, env: s.storeEnv });
    expect(cli.code).toBe(0);
    expect(cli.stderr).toContain('also belongs to 1 other partner(s)');
  });

  it('end when the person changes the password, and on "log out everywhere"', async () => {
    const a = await loggedIn(s.ctx, s.url, acme.partnerId, 'developer');
    const link = await resetUser(s.ctx, acme.partnerId, a.email, 'test', 'operator');
    expect((await new Client(s.url).get(`/ui/invite/${link.secret}`)).status).toBe(200);
    await a.client.get('/ui/account');
    const changed = await a.client.post('/ui/account/password', {
      current: PASSWORD,
      password: 'plum orchard at dusk',
    });
    expect(changed.status).toBe(303);
    expect((await new Client(s.url).get(`/ui/invite/${link.secret}`)).status).toBe(410);

    const link2 = await resetUser(s.ctx, acme.partnerId, a.email, 'test', 'operator');
    await a.client.get('/ui/account');
    await a.client.post('/ui/logout-everywhere', {});
    const c = new Client(s.url);
    await c.get('/ui/login');
    expect((await c.get(`/ui/invite/${link2.secret}`)).status).toBe(410);
    expect((await c.post(`/ui/invite/${link2.secret}`, { password: 'x', confirm: 'x' })).status).toBe(410);
  });
});

describe('weak passwords', () => {
  const weak = (email: string) => ['            ', 'aaaaaaaaaaaa', email];

  it('are refused on an invite link, a reset link and Your account, saying why; a good one is taken', async () => {
    const email = `ann.lee-${Math.random().toString(36).slice(2, 6)}@acme.example`;
    const { secret } = await inviteUser(s.ctx, { partner: acme.partnerId, email, role: 'developer' }, 'test');
    const c = new Client(s.url);
    await c.get(`/ui/invite/${secret}`);
    for (const pw of weak(email)) {
      const r = await c.post(`/ui/invite/${secret}`, { password: pw, confirm: pw });
      expect(r.status).toBe(400);
      expect(r.text).toContain('this password is too easy to guess');
    }
    const spaces = await c.post(`/ui/invite/${secret}`, { password: ' '.repeat(12), confirm: ' '.repeat(12) });
    expect(spaces.text).toContain('Repeated characters like');
    const own = await c.post(`/ui/invite/${secret}`, { password: email, confirm: email });
    expect(own.text).toContain('There should not be any personal or page related data.');
    const good = 'violet tram ladder oyster';
    expect((await c.post(`/ui/invite/${secret}`, { password: good, confirm: good })).status).toBe(303);
    expect((await c.login(email, good)).status).toBe(303);

    await c.get('/ui/account');
    for (const pw of [...weak(email), 'acme acme acme']) {
      const r = await c.post('/ui/account/password', { current: good, password: pw });
      expect(r.status).toBe(400);
      expect(r.text).toMatch(/too easy to guess|at least 12 characters/);
    }
    const reset = await resetUser(s.ctx, acme.partnerId, email, 'test', 'operator');
    const r = new Client(s.url);
    await r.get(`/ui/invite/${reset.secret}`);
    for (const pw of weak(email)) {
      const res = await r.post(`/ui/invite/${reset.secret}`, { password: pw, confirm: pw });
      expect(res.status).toBe(400);
      expect(res.text).toContain('this password is too easy to guess');
    }
    expect((await r.post(`/ui/invite/${reset.secret}`, { password: PASSWORD, confirm: PASSWORD })).status).toBe(303);
  });
});
