import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate as migrateSqlite } from '../../src/db/migrate.js';
import { openDb } from '../../src/db/open.js';
import { migratedDatabase, withClient } from './helpers.js';

// What the PostgreSQL schema does beyond its shape: the hand-written triggers behave as
// SQLite's, money columns hold the whole range exactly, and the claim reads its index.

const db = migratedDatabase();

describe('settings_version', () => {
  // One SQL text, run on both stores; the version is read after each statement.
  const steps: Array<[string, string]> = [
    [
      'a partner is added',
      `INSERT INTO partners (id, slug, name, created_at, updated_at) VALUES ('prt_1', 'acme', 'Acme', 1, 1)`,
    ],
    ['its balance moves (a send)', `UPDATE partners SET balance = balance - 5000, updated_at = 2 WHERE id = 'prt_1'`],
    ['its credit limit changes', `UPDATE partners SET credit_limit = 10000 WHERE id = 'prt_1'`],
    [
      'a gateway is added',
      `INSERT INTO gateways (id, kind, name, secrets, created_at, updated_at) VALUES ('gw_1', 'sandbox', 'gw', 'x', 1, 1)`,
    ],
    ['the gateway is disabled', `UPDATE gateways SET status = 'disabled' WHERE id = 'gw_1'`],
    [
      'a channel is added',
      `INSERT INTO channels (id, partner_id, gateway_id, type, sender, created_at, updated_at) VALUES ('ch_1', 'prt_1', 'gw_1', 'sms', '+15550001', 1, 1)`,
    ],
    [
      'two prices are added',
      `INSERT INTO prices (id, channel_type, partner_id, amount, created_at, updated_at) VALUES ('pr_1', 'sms', '', 5000, 1, 1), ('pr_2', 'sms', 'prt_1', 4000, 1, 1)`,
    ],
    ['both prices change', `UPDATE prices SET amount = amount + 1000`],
    ['no price matches', `UPDATE prices SET amount = 1 WHERE id = 'pr_none'`],
    [
      'a token is made',
      `INSERT INTO tokens (id, partner_id, name, scopes, prefix, hash, created_at) VALUES ('tok_1', 'prt_1', 't', '*', 'msgd_', 'h1', 1)`,
    ],
    ['the token is used', `UPDATE tokens SET last_used_at = 5 WHERE id = 'tok_1'`],
    ['the token is revoked', `UPDATE tokens SET revoked_at = 6 WHERE id = 'tok_1'`],
    ['the token is deleted', `DELETE FROM tokens`],
    ['the prices are deleted', `DELETE FROM prices`],
    ['the channel is deleted', `DELETE FROM channels`],
    ['the gateway is deleted', `DELETE FROM gateways`],
    ['the partner is touched', `UPDATE partners SET updated_at = 9`],
    ['the partner is deleted', `DELETE FROM partners`],
  ];
  const VERSION = `SELECT value FROM meta WHERE key = 'settings_version'`;
  const dir = mkdtempSync(join(tmpdir(), 'msgd-triggers-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('moves on PostgreSQL exactly as on SQLite', async () => {
    const sqlite = openDb(join(dir, 'msgd.db'));
    const onSqlite: string[] = [];
    try {
      migrateSqlite(sqlite);
      onSqlite.push(String((sqlite.sqlite.prepare(VERSION).get() as { value: string }).value));
      for (const [, sql] of steps) {
        sqlite.sqlite.exec(sql);
        onSqlite.push(String((sqlite.sqlite.prepare(VERSION).get() as { value: string }).value));
      }
    } finally {
      sqlite.close();
    }
    const onPostgres = await withClient(db.url, async (c) => {
      const seen = [(await c.query<{ value: string }>(VERSION)).rows[0].value];
      for (const [, sql] of steps) {
        await c.query(sql);
        seen.push((await c.query<{ value: string }>(VERSION)).rows[0].value);
      }
      return seen;
    });

    const moves = (v: string[]) => steps.map(([what], i) => `${what}: +${Number(v[i + 1]) - Number(v[i])}`);
    expect(moves(onPostgres)).toEqual(moves(onSqlite));
    // What that is: row by row, and not for a send's debit or a token's use.
    expect(moves(onPostgres)).toEqual([
      'a partner is added: +1',
      'its balance moves (a send): +0',
      'its credit limit changes: +1',
      'a gateway is added: +1',
      'the gateway is disabled: +1',
      'a channel is added: +1',
      'two prices are added: +2',
      'both prices change: +2',
      'no price matches: +0',
      'a token is made: +1',
      'the token is used: +0',
      'the token is revoked: +1',
      'the token is deleted: +1',
      'the prices are deleted: +2',
      'the channel is deleted: +1',
      'the gateway is deleted: +1',
      'the partner is touched: +0',
      'the partner is deleted: +1',
    ]);
  });
});

