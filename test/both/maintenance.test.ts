import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { builtinTasks, type MaintenanceDeps } from '../../src/jobs/maintenance.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The upkeep tasks msgd's cron runs, on both stores: idempotency keys past their TTL and
// provider event keys past a provider's retry window go; younger ones stay.

const HOUR = 3_600_000;
const NOW = Date.UTC(2026, 0, 10);

let t: StoreCtx;
let rt: MaintenanceDeps;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = NOW;
  rt = { ctx: t.ctx, config: t.ctx.config, logger: pino({ level: 'silent' }) };
  await insertPartner(t, { id: 'p1', slug: 'one' });
});
afterEach(() => t.close());

const task = (name: string) => {
  const found = builtinTasks(t.dialect).find((x) => x.name === name);
  if (!found) throw new Error(`no task ${name}`);
  return found;
};

describe('maintenance tasks', () => {
  it('expires idempotency keys older than idempotency.ttlHours', async () => {
    const ttl = t.ctx.config.idempotency.ttlHours;
    const key = (k: string, at: number) => `('p1', '${k}', 'h', 'accepted', '{}', ${at})`;
    await t.exec(`INSERT INTO idempotency_keys (partner_id, key, request_hash, outcome, response_body, created_at) VALUES
      ${key('old', NOW - ttl * HOUR - 1)}, ${key('edge', NOW - ttl * HOUR)}, ${key('new', NOW - HOUR)}`);
    expect(await task('idempotency-expire').run(rt)).toEqual({ deleted: 1 });
    const left = await t.ctx.store.all<{ key: string }>(sql`SELECT key FROM idempotency_keys ORDER BY key`);
    expect(left.map((r) => r.key)).toEqual(['edge', 'new']);
    expect(await task('idempotency-expire').run(rt)).toEqual({ deleted: 0 });
  });

  it('expires provider event keys older than eight days', async () => {
    await t.exec(`INSERT INTO provider_event_keys (key, created_at) VALUES
      ('old', ${NOW - 8 * 24 * HOUR - 1}), ('week', ${NOW - 7 * 24 * HOUR}), ('new', ${NOW})`);
    expect(await task('provider-event-keys-expire').run(rt)).toEqual({ deleted: 1 });
    const left = await t.ctx.store.all<{ key: string }>(sql`SELECT key FROM provider_event_keys ORDER BY key`);
    expect(left.map((r) => r.key)).toEqual(['new', 'week']);
  });

  it('optimizes SQLite nightly; PostgreSQL has no such task', () => {
    expect(builtinTasks(t.dialect).some((x) => x.name === 'sqlite-optimize')).toBe(t.dialect === 'sqlite');
  });
});
