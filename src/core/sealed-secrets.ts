import { sql, type Sql } from '../db/sql.js';
import type { CoreCtx } from './context.js';
import { SecretDecryptError, unseal } from './secrets.js';

// Every column that holds a secret sealed with the master key, by kind. All of them are sealed
// with the one key, so a key that opens none of a kind's secrets is not the key they were
// written with: msgctl doctor lists the rows that do not open, and msgd refuses to start when a
// kind has secrets and none opens (else every dispatch, delivery or two-factor login would fail
// one by one).

export type SealedKind = 'gateway' | 'webhook' | 'totp';

interface SealedTable {
  kind: SealedKind;
  /** Each row's id, then its sealed columns (null where the row has none). */
  query: Sql;
}

const SEALED: readonly SealedTable[] = [
  { kind: 'gateway', query: sql`SELECT id, secrets FROM gateways ORDER BY id` },
  // The previous secret too: it signs during a rotation's grace period.
  { kind: 'webhook', query: sql`SELECT id, secret, previous_secret FROM webhook_endpoints ORDER BY id` },
  { kind: 'totp', query: sql`SELECT id, totp_secret FROM users WHERE totp_secret IS NOT NULL ORDER BY id` },
];

/** What a kind's rows are called, one and many. */
export const SEALED_ROWS: Record<SealedKind, [string, string]> = {
  gateway: ['gateway', 'gateways'],
  webhook: ['webhook endpoint', 'webhook endpoints'],
  totp: ['console user with two-factor', 'console users with two-factor'],
};

type SealedRow = { id: string } & Record<string, string | null>;

function opens(key: Buffer, row: SealedRow): boolean {
  for (const [column, value] of Object.entries(row)) {
    if (column === 'id' || value === null) continue;
    try {
      unseal(key, value);
    } catch (e) {
      if (e instanceof SecretDecryptError) return false;
      throw e;
    }
  }
  return true;
}

export interface SealedKindResult {
  kind: SealedKind;
  /** Rows holding a secret of this kind. */
  rows: number;
  /** Ids of the rows with a secret this key does not open (never their values). */
  failed: string[];
}

/** Opens every stored secret with ctx's master key (msgctl doctor), on either store. */
export async function verifySealedSecrets(ctx: CoreCtx): Promise<SealedKindResult[]> {
  const out: SealedKindResult[] = [];
  for (const t of SEALED) {
    const rows = await ctx.store.all<SealedRow>(t.query);
    const failed = rows.filter((row) => !opens(ctx.masterKey, row)).map((row) => row.id);
    out.push({ kind: t.kind, rows: rows.length, failed });
  }
  return out;
}

/**
 * The kinds with stored secrets none of which opens with ctx's master key (msgd's start, on
 * either store). With the right key the first row of a kind opens; only a wrong key tries them all.
 */
export async function kindsTheKeyOpensNone(ctx: CoreCtx): Promise<{ kind: SealedKind; rows: number }[]> {
  const out: { kind: SealedKind; rows: number }[] = [];
  for (const t of SEALED) {
    const rows = await ctx.store.all<SealedRow>(t.query);
    if (rows.length > 0 && !rows.some((row) => opens(ctx.masterKey, row)))
      out.push({ kind: t.kind, rows: rows.length });
  }
  return out;
}
