import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPartner } from '../../src/core/partners.js';
import { acceptLink, inviteUser } from '../../src/core/users.js';
import { runCli } from '../helpers/cli.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow } from '../helpers/rows.js';
import { Client, PASSWORD, loggedIn } from './helpers.js';

// One partner's people against another's, over real HTTP: every id of the other tenant in
// every place that takes one, takeover paths through links, sessions that end at once,
// CSRF on the partner switcher and invitation answers, and the same request many times at once.

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
const linkIn = (html: string) => /\/ui\/invite\/([\w-]{43})/.exec(html)![1];
const count = async (sql: string, ...args: unknown[]) => ((await sqlRow(s.ctx, sql, ...args)) as { n: number }).n;

/** A person with PASSWORD who accepted an invitation of `partnerId`. */
async function person(partnerId: string, role = 'developer', email = fresh(role)) {
  const { secret } = await inviteUser(s.ctx, { partner: partnerId, email, role }, 'test');
  const user = await acceptLink(s.ctx, secret, PASSWORD);
  return { email, userId: user.id };
}

async function clientOf(email: string, partnerId?: string) {
  const c = new Client(s.url);
  const r = await c.login(email);
  if (r.status !== 303) throw new Error(`login ${r.status}`);
  if (partnerId) {
    await c.get('/ui/partners');
    await c.post('/ui/partners', { partner: partnerId });
  }
  return c;
}

describe("another partner's people", () => {
  it("a password set through one partner's link does not accept another partner's invitation", async () => {
    // acme's admin invites an address that globex will use, and sets its password with the link.
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const victim = fresh('victim');
    await admin.client.get('/ui/users');
    const link = linkIn((await admin.client.post('/ui/users', { email: victim, role: 'billing' })).text);
    const squat = new Client(s.url);
    await squat.get(`/ui/invite/${link}`);
    expect((await squat.post(`/ui/invite/${link}`, { password: PASSWORD, confirm: PASSWORD })).status).toBe(303);
    // Globex invites the same address as admin and sends its link to the real person.
    const globexLink = await inviteUser(s.ctx, { partner: globex.partnerId, email: victim, role: 'admin' }, 'test');
    expect(globexLink.kind).toBe('join');
    // Whoever holds the password but not globex's link cannot take the invitation.
    await squat.login(victim);
    const picker = await squat.get('/ui/partners');
    expect(picker.text).toContain('Accept it through the link it came with');
    const taken = await squat.post(`/ui/invitations/${globex.partnerId}/accept`, {});
    expect(taken.status).toBe(403);
    expect(
      await count(
        `SELECT COUNT(*) AS n FROM memberships WHERE partner_id = ? AND status = 'active' AND user_id = (SELECT id FROM users WHERE email = ?)`,
        globex.partnerId,
        victim,
      ),
    ).toBe(0);
    expect((await squat.post('/ui/partners', { partner: globex.partnerId })).status).toBe(404);
  });

  it("a reset link issued while the person was one partner's alone stops when they join another", async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const dev = await person(acme.partnerId, 'developer');
    await admin.client.get('/ui/users');
    const r = await admin.client.post(`/ui/users/${dev.userId}/reset`, {});
    expect(r.status).toBe(200);
    const reset = linkIn(r.text);
    // The developer joins globex through globex's own link.
    const join = await inviteUser(s.ctx, { partner: globex.partnerId, email: dev.email, role: 'admin' }, 'test');
    const c = await clientOf(dev.email);
    await c.get(`/ui/invite/${join.secret}`);
    expect((await c.post(`/ui/invite/${join.secret}/accept`, {})).headers.get('location')).toBe('/ui/overview');
    // acme's admin still holds the reset link: it would open globex as its admin.
    const thief = new Client(s.url);
    expect((await thief.get(`/ui/invite/${reset}`)).status).toBe(410);
    await thief.get('/ui/login');
    const used = await thief.post(`/ui/invite/${reset}`, {
      password: 'plum orchard at dusk',
      confirm: 'plum orchard at dusk',
    });
    expect(used.status).toBe(410);
    expect((await new Client(s.url).login(dev.email)).status).toBe(303);
  });

  it("another partner's user ids and emails are 404 in every Users action, like ids that do not exist", async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const theirs = await person(globex.partnerId, 'admin');
    const before = await clientOf(theirs.email);
    await admin.client.get('/ui/users');
    for (const action of ['disable', 'enable', 'reset', 'remove']) {
      for (const ref of [theirs.userId, theirs.email, 'usr_doesnotexist00000000']) {
        const r = await admin.client.post(`/ui/users/${encodeURIComponent(ref)}/${action}`, {});
        expect(r.status).toBe(404);
        expect(r.text).not.toMatch(/\/ui\/invite\/[\w-]{43}/);
      }
    }
    expect((await before.get('/ui/users')).text).toContain('(admin, globex)');
  });

  it("acme's admin acting on a person who also belongs to globex touches only acme", async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    const shared = await person(globex.partnerId, 'admin');
    const join = await inviteUser(s.ctx, { partner: acme.partnerId, email: shared.email, role: 'developer' }, 'test');
    const inGlobex = await clientOf(shared.email, globex.partnerId);
    const inAcme = await clientOf(shared.email, acme.partnerId);
    await inAcme.get(`/ui/invite/${join.secret}`);
    await inAcme.post(`/ui/invite/${join.secret}/accept`, {});
    expect((await inAcme.get('/ui/tokens')).text).toContain('(developer, acme)');

    await admin.client.get('/ui/users');
    expect((await admin.client.post(`/ui/users/${shared.userId}/reset`, {})).status).toBe(403);
    expect((await admin.client.post(`/ui/users/${shared.userId}/disable`, {})).status).toBe(200);
    expect((await inAcme.get('/ui/tokens')).status).toBe(303);
    expect((await inGlobex.get('/ui/users')).status).toBe(200);
    expect((await admin.client.post(`/ui/users/${shared.userId}/remove`, {})).status).toBe(200);
    expect((await inGlobex.get('/ui/users')).status).toBe(200);
    expect((await new Client(s.url).login(shared.email)).headers.get('location')).toBe('/ui/overview');
  });
});

