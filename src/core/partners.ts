import type { Queryable, Tx } from '../db/query.js';
import type { Row } from '../db/rows.js';
import { sql } from '../db/sql.js';
import type { partners } from '../db/schema.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import type { Config } from '../config/schema.js';
import { formatMoney, MAX_MONEY, moneyJson, parseMoney } from '../lib/money.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';
import { auditIn } from './audit.js';

export type Partner = Row<typeof partners>;

/** billing.balanceLowThreshold in micro-units: the low-balance threshold of a partner without its own. */
export function defaultLowBalance(config: Config): number | null {
  const t = config.billing.balanceLowThreshold;
  return t === null ? null : parseMoney(t);
}

const SLUG = /^[a-z0-9][a-z0-9-]{1,62}$/;
const CURRENCY = /^[A-Z]{3}$/;

export interface PartnerInput {
  slug: string;
  name: string;
  currency?: string;
  creditLimit?: number;
}

/** The checks of a new partner that need no data (the form of slug, name, currency, credit); throws invalid. */
export function checkPartnerInput(input: PartnerInput): { currency: string; creditLimit: number } {
  const details = [];
  if (!SLUG.test(input.slug)) {
    details.push({
      field: 'slug',
      message: 'lowercase letters, digits and dashes, 2-63 characters, starting with a letter or digit',
    });
  }
  if (!input.name || input.name.trim().length === 0 || input.name.length > 200) {
    details.push({ field: 'name', message: 'a name of 1-200 characters is required' });
  }
  const currency = (input.currency ?? 'USD').toUpperCase();
  if (!CURRENCY.test(currency))
    details.push({ field: 'currency', message: 'a three-letter ISO 4217 code such as USD' });
  const creditLimit = input.creditLimit ?? 0;
  if (!Number.isSafeInteger(creditLimit) || creditLimit < 0) {
    details.push({ field: 'credit_limit', message: 'must be zero or positive' });
  } else if (creditLimit > MAX_MONEY) {
    details.push({ field: 'credit_limit', message: `at most ${formatMoney(MAX_MONEY)}` });
  }
  if (details.length) throw invalid('invalid partner', details);
  return { currency, creditLimit };
}

export function createPartner(ctx: CoreCtx, input: PartnerInput, actor: string): Promise<Partner> {
  return ctx.store.transaction((tx) => createPartnerIn(ctx, tx, input, actor));
}

/**
 * createPartner inside the caller's store transaction (the demo seed's). The slug is claimed by
 * the INSERT itself (ON CONFLICT DO NOTHING), so of two creations racing for one slug, one is
 * refused with a conflict, whatever the store.
 */
export async function createPartnerIn(ctx: CoreCtx, tx: Tx, input: PartnerInput, actor: string): Promise<Partner> {
  const { currency, creditLimit } = checkPartnerInput(input);
  const now = ctx.now();
  const row: Partner = {
    id: newId('prt'),
    slug: input.slug,
    name: input.name.trim(),
    status: 'active',
    currency,
    balance: 0,
    credit_limit: creditLimit,
    rate_limit_per_minute: null,
    low_balance_threshold: null,
    require_2fa: 0,
    opt_out_scope: 'sender',
    created_at: now,
    updated_at: now,
  };
  const { changes } = await tx.run(
    sql`INSERT INTO partners (id, slug, name, status, currency, balance, credit_limit, rate_limit_per_minute,
          low_balance_threshold, require_2fa, opt_out_scope, created_at, updated_at)
        VALUES (${row.id}, ${row.slug}, ${row.name}, ${row.status}, ${row.currency}, ${row.balance}, ${row.credit_limit},
          ${row.rate_limit_per_minute}, ${row.low_balance_threshold}, ${row.require_2fa}, ${row.opt_out_scope},
          ${row.created_at}, ${row.updated_at})
        ON CONFLICT (slug) DO NOTHING`,
  );
  if (changes === 0) throw new AppError('conflict', `a partner with slug "${input.slug}" already exists`);
  await auditIn(ctx, tx, actor, 'partner.create', 'partner', row.id, { slug: row.slug, name: row.name, currency });
  return row;
}

/** Find a partner by id or slug, in `q` (a caller's transaction, or the store). */
export function findPartner(ctx: CoreCtx, ref: string, q: Queryable = ctx.store): Promise<Partner | undefined> {
  return q.get<Partner>(sql`SELECT * FROM partners WHERE id = ${ref} OR slug = ${ref}`);
}

/** findPartner, or a 404 naming `ref`. */
export function getPartner(ctx: CoreCtx, ref: string, q: Queryable = ctx.store): Promise<Partner> {
  return readPartner(q, ref);
}

/** getPartner in `q` (a caller's transaction, or the store). */
export async function readPartner(q: Queryable, ref: string): Promise<Partner> {
  const p = await q.get<Partner>(sql`SELECT * FROM partners WHERE id = ${ref} OR slug = ${ref}`);
  if (!p) throw notFound('partner', ref);
  return p;
}

