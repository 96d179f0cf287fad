import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { activatePartner, createPartner, suspendPartner } from '../../src/core/partners.js';
import {
  TokenAuthenticator,
  bearer,
  hasScope,
  hashSecret,
  issueToken,
  parseScopes,
  revokeToken,
} from '../../src/core/tokens.js';
import { AppError } from '../../src/lib/errors.js';
import { sql } from '../../src/db/sql.js';
import { waitFor } from '../helpers/wait.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test');
});
afterEach(() => t.close());

describe('TokenAuthenticator', () => {
  it('accepts a valid token and returns its partner and scopes', async () => {
    const { secret, token } = await issueToken(
      t.ctx,
      { partner: 'acme', name: 'p', scopes: 'messages:send,contacts:write' },
      'test',
    );
    const r = await new TokenAuthenticator(t.ctx).authenticate(secret);
    expect(r).toEqual({
      ok: true,
      principal: {
        tokenId: token.id,
        partnerId: token.partner_id,
        partnerSlug: 'acme',
        scopes: ['contacts:write', 'messages:send'],
        rateLimitPerMinute: null,
      },
    });
  });

  it('stores only the hash, and the secret is long and prefixed', async () => {
    const { secret, token } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    expect(secret).toMatch(/^msgd_live_[A-Za-z0-9_-]{43}$/); // 32 random bytes
    expect(token.hash).toBe(hashSecret(secret));
    const raw = JSON.stringify(await t.ctx.store.all(sql`SELECT * FROM tokens`));
    expect(raw).not.toContain(secret);
  });

  it('missing: no header, empty string', async () => {
    const auth = new TokenAuthenticator(t.ctx);
    expect(await auth.authenticate(undefined)).toEqual({ ok: false, reason: 'missing' });
    expect(await auth.authenticate(null)).toEqual({ ok: false, reason: 'missing' });
    expect(await auth.authenticate('')).toEqual({ ok: false, reason: 'missing' });
  });

  it('unknown: a made-up token, or a real one with one character changed', async () => {
    const { secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    const auth = new TokenAuthenticator(t.ctx);
    expect(await auth.authenticate('msgd_live_nope')).toEqual({ ok: false, reason: 'unknown' });
    const flipped = secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A');
    expect(await auth.authenticate(flipped)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('revoked: refused on the very next call of the same authenticator', async () => {
    const { secret, token } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    const auth = new TokenAuthenticator(t.ctx);
    expect((await auth.authenticate(secret)).ok).toBe(true);
    await revokeToken(t.ctx, token.prefix, 'test');
    expect(await auth.authenticate(secret)).toEqual({ ok: false, reason: 'revoked' });
    await expect(revokeToken(t.ctx, token.id, 'test')).rejects.toThrow(/already revoked/);
  });

  it('expired: valid until the instant of expiry, refused from then on', async () => {
    const { secret } = await issueToken(
      t.ctx,
      { partner: 'acme', name: 'p', scopes: '*', expiresAt: t.clock.now + 60_000 },
      'test',
    );
    const auth = new TokenAuthenticator(t.ctx);
    t.clock.now += 59_999;
    expect((await auth.authenticate(secret)).ok).toBe(true);
    t.clock.now += 1;
    expect(await auth.authenticate(secret)).toEqual({ ok: false, reason: 'expired' });
  });

  it('an expiry in the past is refused at issue', async () => {
    await expect(
      issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*', expiresAt: t.clock.now }, 'test'),
    ).rejects.toThrow(/future/);
  });

  it('partner_suspended: refused while suspended, with the principal for logging; accepted again after activate', async () => {
    const { secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    const auth = new TokenAuthenticator(t.ctx);
    await suspendPartner(t.ctx, 'acme', 'test');
    const r = await auth.authenticate(secret);
    expect(r).toMatchObject({ ok: false, reason: 'partner_suspended', principal: { partnerSlug: 'acme' } });
    await activatePartner(t.ctx, 'acme', 'test');
    expect((await auth.authenticate(secret)).ok).toBe(true);
  });

  it('records last use at most once a minute', async () => {
    const { secret, token } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    const lastUsed = async () =>
      (await t.ctx.store.get<{ at: number }>(sql`SELECT last_used_at AS at FROM tokens WHERE id = ${token.id}`))?.at;
    // The write is not awaited by the request: on PostgreSQL it lands a moment later.
    const lands = (at: number) => waitFor(async () => (await lastUsed()) === at, `last_used_at ${at}`, 5_000, 10);
    const auth = new TokenAuthenticator(t.ctx);
    const first = t.clock.now;
    await auth.authenticate(secret);
    await lands(first);
    t.clock.now += 30_000;
    await auth.authenticate(secret);
    expect(await lastUsed()).toBe(first);
    t.clock.now += 30_000;
    await auth.authenticate(secret);
    await lands(first + 60_000);
  });
});

describe('scopes', () => {
  it('parses, dedupes and sorts; * swallows the rest', () => {
    expect(parseScopes('messages:send, messages:read,messages:send')).toEqual(['messages:read', 'messages:send']);
    expect(parseScopes('messages:send,*')).toEqual(['*']);
    expect(parseScopes(['channels:read'])).toEqual(['channels:read']);
  });

  it('rejects unknown and empty scope lists with the allowed list', () => {
    const err = (() => {
      try {
        parseScopes('messages:send,admin');
      } catch (e) {
        return e as AppError;
      }
    })();
    expect(err).toBeInstanceOf(AppError);
    expect(err!.message).toBe('unknown scope "admin"');
    expect(err!.details[0].message).toMatch(
      /messages:send.*channels:read, templates:read, suppressions:read, suppressions:write, or \* for all/,
    );
    expect(() => parseScopes(' , ')).toThrow(/at least one scope/);
  });

  it('hasScope: exact, *, and contacts:write implying contacts:read only', () => {
    expect(hasScope(['messages:send'], 'messages:send')).toBe(true);
    expect(hasScope(['messages:send'], 'messages:read')).toBe(false);
    expect(hasScope(['*'], 'webhooks:manage')).toBe(true);
    expect(hasScope(['contacts:write'], 'contacts:read')).toBe(true);
    expect(hasScope(['contacts:read'], 'contacts:write')).toBe(false);
    expect(hasScope(['messages:send'], 'contacts:read')).toBe(false);
    expect(hasScope([], 'messages:send')).toBe(false);
  });

  it('bearer() takes exactly one token after "Bearer"', () => {
    expect(bearer('Bearer abc')).toBe('abc');
    expect(bearer('bearer   abc  ')).toBe('abc');
    expect(bearer('Basic abc')).toBeNull();
    expect(bearer('Bearer a b')).toBeNull();
    expect(bearer(undefined)).toBeNull();
  });
});