describe('ids of another tenant in the switcher and invitation answers', () => {
  it('refuses partners without an active membership and invitations of other people', async () => {
    const me = await person(acme.partnerId, 'developer');
    const other = await person(globex.partnerId, 'developer');
    const initech = await setupPartner(s.ctx, { slug: `initech-${++n}` });
    const theirInvite = await inviteUser(
      s.ctx,
      { partner: initech.partnerId, email: other.email, role: 'admin' },
      'test',
    );
    await inviteUser(s.ctx, { partner: globex.partnerId, email: me.email, role: 'billing' }, 'test');
    const c = await clientOf(me.email);
    await c.get('/ui/partners');
    // pending (not accepted), another's partner, a made-up id
    for (const id of [globex.partnerId, initech.partnerId, 'prt_nope']) {
      expect((await c.post('/ui/partners', { partner: id })).status).toBe(404);
      expect((await c.get('/ui/overview')).text).toContain('(developer, acme)');
    }
    expect((await c.post(`/ui/invitations/${initech.partnerId}/decline`, {})).status).toBe(404);
    expect((await c.post(`/ui/invitations/${initech.partnerId}/accept`, {})).status).toBe(403);
    expect(
      await count(
        `SELECT COUNT(*) AS n FROM memberships WHERE partner_id = ? AND status = 'pending'`,
        initech.partnerId,
      ),
    ).toBe(1);
    // another person's join link, opened while logged in as me
    await c.get(`/ui/invite/${theirInvite.secret}`);
    expect((await c.post(`/ui/invite/${theirInvite.secret}/accept`, {})).status).toBe(403);
    expect(
      await count(
        `SELECT COUNT(*) AS n FROM memberships WHERE partner_id = ? AND status = 'pending'`,
        initech.partnerId,
      ),
    ).toBe(1);
  });

  it('an invitation disabled or removed meanwhile cannot be accepted', async () => {
    const me = await person(acme.partnerId, 'developer');
    const j1 = await inviteUser(s.ctx, { partner: globex.partnerId, email: me.email, role: 'billing' }, 'test');
    const c = await clientOf(me.email);
    await c.get(`/ui/invite/${j1.secret}`);
    await runCli(['user', 'disable', 'globex', me.email], { dataDir: s.dataDir, env: s.storeEnv });
    expect((await c.post(`/ui/invite/${j1.secret}/accept`, {})).status).toBe(410);
    expect((await c.post(`/ui/invitations/${globex.partnerId}/decline`, {})).status).toBe(404);
    expect((await c.post('/ui/partners', { partner: globex.partnerId })).status).toBe(404);
    await runCli(['user', 'remove', 'globex', me.email, '--yes'], { dataDir: s.dataDir, env: s.storeEnv });
    expect((await c.post(`/ui/invite/${j1.secret}/accept`, {})).status).toBe(410);
    expect(
      await count(
        `SELECT COUNT(*) AS n FROM memberships WHERE partner_id = ? AND user_id = ?`,
        globex.partnerId,
        me.userId,
      ),
    ).toBe(0);
  });

  it('the switcher and the answers need the CSRF token', async () => {
    const me = await person(acme.partnerId, 'developer');
    const j = await inviteUser(s.ctx, { partner: globex.partnerId, email: me.email, role: 'billing' }, 'test');
    const c = await clientOf(me.email);
    await c.get(`/ui/invite/${j.secret}`);
    await c.post(`/ui/invite/${j.secret}/accept`, {});
    await c.post('/ui/partners', { partner: acme.partnerId });
    const initech = await setupPartner(s.ctx, { slug: `initech-${++n}` });
    await inviteUser(s.ctx, { partner: initech.partnerId, email: me.email, role: 'billing' }, 'test');
    const good = c.csrf;
    for (const token of ['', 'x'.repeat(43)]) {
      c.csrf = token;
      expect((await c.post('/ui/partners', { partner: globex.partnerId })).status).toBe(419);
      // The 419 page carries a fresh form: take the bad token again.
      c.csrf = token;
      expect((await c.post(`/ui/invitations/${initech.partnerId}/decline`, {})).status).toBe(419);
    }
    c.csrf = good;
    expect((await c.get('/ui/tokens')).text).toContain('(developer, acme)');
    expect(
      await count(
        `SELECT COUNT(*) AS n FROM memberships WHERE partner_id = ? AND user_id = ?`,
        initech.partnerId,
        me.userId,
      ),
    ).toBe(1);
    // GET never switches
    expect((await c.get(`/ui/partners?partner=${globex.partnerId}`)).status).toBe(200);
    expect((await c.get('/ui/tokens')).text).toContain('(developer, acme)');
  });
});

