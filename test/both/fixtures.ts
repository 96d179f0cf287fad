import type { StoreCtx } from './helpers.js';

// Rows the console tests start from, inserted as raw SQL both stores take.

/** A partner row with the defaults a new partner has. */
export async function insertPartner(
  t: StoreCtx,
  p: { id: string; slug: string; name?: string; status?: 'active' | 'suspended'; require2fa?: 0 | 1 },
): Promise<void> {
  await t.exec(
    `INSERT INTO partners (id, slug, name, status, currency, balance, credit_limit, rate_limit_per_minute,
       low_balance_threshold, require_2fa, opt_out_scope, created_at, updated_at)
     VALUES ('${p.id}', '${p.slug}', '${p.name ?? p.slug}', '${p.status ?? 'active'}', 'USD', 0, 0, NULL, NULL,
       ${p.require2fa ?? 0}, 'sender', 0, 0)`,
  );
}
