import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topup, verifyLedger } from '../../src/core/ledger.js';
import { createPartner, getPartner, suspendPartner, activatePartner } from '../../src/core/partners.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// Two OS processes, each with its own connection to the same store (SQLite's file, or the
// PostgreSQL database), race to debit one partner. The conditional UPDATE of the debit must
// let exactly as many debits through as balance + credit covers, whatever the interleaving.

const WORKER = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'debit-worker.mjs');
const UNIT = 10_000; // 0.01
const TOPUP = 4_000_000; // 4.00
const CREDIT = 2_000_000; // 2.00
const N = (TOPUP + CREDIT) / UNIT; // 600

let t: StoreCtx;
beforeAll(async () => {
  t = await openStoreCtx();
});
afterAll(() => t.close());

function startWorker(target: string, partnerId: string, tag: string) {
  const child = spawn(process.execPath, [
    WORKER,
    target,
    partnerId,
    String(UNIT),
    tag,
  ]) as ChildProcessWithoutNullStreams;
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.startsWith('ready\n')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`worker ${tag} exited ${code} before ready: ${err}`)));
  });
  const done = new Promise<{ ok: number; refused: number; busy: number }>((resolve, reject) => {
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`worker ${tag} exited ${code}: ${err}`));
      resolve(JSON.parse(out.split('\n').filter(Boolean).pop()!));
    });
  });
  return { child, ready, done };
}

describe('concurrent debits from two processes', () => {
  it(`let exactly ${N} debits through and never overspend`, async () => {
    const p = await createPartner(t.ctx, { slug: 'racer', name: 'Racer', creditLimit: CREDIT }, 'test');
    await topup(t.ctx, p.id, TOPUP, 'funds', 'test');

    // The workers are the only writers during the race.
    const workers = ['a', 'b'].map((tag) => startWorker(t.target, p.id, tag));
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.child.stdin.end('go\n');
    const results = await Promise.all(workers.map((w) => w.done));

    expect(results.reduce((n, r) => n + r.ok, 0)).toBe(N);
    expect(results.every((r) => r.refused === 1)).toBe(true);
    // Both really raced: each got a share.
    expect(results.every((r) => r.ok > 0)).toBe(true);

    expect((await getPartner(t.ctx, p.id)).balance).toBe(-CREDIT);
    const debits = await t.ctx.store.all<{ amount: number; balance_after: number; actor: string }>(
      sql`SELECT amount, balance_after, actor FROM ledger_entries WHERE kind = 'debit' ORDER BY id`,
    );
    expect(debits).toHaveLength(N);
    expect(Math.min(...debits.map((d) => d.balance_after))).toBe(-CREDIT);
    // Entries are in commit order: each balance_after is exactly one unit below the last.
    debits.forEach((d, i) => expect(d.balance_after).toBe(TOPUP - (i + 1) * UNIT));
    expect(new Set(debits.map((d) => d.actor))).toEqual(new Set(['worker:a', 'worker:b']));
    expect(await verifyLedger(t.ctx)).toMatchObject({ ok: true });
  });
});

describe('msgctl beside a busy msgd', () => {
  // An operator's top-up or suspend reads the partner, then writes. In a deferred transaction
  // a commit by msgd between the two makes SQLite refuse the write at once (SQLITE_BUSY, its
  // busy timeout never consulted); msgctl's writes take the write lock first and wait for it.
  // On PostgreSQL they wait for the partner's row lock.
  it('top-ups and suspensions wait for the lock instead of failing', async () => {
    const o = await openStoreCtx();
    try {
      const p = await createPartner(o.ctx, { slug: 'busy', name: 'Busy' }, 'test');
      const funds = 1_000 * UNIT;
      await topup(o.ctx, p.id, funds, 'funds', 'test');
      const w = startWorker(o.target, p.id, 'msgd');
      await w.ready;
      w.child.stdin.end('go\n');
      let ops = 0;
      const failures: string[] = [];
      let exited = false;
      void w.done.finally(() => (exited = true)).catch(() => {});
      const debits = async () =>
        (await o.ctx.store.get<{ n: number }>(
          sql`SELECT CAST(count(*) AS BIGINT) AS n FROM ledger_entries WHERE kind = 'debit' AND actor = 'worker:msgd'`,
        ))!.n;
      const debitsBefore = await debits();
      // Counted, not timed: the operator keeps writing until it has done 150 operations and
      // the worker has committed 50 debits in between, however slow the machine is.
      while (ops < 150 || (await debits()) - debitsBefore < 50) {
        if (exited) throw new Error(`the worker ran out of funds after ${ops} operations`);
        try {
          if (ops % 3 === 0) await topup(o.ctx, p.id, UNIT, 'top-up', 'operator');
          else if (ops % 3 === 1) await suspendPartner(o.ctx, p.id, 'operator');
          else await activatePartner(o.ctx, p.id, 'operator');
        } catch (e: any) {
          failures.push(e?.code ?? String(e));
        }
        ops++;
        await new Promise((r) => setTimeout(r, 1));
      }
      const debitsDuring = (await debits()) - debitsBefore;
      await activatePartner(o.ctx, p.id, 'operator');
      const r = await w.done;
      expect(failures).toEqual([]);
      // They really interleaved: the worker debited while the operator wrote.
      expect(debitsDuring).toBeGreaterThanOrEqual(50);
      expect(r.ok).toBeGreaterThan(50);
      expect(ops).toBeGreaterThanOrEqual(150);
      expect(await verifyLedger(o.ctx)).toMatchObject({ ok: true });
    } finally {
      await o.close();
    }
  }, 30_000);
});
