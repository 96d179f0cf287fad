import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import { suspendPartner } from '../../src/core/partners.js';
import {
  getTokenByRef,
  hashSecret,
  issueToken,
  listTokens,
  renameToken,
  revokeToken,
  TokenAuthenticator,
  tokenJson,
} from '../../src/core/tokens.js';
import { sql } from '../../src/db/sql.js';
import { nextTurn, sleep, waitFor } from '../helpers/wait.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The token admin on both stores: issuing (the secret shown once), listing, finding a token by
// id or prefix, renaming, revoking; and the check every API request makes.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme' });
  const token = (id: string, name: string, prefix: string, createdAt: number) =>
    `('${id}', 'prt_a', '${name}', 'messages:send', '${prefix}', '${id}-hash', NULL, NULL, NULL, ${createdAt})`;
  await t.exec(
    `INSERT INTO tokens (id, partner_id, name, scopes, prefix, hash, expires_at, revoked_at, last_used_at, created_at)
     VALUES ${token('tok_1', 'prod', 'msgd_live_aaaaaa', 1)}, ${token('tok_2', 'ci', 'msgd_live_bbbbbb', 2)},
            ${token('tok_3', 'ci-2', 'msgd_live_bbbbbb', 3)}`,
  );
});
afterEach(() => t.close());

