import type { Row } from '../db/rows.js';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { partners, tokens } from '../db/schema.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';
import { auditIn } from './audit.js';
import { readPartner } from './partners.js';
import { StoreSettingsCache } from './settings-version.js';

export const SCOPES = [
  'messages:send',
  'messages:read',
  'conversations:read',
  'contacts:read',
  'contacts:write',
  'webhooks:manage',
  'channels:read',
  'templates:read',
  'suppressions:read',
  'suppressions:write',
] as const;
export type Scope = (typeof SCOPES)[number];

// A write scope implies reading what it writes.
const IMPLIED: Partial<Record<Scope, Scope[]>> = {
  'contacts:write': ['contacts:read'],
  'suppressions:write': ['suppressions:read'],
};

export const TOKEN_PREFIX = 'msgd_live_';
const PREFIX_SHOWN = TOKEN_PREFIX.length + 6;

export type Token = Row<typeof tokens>;

export function parseScopes(input: string | string[]): string[] {
  const list = (Array.isArray(input) ? input : input.split(/[\s,]+/)).map((s) => s.trim()).filter(Boolean);
  if (list.length === 0)
    throw invalid('at least one scope is required', [
      { field: 'scopes', message: `one or more of ${SCOPES.join(', ')}, or *` },
    ]);
  const bad = list.filter((s) => s !== '*' && !(SCOPES as readonly string[]).includes(s));
  if (bad.length) {
    throw invalid(`unknown scope ${bad.map((b) => `"${b}"`).join(', ')}`, [
      { field: 'scopes', message: `allowed: ${SCOPES.join(', ')}, or * for all` },
    ]);
  }
  return list.includes('*') ? ['*'] : [...new Set(list)].sort();
}

