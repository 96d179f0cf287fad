import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import { getTokenByRef, renameToken, revokeToken, tokenJson } from '../../src/core/tokens.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The token admin on both stores: finding a token by id or prefix, renaming, revoking.

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

const iso = (ms: number) => new Date(ms).toISOString();