describe('sessions', () => {
  it('remove and partner suspend end the session in that partner at once; the other partner goes on', async () => {
    const p = await person(acme.partnerId, 'developer');
    const j = await inviteUser(s.ctx, { partner: globex.partnerId, email: p.email, role: 'developer' }, 'test');
    const g = await clientOf(p.email);
    await g.get(`/ui/invite/${j.secret}`);
    await g.post(`/ui/invite/${j.secret}/accept`, {});
    const a = await clientOf(p.email, acme.partnerId);
    expect((await a.get('/ui/tokens')).text).toContain('(developer, acme)');
    expect(
      (await runCli(['user', 'remove', 'acme', p.email, '--yes'], { dataDir: s.dataDir, env: s.storeEnv })).code,
    ).toBe(0);
    for (const path of ['/ui/tokens', '/ui/overview', '/ui/messages', '/ui/webhooks'])
      expect((await a.get(path)).status).toBe(303);
    expect((await g.get('/ui/tokens')).text).toContain('(developer, globex)');

    const other = await setupPartner(s.ctx, { slug: `hooli-${++n}` });
    const k = await inviteUser(s.ctx, { partner: other.partnerId, email: p.email, role: 'developer' }, 'test');
    await g.get(`/ui/invite/${k.secret}`);
    await g.post(`/ui/invite/${k.secret}/accept`, {});
    expect((await g.get('/ui/tokens')).text).toContain(`(developer, ${other.slug})`);
    const g2 = await clientOf(p.email, globex.partnerId);
    expect((await runCli(['partner', 'suspend', other.slug], { dataDir: s.dataDir, env: s.storeEnv })).code).toBe(0);
    expect((await g.get('/ui/tokens')).status).toBe(303);
    expect((await g2.get('/ui/tokens')).text).toContain('(developer, globex)');
  });
});

