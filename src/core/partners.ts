import type { Queryable } from '../db/query.js';
import type { Row } from '../db/rows.js';
import { sql } from '../db/sql.js';
import type { partners } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import type { Config } from '../config/schema.js';
import { formatMoney, MAX_MONEY, moneyJson, parseMoney } from '../lib/money.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';
import { audit, auditIn } from './audit.js';

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

/**
 * Stays on the connection: the demo seed (core/demo.ts) creates its partner inside a synchronous
 * transaction. findPartner and getPartner stay so too (see readPartner).
 */
export function createPartner(ctx: CoreCtx, input: PartnerInput, actor: string): Partner {
  const { currency, creditLimit } = checkPartnerInput(input);
  return ctx.db.sqlite
    .transaction(() => {
      const existing = stmt(ctx.db.sqlite, 'SELECT id FROM partners WHERE slug = ?').get(input.slug);
      if (existing) throw new AppError('conflict', `a partner with slug "${input.slug}" already exists`);
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
      stmt(
        ctx.db.sqlite,
        `INSERT INTO partners (id, slug, name, status, currency, balance, credit_limit, rate_limit_per_minute,
           low_balance_threshold, created_at, updated_at)
         VALUES (@id, @slug, @name, @status, @currency, @balance, @credit_limit, @rate_limit_per_minute,
           @low_balance_threshold, @created_at, @updated_at)`,
      ).run(row);
      audit(ctx, actor, 'partner.create', 'partner', row.id, { slug: row.slug, name: row.name, currency });
      return row;
    })
    .immediate();
}

/** Find a partner by id or slug. */
export function findPartner(ctx: CoreCtx, ref: string): Partner | undefined {
  return stmt<[string, string], Partner>(ctx.db.sqlite, 'SELECT * FROM partners WHERE id = ? OR slug = ?').get(
    ref,
    ref,
  );
}

export function getPartner(ctx: CoreCtx, ref: string): Partner {
  const p = findPartner(ctx, ref);
  if (!p) throw notFound('partner', ref);
  return p;
}

/**
 * getPartner through the store, in `q` (a caller's transaction, or the store). getPartner and
 * findPartner stay on the connection: synchronous transactions of other modules call them.
 */
export async function readPartner(q: Queryable, ref: string): Promise<Partner> {
  const p = await q.get<Partner>(sql`SELECT * FROM partners WHERE id = ${ref} OR slug = ${ref}`);
  if (!p) throw notFound('partner', ref);
  return p;
}

export function listPartners(ctx: CoreCtx): Partner[] {
  return stmt<[], Partner>(ctx.db.sqlite, 'SELECT * FROM partners ORDER BY slug').all();
}

export interface LowBalance {
  slug: string;
  balance: number;
  threshold: number;
  currency: string;
}

/** Active partners below their low-balance threshold (theirs, else the default), furthest below first. */
export function lowBalancePartners(ctx: CoreCtx): LowBalance[] {
  return stmt<[{ t: number | null }], LowBalance>(
    ctx.db.sqlite,
    `SELECT slug, balance, COALESCE(low_balance_threshold, @t) AS threshold, currency FROM partners
      WHERE status = 'active' AND balance < COALESCE(low_balance_threshold, @t) ORDER BY balance - COALESCE(low_balance_threshold, @t), slug`,
  ).all({ t: defaultLowBalance(ctx.config) });
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

/**
 * Stays on the connection: the test helpers' partner set-up (setupPartner, used throughout the
 * suite) calls it synchronously.
 */
export function setPartnerLimits(
  ctx: CoreCtx,
  ref: string,
  limits: { rateLimitPerMinute?: number | null; lowBalanceThreshold?: number | null },
  actor: string,
): Partner {
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
  return ctx.db.sqlite
    .transaction(() => {
      const p = getPartner(ctx, ref);
      // Only the limits given change; one left out keeps its value.
      stmt(
        ctx.db.sqlite,
        `UPDATE partners SET
           rate_limit_per_minute = CASE WHEN ? THEN ? ELSE rate_limit_per_minute END,
           low_balance_threshold = CASE WHEN ? THEN ? ELSE low_balance_threshold END,
           updated_at = ?
         WHERE id = ?`,
      ).run(
        limits.rateLimitPerMinute !== undefined ? 1 : 0,
        limits.rateLimitPerMinute ?? null,
        limits.lowBalanceThreshold !== undefined ? 1 : 0,
        limits.lowBalanceThreshold ?? null,
        ctx.now(),
        p.id,
      );
      audit(ctx, actor, 'partner.set_limits', 'partner', p.id, limits);
      return getPartner(ctx, p.id);
    })
    .immediate();
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