export function hasScope(scopes: readonly string[], needed: Scope): boolean {
  if (scopes.includes('*') || scopes.includes(needed)) return true;
  return scopes.some((s) => IMPLIED[s as Scope]?.includes(needed));
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export interface IssuedToken {
  token: Token;
  /** The only time the secret exists outside the caller's hands. */
  secret: string;
}

export function issueToken(
  ctx: CoreCtx,
  input: { partner: string; name: string; scopes: string | string[]; expiresAt?: number | null },
  actor: string,
): Promise<IssuedToken> {
  return ctx.store.transaction((tx) => issueTokenIn(ctx, tx, input, actor));
}

/** issueToken inside the caller's store transaction (the demo seed's). */
export async function issueTokenIn(
  ctx: CoreCtx,
  tx: Tx,
  input: { partner: string; name: string; scopes: string | string[]; expiresAt?: number | null },
  actor: string,
): Promise<IssuedToken> {
  const scopes = parseScopes(input.scopes);
  if (!input.name || input.name.length > 100) throw invalid('a token name of 1-100 characters is required');
  if (input.expiresAt != null && input.expiresAt <= ctx.now()) throw invalid('the expiry must be in the future');
  const partner = await readPartner(tx, input.partner);
  const secret = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const row: Token = {
    id: newId('tok'),
    partner_id: partner.id,
    name: input.name,
    scopes: scopes.join(' '),
    prefix: secret.slice(0, PREFIX_SHOWN),
    hash: hashSecret(secret),
    expires_at: input.expiresAt ?? null,
    revoked_at: null,
    last_used_at: null,
    created_at: ctx.now(),
  };
  await tx.run(
    sql`INSERT INTO tokens (id, partner_id, name, scopes, prefix, hash, expires_at, revoked_at, last_used_at, created_at)
        VALUES (${row.id}, ${row.partner_id}, ${row.name}, ${row.scopes}, ${row.prefix}, ${row.hash}, ${row.expires_at},
          ${row.revoked_at}, ${row.last_used_at}, ${row.created_at})`,
  );
  await auditIn(ctx, tx, actor, 'token.issue', 'token', row.id, { partner: partner.slug, name: row.name, scopes });
  return { token: row, secret };
}

/** A partner's tokens, newest first. */
export async function listTokens(ctx: CoreCtx, partnerRef: string): Promise<Token[]> {
  const partner = await readPartner(ctx.store, partnerRef);
  return ctx.store.all<Token>(
    sql`SELECT * FROM tokens WHERE partner_id = ${partner.id} ORDER BY created_at DESC, id DESC`,
  );
}

/** A token by id or by its visible prefix (refused when several share the prefix). */
export async function getTokenByRef(ctx: CoreCtx, ref: string, q: Queryable = ctx.store): Promise<Token> {
  let t = await q.get<Token>(sql`SELECT * FROM tokens WHERE id = ${ref}`);
  if (!t) {
    const byPrefix = await q.all<Token>(sql`SELECT * FROM tokens WHERE prefix = ${ref} ORDER BY id`);
    if (byPrefix.length > 1) {
      throw new AppError(
        'conflict',
        `${byPrefix.length} tokens share the prefix "${ref}"; revoke by token id (msgctl token list)`,
      );
    }
    t = byPrefix[0];
  }
  if (!t) throw notFound('token', ref);
  return t;
}

/** Revoke by token id or by the visible prefix. */
export async function revokeToken(ctx: CoreCtx, ref: string, actor: string): Promise<Token> {
  return ctx.store.transaction(async (tx) => {
    const t = await getTokenByRef(ctx, ref, tx);
    const now = ctx.now();
    // Conditional, so of two revocations racing only one is told it revoked the token.
    const { changes } = await tx.run(
      sql`UPDATE tokens SET revoked_at = ${now} WHERE id = ${t.id} AND revoked_at IS NULL`,
    );
    if (changes === 0) throw new AppError('conflict', `token ${t.id} is already revoked`);
    await auditIn(ctx, tx, actor, 'token.revoke', 'token', t.id, { name: t.name });
    return { ...t, revoked_at: now };
  });
}

/** A new name for a token (its secret, scopes and expiry stay). */
export async function renameToken(ctx: CoreCtx, ref: string, name: string, actor: string): Promise<Token> {
  if (!name || name.length > 100) throw invalid('a token name of 1-100 characters is required');
  return ctx.store.transaction(async (tx) => {
    const t = await getTokenByRef(ctx, ref, tx);
    await tx.run(sql`UPDATE tokens SET name = ${name} WHERE id = ${t.id}`);
    await auditIn(ctx, tx, actor, 'token.rename', 'token', t.id, { from: t.name, to: name });
    return { ...t, name };
  });
}

export function tokenJson(t: Token, now: number) {
  const state = t.revoked_at ? 'revoked' : t.expires_at !== null && t.expires_at <= now ? 'expired' : 'active';
  return {
    id: t.id,
    partner_id: t.partner_id,
    name: t.name,
    prefix: t.prefix,
    scopes: t.scopes.split(' '),
    state,
    expires_at: iso(t.expires_at),
    revoked_at: iso(t.revoked_at),
    last_used_at: iso(t.last_used_at),
    created_at: iso(t.created_at),
  };
}

export type AuthFailure = 'missing' | 'unknown' | 'revoked' | 'expired' | 'partner_suspended';

export interface AuthPrincipal {
  tokenId: string;
  partnerId: string;
  partnerSlug: string;
  scopes: string[];
  rateLimitPerMinute: number | null;
}

export type AuthResult =
  { ok: true; principal: AuthPrincipal } | { ok: false; reason: AuthFailure; principal?: AuthPrincipal };

type AuthRow = Pick<
  Row<typeof tokens>,
  'id' | 'hash' | 'scopes' | 'expires_at' | 'revoked_at' | 'last_used_at' | 'partner_id'
> &
  Pick<Row<typeof partners>, 'slug' | 'status' | 'rate_limit_per_minute'>;

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Authenticates a presented bearer secret. Called on every request (a token revoked or a
 * partner suspended by msgctl takes effect on the next request), so the row is kept in memory
 * until the settings version moves (src/core/settings-version.ts), and last_used_at is written
 * at most once a minute per token. On SQLite a kept row is found without a query; on
 * PostgreSQL the version costs one query per event-loop turn, shared by that turn's requests.
 */
export class TokenAuthenticator {
  private rows: StoreSettingsCache<string, AuthRow | null>;
  private touched = new Map<string, number>();

  constructor(private ctx: CoreCtx) {
    const store = ctx.store;
    // Kept until a token or partner changes: revoking, expiring by hand, suspending or issuing
    // is seen on the next request; unknown hashes are kept too.
    this.rows = new StoreSettingsCache(
      store,
      async (hash) =>
        (await store.get<AuthRow>(
          sql`SELECT t.id, t.hash, t.scopes, t.expires_at, t.revoked_at, t.last_used_at,
                     p.id AS partner_id, p.slug, p.status, p.rate_limit_per_minute
                FROM tokens t JOIN partners p ON p.id = t.partner_id
               WHERE t.hash = ${hash}`,
        )) ?? null,
    );
  }

  async authenticate(presented: string | undefined | null): Promise<AuthResult> {
    if (!presented) return { ok: false, reason: 'missing' };
    const hash = hashSecret(presented);
    const row = await this.rows.get(hash);
    // The lookup is by hash, so timing reveals nothing about the secret; compare anyway so a
    // future lookup by prefix stays safe.
    if (!row || !timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) {
      return { ok: false, reason: 'unknown' };
    }
    const principal: AuthPrincipal = {
      tokenId: row.id,
      partnerId: row.partner_id,
      partnerSlug: row.slug,
      scopes: row.scopes.split(' '),
      rateLimitPerMinute: row.rate_limit_per_minute,
    };
    const now = this.ctx.now();
    if (row.revoked_at !== null) return { ok: false, reason: 'revoked' };
    if (row.expires_at !== null && row.expires_at <= now) return { ok: false, reason: 'expired' };
    if (row.status !== 'active') return { ok: false, reason: 'partner_suspended', principal };
    const last = this.touched.get(row.id) ?? row.last_used_at ?? 0;
    if (now - last >= LAST_USED_RESOLUTION_MS) {
      this.touched.set(row.id, now);
      // Not awaited: the request does not wait for a statistic, and a busy or unreachable
      // database must not fail an authenticated request over one.
      this.ctx.store.run(sql`UPDATE tokens SET last_used_at = ${now} WHERE id = ${row.id}`).catch(() => {});
    }
    return { ok: true, principal };
  }
}

/** Parse "Bearer <secret>" from an Authorization header value. */
export function bearer(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : null;
}