describe('the same request many times at once', () => {
  it('50 invitations of one address, 50 removals, 50 accepts: one membership, no 500', async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await admin.client.get('/ui/users');
    const email = fresh('burst');
    const invites = await Promise.all(
      Array.from({ length: 50 }, () => admin.client.post('/ui/users', { email, role: 'developer' })),
    );
    expect(invites.map((r) => r.status).every((st) => st === 201)).toBe(true);
    expect(await count('SELECT COUNT(*) AS n FROM users WHERE email = ?', email)).toBe(1);
    expect(
      await count('SELECT COUNT(*) AS n FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = ?', email),
    ).toBe(1);
    expect(
      await count(
        'SELECT COUNT(*) AS n FROM user_invites i JOIN users u ON u.id = i.user_id WHERE u.email = ? AND used_at IS NULL',
        email,
      ),
    ).toBe(1);

    const p = await person(globex.partnerId, 'developer');
    const j = await inviteUser(s.ctx, { partner: acme.partnerId, email: p.email, role: 'billing' }, 'test');
    const c = await clientOf(p.email);
    await c.get(`/ui/invite/${j.secret}`);
    const accepts = await Promise.all(Array.from({ length: 50 }, () => c.post(`/ui/invite/${j.secret}/accept`, {})));
    const codes = accepts.map((r) => r.status);
    expect(codes.filter((x) => x === 303)).toHaveLength(1);
    expect(codes.every((x) => x === 303 || x === 410)).toBe(true);
    expect(await count(`SELECT COUNT(*) AS n FROM memberships WHERE user_id = ?`, p.userId)).toBe(2);

    await admin.client.get('/ui/users');
    const removes = await Promise.all(
      Array.from({ length: 50 }, () => admin.client.post(`/ui/users/${p.userId}/remove`, {})),
    );
    const rc = removes.map((r) => r.status);
    expect(rc.filter((x) => x === 200)).toHaveLength(1);
    expect(rc.every((x) => x === 200 || x === 404)).toBe(true);
    expect(await count(`SELECT COUNT(*) AS n FROM memberships WHERE user_id = ?`, p.userId)).toBe(1);
  });
});

describe('addresses and names', () => {
  it('normalises case, spaces and internationalised domains; refuses control characters', async () => {
    const admin = await loggedIn(s.ctx, s.url, acme.partnerId, 'admin');
    await admin.client.get('/ui/users');
    const local = `idn-${++n}`;
    const r = await admin.client.post('/ui/users', {
      email: `  ${local.toUpperCase()}@BÜCHER.example `,
      role: 'developer',
    });
    expect(r.status).toBe(201);
    const stored = `${local}@xn--bcher-kva.example`;
    expect(r.text).toContain(stored);
    const again = await admin.client.post('/ui/users', { email: `${local}@bücher.example`, role: 'developer' });
    expect(again.status).toBe(201);
    expect(await count('SELECT COUNT(*) AS n FROM users WHERE email = ?', stored)).toBe(1);
    const c = new Client(s.url);
    await c.get(`/ui/invite/${linkIn(again.text)}`);
    await c.post(`/ui/invite/${linkIn(again.text)}`, { password: PASSWORD, confirm: PASSWORD });
    expect((await c.login(`${local}@Bücher.example`)).status).toBe(303);
    const cli = await runCli(['user', 'disable', 'acme', `${local.toUpperCase()}@bücher.EXAMPLE`], {
      dataDir: s.dataDir,
      env: s.storeEnv,
    });
    expect(cli.code).toBe(0);

    for (const bad of [
      'a\r\nBcc: x@evil.example@example.com',
      'a\u0000b@example.com',
      '<script>@example.com',
      'a b@example.com',
    ]) {
      const res = await admin.client.post('/ui/users', { email: bad, role: 'developer' });
      expect(res.status).toBe(400);
      expect(res.text).not.toContain('<script>@');
    }
    const odd = `o'neil&co+${++n}@example.com`;
    const ok = await admin.client.post('/ui/users', { email: odd, role: 'developer' });
    expect(ok.status).toBe(201);
    expect(ok.text).toContain('o&#x27;neil&amp;co');
  });
});