export function listPartners(ctx: CoreCtx): Promise<Partner[]> {
  return ctx.store.all<Partner>(sql`SELECT * FROM partners ORDER BY slug`);
}

export interface LowBalance {
  slug: string;
  balance: number;
  threshold: number;
  currency: string;
}

/** Active partners below their low-balance threshold (theirs, else the default), furthest below first. */
export function lowBalancePartners(ctx: CoreCtx): Promise<LowBalance[]> {
  const t = defaultLowBalance(ctx.config);
  return ctx.store.all<LowBalance>(
    sql`SELECT slug, balance, COALESCE(low_balance_threshold, ${t}) AS threshold, currency FROM partners
         WHERE status = 'active' AND balance < COALESCE(low_balance_threshold, ${t})
         ORDER BY balance - COALESCE(low_balance_threshold, ${t}), slug`,
  );
}

async function setStatus(ctx: CoreCtx, ref: string, status: 'active' | 'suspended', actor: string): Promise<Partner> {
  return ctx.store.transaction(async (tx) => {
    const p = await readPartner(tx, ref);
    await tx.run(sql`UPDATE partners SET status = ${status}, updated_at = ${ctx.now()} WHERE id = ${p.id}`);
    await auditIn(ctx, tx, actor, status === 'active' ? 'partner.activate' : 'partner.suspend', 'partner', p.id, {
      from: p.status,
    });
    return readPartner(tx, p.id);
  });
}

export const suspendPartner = (ctx: CoreCtx, ref: string, actor: string) => setStatus(ctx, ref, 'suspended', actor);
export const activatePartner = (ctx: CoreCtx, ref: string, actor: string) => setStatus(ctx, ref, 'active', actor);

export async function setCreditLimit(ctx: CoreCtx, ref: string, creditLimit: number, actor: string): Promise<Partner> {
  if (!Number.isSafeInteger(creditLimit) || creditLimit < 0) {
    throw invalid('credit limit must be zero or positive', [{ field: 'credit_limit', message: 'must be >= 0' }]);
  }
  if (creditLimit > MAX_MONEY) throw invalid(`credit limit can be at most ${formatMoney(MAX_MONEY)}`);
  return ctx.store.transaction(async (tx) => {
    const p = await readPartner(tx, ref);
    await tx.run(sql`UPDATE partners SET credit_limit = ${creditLimit}, updated_at = ${ctx.now()} WHERE id = ${p.id}`);
    await auditIn(ctx, tx, actor, 'partner.set_credit', 'partner', p.id, { from: p.credit_limit, to: creditLimit });
    return readPartner(tx, p.id);
  });
}

export async function setPartnerLimits(
  ctx: CoreCtx,
  ref: string,
  limits: { rateLimitPerMinute?: number | null; lowBalanceThreshold?: number | null },
  actor: string,
): Promise<Partner> {
  if (
    limits.rateLimitPerMinute != null &&
    (!Number.isSafeInteger(limits.rateLimitPerMinute) || limits.rateLimitPerMinute < 1)
  ) {
    throw invalid('rate limit must be a positive whole number of requests per minute');
  }
  if (
    limits.lowBalanceThreshold != null &&
    (!Number.isSafeInteger(limits.lowBalanceThreshold) || limits.lowBalanceThreshold < 0)
  ) {
    throw invalid('low-balance threshold must be zero or positive');
  }
  if (limits.lowBalanceThreshold != null && limits.lowBalanceThreshold > MAX_MONEY)
    throw invalid(`low-balance threshold can be at most ${formatMoney(MAX_MONEY)}`);
  const rate = limits.rateLimitPerMinute;
  const low = limits.lowBalanceThreshold;
  return ctx.store.transaction(async (tx) => {
    const p = await readPartner(tx, ref);
    // Only the limits given change; one left out keeps its value.
    await tx.run(
      sql`UPDATE partners SET
            rate_limit_per_minute = CASE WHEN ${rate !== undefined ? 1 : 0} = 1 THEN ${rate ?? null} ELSE rate_limit_per_minute END,
            low_balance_threshold = CASE WHEN ${low !== undefined ? 1 : 0} = 1 THEN ${low ?? null} ELSE low_balance_threshold END,
            updated_at = ${ctx.now()}
          WHERE id = ${p.id}`,
    );
    await auditIn(ctx, tx, actor, 'partner.set_limits', 'partner', p.id, limits);
    return readPartner(tx, p.id);
  });
}

export function partnerJson(p: Partner) {
  return {
    id: p.id,
    slug: p.slug,
    name: p.name,
    status: p.status,
    currency: p.currency,
    balance: moneyJson(p.balance, p.currency),
    credit_limit: moneyJson(p.credit_limit, p.currency),
    available: moneyJson(p.balance + p.credit_limit, p.currency),
    rate_limit_per_minute: p.rate_limit_per_minute,
    low_balance_threshold: p.low_balance_threshold === null ? null : moneyJson(p.low_balance_threshold, p.currency),
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}