describe('money', () => {
  it('holds ±10^15 micro-units, and sums past 2^53 exactly', async () => {
    const max = '1000000000000000';
    await withClient(db.url, async (c) => {
      await c.query(
        `INSERT INTO partners (id, slug, name, balance, credit_limit, created_at, updated_at)
         VALUES ('prt_rich', 'rich', 'Rich', $1, $1, 1, 1), ('prt_poor', 'poor', 'Poor', $2, 0, 1, 1)`,
        [max, `-${max}`],
      );
      const partners = await c.query<{ id: string; balance: string; credit_limit: string }>(
        `SELECT id, balance::text AS balance, credit_limit::text AS credit_limit FROM partners
          WHERE id IN ('prt_rich', 'prt_poor') ORDER BY id`,
      );
      expect(partners.rows).toEqual([
        { id: 'prt_poor', balance: `-${max}`, credit_limit: '0' },
        { id: 'prt_rich', balance: max, credit_limit: max },
      ]);

      // Ten top-ups of the largest amount and one of a micro-unit: 10^16 + 1, which a float
      // (past 2^53 = 9,007,199,254,740,992) would round to 10^16.
      await c.query(
        `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, actor, created_at)
         SELECT 'prt_rich', 'topup', $1::bigint, $1::bigint, 'operator:test', g FROM generate_series(1, 10) g
         UNION ALL SELECT 'prt_rich', 'topup', 1, 1, 'operator:test', 11`,
        [max],
      );
      const sum = await c.query<{ total: string }>(
        `SELECT sum(amount)::text AS total FROM ledger_entries WHERE partner_id = 'prt_rich'`,
      );
      expect(sum.rows[0].total).toBe('10000000000000001');
      expect(BigInt(sum.rows[0].total) > BigInt(Number.MAX_SAFE_INTEGER)).toBe(true);
    });
  });
});

describe('the claim', () => {
  const plan = (c: Parameters<Parameters<typeof withClient>[1]>[0], sql: string) =>
    c.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`).then((r) => r.rows.map((x) => x['QUERY PLAN']).join('\n'));

  it('reads its partial index in claim order, by kind or not', async () => {
    await withClient(db.url, async (c) => {
      // A backlog: runnable jobs of two kinds, some dead, a few running.
      await c.query(
        `INSERT INTO jobs (kind, payload, state, priority, run_at, max_attempts, locked_by, locked_until, created_at, updated_at)
         SELECT CASE WHEN g % 2 = 0 THEN 'dispatch' ELSE 'webhook' END, '{}',
                CASE WHEN g % 50 = 0 THEN 'running' WHEN g % 10 = 0 THEN 'dead' WHEN g % 7 = 0 THEN 'retry' ELSE 'available' END,
                g % 3, g, 5, CASE WHEN g % 50 = 0 THEN 'w0' END, CASE WHEN g % 50 = 0 THEN g + 30000 END, g, g
           FROM generate_series(1, 20000) g`,
      );
      await c.query('ANALYZE jobs');
      const claim = (kind: string) => `WITH c AS (
          SELECT id FROM jobs
           WHERE state IN ('available', 'retry') AND run_at <= 15000${kind}
           ORDER BY priority, run_at, id
           LIMIT 64
           FOR UPDATE SKIP LOCKED)
        UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, locked_by = 'w1',
               locked_until = (extract(epoch from clock_timestamp()) * 1000)::bigint + 30000,
               updated_at = (extract(epoch from clock_timestamp()) * 1000)::bigint
          FROM c WHERE j.id = c.id
        RETURNING j.*`;
      const any = await plan(c, claim(''));
      expect(any).toMatch(/Index Scan using jobs_claim on jobs/);
      expect(any).not.toMatch(/Sort/);
      const byKind = await plan(c, claim(` AND kind = 'dispatch'`));
      expect(byKind).toMatch(/Index Scan using jobs_kind_claim on jobs/);
      expect(byKind).not.toMatch(/Sort/);
      // The lifeline's running jobs come off jobs_state, not a scan of the backlog.
      const lifeline = await plan(c, `SELECT id FROM jobs WHERE state = 'running' AND locked_until < 40000`);
      expect(lifeline).toMatch(/jobs_state/);
    });
  });
});

describe('storage parameters', () => {
  it('vacuum the queue early and leave room for balance updates', async () => {
    const { rows } = await withClient(db.url, (c) =>
      c.query<{ relname: string; reloptions: string[] }>(
        `SELECT relname, reloptions FROM pg_class
          WHERE relname IN ('jobs', 'partners', 'messages', 'events', 'webhook_deliveries') ORDER BY relname`,
      ),
    );
    expect(Object.fromEntries(rows.map((r) => [r.relname, r.reloptions]))).toEqual({
      events: ['autovacuum_vacuum_scale_factor=0.05'],
      jobs: [
        'autovacuum_vacuum_scale_factor=0.01',
        'autovacuum_vacuum_insert_scale_factor=0.01',
        'autovacuum_analyze_scale_factor=0.02',
      ],
      messages: ['autovacuum_vacuum_scale_factor=0.05'],
      partners: ['fillfactor=50'],
      webhook_deliveries: ['autovacuum_vacuum_scale_factor=0.05'],
    });
  });
});
