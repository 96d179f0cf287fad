import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/db/open.js';
import type { Batcher, BatchResult } from '../../src/db/query.js';
import { store } from '../../src/db/query.js';
import { verifyLedger } from '../../src/core/ledger.js';
import type { MessageRow } from '../../src/core/messages.js';
import { accept, acceptStats, type Preflight } from '../../src/core/send.js';
import { dispatchEnqueuer } from '../../src/jobs/dispatch.js';
import { JobQueue } from '../../src/queue/queue.js';
import { parseMoney } from '../../src/lib/money.js';
import { quote } from '../../src/core/prices.js';
import { connect, setupPartner } from '../helpers/server.js';
import { openTestCtx } from '../helpers/ctx.js';

// The store's group commit on SQLite (src/db/query.ts, src/db/batch.ts): work submitted in one
// event-loop turn shares one transaction; a piece that fails takes back only its own writes;
// every promise settles after the shared COMMIT, and says the truth about it.
// SQLite's own: savepoints and total_changes() on its one connection, and the accept batch on
// it; group commit on both stores is in test/both/batcher.test.ts.

let dir: string;
let db: Db;
afterEach(() => {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Piece = () => unknown;

/** A batcher whose items are pieces run synchronously on the connection, as webhook intake's are. */
function setup(): Batcher<Piece, unknown> {
  dir = mkdtempSync(join(tmpdir(), 'msgd-gc-'));
  db = openDb(join(dir, 'gc.db'));
  db.sqlite.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)');
  // A piece that throws throws the batch: the batcher runs its pieces again one by one.
  return store(db).batcher<Piece, unknown>('pieces', async (_tx, pieces) =>
    pieces.map((fn): BatchResult<unknown> => ({ ok: true, value: fn() })),
  );
}

const rows = () => (db.sqlite.prepare('SELECT k FROM t ORDER BY k').all() as { k: string }[]).map((r) => r.k);
const put =
  (k: string, bytes = 10) =>
  () =>
    db.sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run(k, Buffer.alloc(bytes));

describe('the store batcher on SQLite', () => {
  it('commits a turn in one transaction; a failing piece rolls back only itself', async () => {
    const gc = setup();
    const results = await Promise.allSettled([gc.run(put('a')), gc.run(put('a')), gc.run(put('b'))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(rows()).toEqual(['a', 'b']);
    expect(gc.stats.batches).toBe(1);
    // One rerun without savepoints: the failing piece wrote nothing before its statement failed.
    expect(gc.stats.reruns).toBe(1);
  });

  it('still tells a failing piece that wrote nothing from one that did, when other code reads total_changes() too', async () => {
    const gc = setup();
    // The connection's prepare() shares one statement per SQL text with every caller.
    db.sqlite.prepare('SELECT total_changes()').get();
    let runs = 0;
    const results = await Promise.allSettled([
      gc.run(put('a')),
      gc.run(() => {
        runs++;
        return put('a')();
      }),
      gc.run(put('b')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(rows()).toEqual(['a', 'b']);
    // The duplicate changed no row: the rerun needed no third, savepointed run.
    expect(runs).toBe(2);
  });

  it('a piece that fails after some of its writes is taken back alone, and the rest of its batch commits', async () => {
    const gc = setup();
    let runs = 0;
    const halfway = () => {
      runs++;
      put('c-1')();
      put('a')(); // already written by the first piece: UNIQUE fails after c-1 is in
    };
    const results = await Promise.allSettled([gc.run(put('a')), gc.run(halfway), gc.run(put('b')), gc.run(put('d'))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.code).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
    expect(rows()).toEqual(['a', 'b', 'd']);
    expect(gc.stats.batches).toBe(1);
    // The batch as a whole, then piece by piece without savepoints (rolled back when the piece
    // failed midway), then each piece in its own savepoint. Pieces must be safe to run again.
    expect(gc.stats.reruns).toBe(1);
    expect(runs).toBe(3);
    // The next batch goes the fast way again.
    await gc.run(put('e'));
    expect(gc.stats.reruns).toBe(1);
    expect(rows()).toEqual(['a', 'b', 'd', 'e']);
  });

  it('a piece that throws after an UPDATE that changed a row is taken back too', async () => {
    const gc = setup();
    db.sqlite.prepare("INSERT INTO t (k, v) VALUES ('x', X'00')").run();
    const results = await Promise.allSettled([
      gc.run(() => {
        db.sqlite.prepare("UPDATE t SET k = 'y' WHERE k = 'x'").run();
        throw new Error('changed my mind');
      }),
      gc.run(put('z')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(rows()).toEqual(['x', 'z']);
    expect(gc.stats.reruns).toBe(1);
  });

  it('when SQLite rolls back the whole transaction (disk full) mid-batch, every piece is rejected and none is durable', async () => {
    const gc = setup();
    const pages = (db.sqlite.pragma('page_count', { simple: true }) as number) + 4;
    db.sqlite.pragma(`max_page_count = ${pages}`);
    const results = await Promise.allSettled([
      gc.run(put('small-1')),
      gc.run(put('huge', 1024 * 1024)),
      gc.run(put('small-2')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(rows()).toEqual([]);
    expect(db.sqlite.inTransaction).toBe(false);
    // The connection is usable again once space allows.
    db.sqlite.pragma('max_page_count = 1073741823');
    await gc.run(put('after'));
    expect(rows()).toEqual(['after']);
  });
});

describe('accepting sends in a batch that must run again', () => {
  it('a request that fails midway costs nothing; the others are charged once, with one message and one job each', async () => {
    const t = openTestCtx();
    try {
      const { ctx } = t;
      const p = await setupPartner(ctx, { balance: '0.03', prices: { sms: '0.01' } });
      const { channel } = await connect(ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
      const deps = {
        ctx,
        enqueueDispatch: dispatchEnqueuer(new JobQueue(ctx.db)),
        defaultLowBalance: null,
        idempotencyTtlMs: 86_400_000,
      };
      const pre: Preflight = {
        channel: {
          id: channel.id,
          type: 'sms',
          gatewayId: channel.gateway_id,
          sender: '+15550001111',
          enforceWindow: false,
        },
        partner: { lowBalanceThreshold: null },
        unitPrice: parseMoney('0.01'),
      };
      const send = (to: string, key?: string, render = (m: MessageRow) => ({ id: m.id, status: m.status })) =>
        accept(
          deps,
          {
            principal: { partnerId: p.partnerId, tokenId: 'tok_test', scopes: ['*'] } as any,
            preflight: pre,
            to,
            content: { kind: 'text', text: 'hi' },
            quote: quote(pre.unitPrice, 'sms', 'hi'),
          },
          { idempotency: key ? { key, hash: `h-${key}` } : undefined, render },
        );
      const results = await Promise.allSettled([
        send('+14155550101', 'k1'),
        send('+14155550101', 'k1'), // the same key in the same batch: replayed, not charged
        // Debited, message and job written, then its response cannot be built: it must leave nothing.
        send('+14155550102', undefined, () => {
          throw new Error('cannot answer');
        }),
        send('+14155550103'),
        send('+14155550104'),
        send('+14155550105'), // past the funds: 402
      ]);
      expect(results.map((r) => r.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
        'fulfilled',
        'rejected',
      ]);
      expect((results[1] as PromiseFulfilledResult<any>).value.kind).toBe('replay');
      expect((results[5] as PromiseRejectedResult).reason.code).toBe('insufficient_balance');
      // The batch ran again send by send (the store's batcher, src/db/batch.ts).
      expect(acceptStats(deps).reruns).toBe(1);
      const db = ctx.db.sqlite;
      const messages = db.prepare('SELECT id, "to" FROM messages ORDER BY "to"').all() as { id: string; to: string }[];
      expect(messages.map((m) => m.to)).toEqual(['+14155550101', '+14155550103', '+14155550104']);
      const jobs = (
        db.prepare(`SELECT payload FROM jobs WHERE kind = 'message.dispatch'`).all() as { payload: string }[]
      ).map((j) => JSON.parse(j.payload).message_id);
      expect(jobs.sort()).toEqual(messages.map((m) => m.id).sort());
      const debits = db.prepare(`SELECT message_id FROM ledger_entries WHERE kind = 'debit'`).all() as {
        message_id: string;
      }[];
      expect(debits.map((d) => d.message_id).sort()).toEqual(messages.map((m) => m.id).sort());
      expect(db.prepare('SELECT balance FROM partners WHERE id = ?').get(p.partnerId)).toEqual({ balance: 0 });
      expect((await verifyLedger(ctx)).ok).toBe(true);
    } finally {
      t.close();
    }
  });
});
