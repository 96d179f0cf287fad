import type { Row } from '../db/rows.js';
import type { gatewayCircuits } from '../db/schema.js';
import { sql } from '../db/sql.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';

// The gateways' circuit breakers as msgd last published them (src/jobs/circuit-breaker.ts holds
// the live state in msgd's memory): msgctl and the console read this table from their own process.

export type Circuit = Row<typeof gatewayCircuits>;
export type CircuitState = Circuit['state'];

/** Written by msgd on every transition (and once when it starts, for every gateway: closed). */
export async function saveCircuit(ctx: CoreCtx, c: Circuit): Promise<void> {
  await ctx.store.run(
    sql`INSERT INTO gateway_circuits (gateway_id, state, failures, retry_at, reason, opened, changed_at)
        VALUES (${c.gateway_id}, ${c.state}, ${c.failures}, ${c.retry_at}, ${c.reason}, ${c.opened}, ${c.changed_at})
        ON CONFLICT (gateway_id) DO UPDATE SET state = excluded.state, failures = excluded.failures,
          retry_at = excluded.retry_at, reason = excluded.reason, opened = excluded.opened, changed_at = excluded.changed_at`,
  );
}

/** Every circuit starts closed when msgd starts: what an earlier process published is gone. */
export async function clearCircuits(ctx: CoreCtx): Promise<void> {
  await ctx.store.run(sql`DELETE FROM gateway_circuits`);
}

export async function readCircuits(ctx: CoreCtx): Promise<Map<string, Circuit>> {
  const rows = await ctx.store.all<Circuit>(sql`SELECT * FROM gateway_circuits ORDER BY gateway_id`);
  return new Map(rows.map((r) => [r.gateway_id, r]));
}

export function readCircuit(ctx: CoreCtx, gatewayId: string): Promise<Circuit | undefined> {
  return ctx.store.get<Circuit>(sql`SELECT * FROM gateway_circuits WHERE gateway_id = ${gatewayId}`);
}

/** A circuit as msgctl --json and the console show it; a gateway msgd has not called yet is closed. */
export function circuitJson(c: Circuit | undefined) {
  return {
    state: c?.state ?? ('closed' as const),
    failures: c?.failures ?? 0,
    retry_at: c?.retry_at != null ? iso(c.retry_at) : null,
    reason: c?.reason ?? null,
    opened: c?.opened ?? 0,
    changed_at: c ? iso(c.changed_at) : null,
  };
}

/** One line for the console's gateway rows and msgctl gateway show. */
export function circuitText(c: Circuit | undefined, now: number): string {
  if (!c || c.state === 'closed') return c && c.failures > 0 ? `closed (${c.failures} failed in a row)` : 'closed';
  if (c.state === 'half_open') return 'half-open: probing';
  const left = c.retry_at !== null ? Math.max(0, Math.ceil((c.retry_at - now) / 1000)) : 0;
  return `open: probes again in ${left}s${c.reason ? ` (${c.reason})` : ''}`;
}