describe('markup in partner names', () => {
  it('shows as text on the join link, the Partners page, the switcher and the header', async () => {
    const name = `<img src=x onerror=alert(1)> "Hostile" & Co ${++n}`;
    const hostile = await createPartner(s.ctx, { slug: `hostile-${n}`, name, creditLimit: 0 }, 'test');
    const me = await person(acme.partnerId, 'developer');
    const j = await inviteUser(s.ctx, { partner: hostile.id, email: me.email, role: 'developer' }, 'test');
    const c = await clientOf(me.email);
    for (const page of [await c.get(`/ui/invite/${j.secret}`), await c.get('/ui/partners')]) {
      expect(page.text).not.toContain('<img src=x');
      expect(page.text).toMatch(/&lt;img src=x onerror=alert\(1\)&gt;/);
    }
    await c.get(`/ui/invite/${j.secret}`);
    await c.post(`/ui/invite/${j.secret}/accept`, {});
    const overview = await c.get('/ui/overview');
    expect(overview.status).toBe(200);
    expect(overview.text).not.toContain('<img src=x');
    expect(overview.text).toMatch(/&lt;img src=x onerror=alert\(1\)&gt;/);
  });
});

describe('the login throttle', () => {
  it('counts every spelling of one address against the same account', async () => {
    const p = await person(acme.partnerId, 'developer', `thr-${++n}@example.com`);
    const local = p.email.split('@')[0];
    // EXAMPLE.COM, a full-width domain, spaces: each is the same login.
    const spellings = [
      p.email.toUpperCase(),
      `${local}@\uff45xample.com`,
      ` ${p.email} `,
      `${local}@\uff45\uff58ample.com`,
      `${local}@Example.com`,
    ];
    const c = new Client(s.url);
    for (const email of spellings) {
      await c.get('/ui/login');
      expect((await c.post('/ui/login', { email, password: 'not the password at all' })).status).toBe(401);
    }
    await c.get('/ui/login');
    const r = await c.post('/ui/login', { email: `${local}@\uff45xample.com`, password: PASSWORD });
    expect(r.status).toBe(429);
  });
});

describe('roles', () => {
  it('developer and billing members get 403 on every admin route, and nothing changes', async () => {
    const target = await person(acme.partnerId, 'developer');
    for (const role of ['developer', 'billing']) {
      const m = await loggedIn(s.ctx, s.url, acme.partnerId, role);
      await m.client.get('/ui/account');
      expect((await m.client.get('/ui/users')).status).toBe(403);
      expect((await m.client.post('/ui/users', { email: fresh('x'), role: 'admin' })).status).toBe(403);
      for (const action of ['disable', 'enable', 'reset', 'remove'])
        expect((await m.client.post(`/ui/users/${target.userId}/${action}`, {})).status).toBe(403);
    }
    const b = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    await b.client.get('/ui/account');
    expect((await b.client.post('/ui/tokens', { name: 'x', scopes: 'messages:send' })).status).toBe(403);
    expect((await b.client.post('/ui/webhooks', { url: 'https://example.com/h' })).status).toBe(403);
    expect(
      await count(`SELECT COUNT(*) AS n FROM memberships WHERE user_id = ? AND status = 'active'`, target.userId),
    ).toBe(1);
  });
});