describe('tokens', () => {
  it('finds a token by id or by a prefix only it has', async () => {
    expect((await getTokenByRef(t.ctx, 'tok_2')).name).toBe('ci');
    expect((await getTokenByRef(t.ctx, 'msgd_live_aaaaaa')).id).toBe('tok_1');
    await expect(getTokenByRef(t.ctx, 'msgd_live_bbbbbb')).rejects.toMatchObject({
      code: 'conflict',
      message: '2 tokens share the prefix "msgd_live_bbbbbb"; revoke by token id (msgctl token list)',
    });
    await expect(getTokenByRef(t.ctx, 'tok_9')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('renames a token, refusing an empty or long name', async () => {
    expect((await renameToken(t.ctx, 'tok_1', 'production', 'op')).name).toBe('production');
    expect((await getTokenByRef(t.ctx, 'tok_1')).name).toBe('production');
    await expect(renameToken(t.ctx, 'tok_1', '', 'op')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(renameToken(t.ctx, 'tok_1', 'x'.repeat(101), 'op')).rejects.toMatchObject({
      code: 'invalid_request',
    });
    expect((await listAudit(t.ctx))[0]).toMatchObject({
      action: 'token.rename',
      details: { from: 'prod', to: 'production' },
    });
  });

  it('revokes once: of revocations racing, one revokes and the others are told it already is', async () => {
    t.clock.now = 1_000_000;
    const raced = await Promise.allSettled(Array.from({ length: 6 }, () => revokeToken(t.ctx, 'tok_1', 'op')));
    const done = raced.filter((r) => r.status === 'fulfilled');
    expect(done).toHaveLength(1);
    expect(tokenJson(done[0].value, t.clock.now)).toMatchObject({ state: 'revoked', revoked_at: iso(1_000_000) });
    for (const r of raced.filter((x) => x.status === 'rejected'))
      expect(r.reason).toMatchObject({ code: 'conflict', message: 'token tok_1 is already revoked' });
    const audits = await t.ctx.store.all<{ action: string }>(
      sql`SELECT action FROM audit_log WHERE action = ${'token.revoke'}`,
    );
    expect(audits).toHaveLength(1);
  });
});

describe('issueToken and listTokens', () => {
  it('issues a token whose secret is given once: only its hash and prefix are kept', async () => {
    t.clock.now = 5_000_000;
    const { token, secret } = await issueToken(
      t.ctx,
      { partner: 'acme', name: 'prod', scopes: 'messages:send contacts:write' },
      'op',
    );
    expect(secret).toMatch(/^msgd_live_[A-Za-z0-9_-]{43}$/);
    expect(tokenJson(token, t.clock.now)).toMatchObject({
      partner_id: 'prt_a',
      name: 'prod',
      prefix: secret.slice(0, 16),
      scopes: ['contacts:write', 'messages:send'],
      state: 'active',
      created_at: iso(5_000_000),
    });
    const stored = await t.ctx.store.all<Record<string, unknown>>(sql`SELECT * FROM tokens WHERE id = ${token.id}`);
    expect(stored[0].hash).toBe(hashSecret(secret));
    const everything = JSON.stringify([
      stored,
      await listTokens(t.ctx, 'acme'),
      await t.ctx.store.all(sql`SELECT * FROM audit_log`),
    ]);
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain(secret.slice(16));
    expect((await listAudit(t.ctx, 1))[0]).toMatchObject({
      action: 'token.issue',
      target_id: token.id,
      details: { partner: 'acme', name: 'prod', scopes: ['contacts:write', 'messages:send'] },
    });
  });

  it('refuses bad scopes, names, expiries and partners, writing nothing', async () => {
    const issue = (over: object) => issueToken(t.ctx, { partner: 'acme', name: 'x', scopes: '*', ...over }, 'op');
    await expect(issue({ scopes: 'messages:fly' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(issue({ name: '' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(issue({ expiresAt: t.clock.now })).rejects.toThrow(/future/);
    await expect(issue({ partner: 'nobody' })).rejects.toMatchObject({ code: 'not_found' });
    expect(await listTokens(t.ctx, 'acme')).toHaveLength(3);
  });

  it("lists a partner's tokens newest first", async () => {
    t.clock.now = 10;
    const { token } = await issueToken(t.ctx, { partner: 'prt_a', name: 'new', scopes: '*' }, 'op');
    expect((await listTokens(t.ctx, 'acme')).map((x) => x.id)).toEqual([token.id, 'tok_3', 'tok_2', 'tok_1']);
    await expect(listTokens(t.ctx, 'nobody')).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('TokenAuthenticator', () => {
  it('accepts an issued token; a revocation, also by another process, takes effect on the next request', async () => {
    const { token, secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: 'messages:send' }, 'op');
    const other = await issueToken(t.ctx, { partner: 'acme', name: 'q', scopes: '*' }, 'op');
    const auth = new TokenAuthenticator(t.ctx);
    expect(await auth.authenticate(secret)).toEqual({
      ok: true,
      principal: {
        tokenId: token.id,
        partnerId: 'prt_a',
        partnerSlug: 'acme',
        scopes: ['messages:send'],
        rateLimitPerMinute: null,
      },
    });
    expect(await auth.authenticate(`${secret}x`)).toEqual({ ok: false, reason: 'unknown' });
    expect(await auth.authenticate(undefined)).toEqual({ ok: false, reason: 'missing' });
    // Through this process: seen at once.
    await revokeToken(t.ctx, token.id, 'op');
    expect(await auth.authenticate(secret)).toEqual({ ok: false, reason: 'revoked' });
    // As msgctl would, on its own connection: seen from the next event-loop turn.
    expect((await auth.authenticate(other.secret)).ok).toBe(true);
    await t.exec(`UPDATE tokens SET revoked_at = 1 WHERE id = '${other.token.id}'`);
    await nextTurn();
    expect(await auth.authenticate(other.secret)).toEqual({ ok: false, reason: 'revoked' });
  });

  it("refuses a suspended partner's token with its principal, and an expired one", async () => {
    t.clock.now = 1_000_000;
    const { secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'op');
    const soon = await issueToken(t.ctx, { partner: 'acme', name: 's', scopes: '*', expiresAt: 1_060_000 }, 'op');
    const auth = new TokenAuthenticator(t.ctx);
    expect((await auth.authenticate(soon.secret)).ok).toBe(true);
    t.clock.now = 1_060_000;
    expect(await auth.authenticate(soon.secret)).toEqual({ ok: false, reason: 'expired' });
    await suspendPartner(t.ctx, 'acme', 'op');
    expect(await auth.authenticate(secret)).toMatchObject({
      ok: false,
      reason: 'partner_suspended',
      principal: { partnerSlug: 'acme' },
    });
  });

  it('records the last use at most once a minute', async () => {
    t.clock.now = 2_000_000;
    const { token, secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'op');
    const auth = new TokenAuthenticator(t.ctx);
    const lastUsed = async () => (await getTokenByRef(t.ctx, token.id)).last_used_at;
    // The check does not wait for the write: a request is not held up by a statistic.
    await auth.authenticate(secret);
    await waitFor(async () => (await lastUsed()) === 2_000_000, 'the first use to be recorded');
    t.clock.now += 59_999;
    await auth.authenticate(secret);
    await sleep(50);
    expect(await lastUsed()).toBe(2_000_000);
    t.clock.now += 1;
    await auth.authenticate(secret);
    await waitFor(async () => (await lastUsed()) === 2_060_000, 'the use a minute later to be recorded');
  });
});

const iso = (ms: number) => new Date(ms).toISOString();
