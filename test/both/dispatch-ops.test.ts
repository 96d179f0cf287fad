import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Circuit, clearCircuits, readCircuit, readCircuits, saveCircuit } from '../../src/core/circuits.js';
import { HELD_AFTER_RESTORE } from '../../src/core/message-status.js';
import { cancelScheduled } from '../../src/core/scheduled.js';
import { sql } from '../../src/db/sql.js';
import { retryDeadJobs, whyUnretryable } from '../../src/jobs/dead-jobs.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { countHeldMessages, holdRestoredDispatches, releaseHeldDispatches } from '../../src/jobs/restore-hold.js';
import { JobQueue } from '../../src/queue/queue.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { raceOnRow } from './race.js';
import { message, partner } from './read-fixtures.js';

// What the operator and the partner see of dispatch's side jobs, on both stores: circuits as
// msgd published them, a scheduled message canceled, a restore's hold and release, and the
// retry of dead dispatch jobs.

let t: StoreCtx;
let queue: JobQueue;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store, { now: () => t.clock.now });
  await partner(t, 'prt_a');
  await t.exec(`UPDATE partners SET balance = 50000 WHERE id = 'prt_a'`);
});
afterEach(() => t.close());

const state = async (id: string) =>
  (await t.ctx.store.get<{ status: string; error_code: string | null; dispatch_uncertain: number; refunded: number }>(
    sql`SELECT status, error_code, dispatch_uncertain, refunded FROM messages WHERE id = ${id}`,
  ))!;
const balance = async () =>
  (await t.ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = 'prt_a'`))!.balance;
const enqueue = (messageId: string) =>
  t.ctx.store.transaction((tx) => queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: messageId } }));

describe('gateway circuits', () => {
  const circuit = (over: Partial<Circuit>): Circuit => ({
    gateway_id: 'gw_a',
    state: 'closed',
    failures: 0,
    retry_at: null,
    reason: null,
    opened: 0,
    changed_at: 1_000,
    ...over,
  });

  it('keeps the latest state published per gateway, and starts empty again', async () => {
    expect(await readCircuit(t.ctx, 'gw_a')).toBeUndefined();
    await saveCircuit(t.ctx, circuit({ failures: 2 }));
    await saveCircuit(
      t.ctx,
      circuit({ state: 'open', failures: 5, retry_at: 31_000, reason: '5 failed calls in a row', opened: 1 }),
    );
    await saveCircuit(t.ctx, circuit({ gateway_id: 'gw_b', state: 'half_open', changed_at: 2_000 }));
    expect(await readCircuit(t.ctx, 'gw_a')).toEqual(
      circuit({ state: 'open', failures: 5, retry_at: 31_000, reason: '5 failed calls in a row', opened: 1 }),
    );
    const all = await readCircuits(t.ctx);
    expect([...all.keys()]).toEqual(['gw_a', 'gw_b']);
    expect(all.get('gw_b')?.state).toBe('half_open');
    await clearCircuits(t.ctx);
    expect((await readCircuits(t.ctx)).size).toBe(0);
  });
});

describe('cancelScheduled', () => {
  it('cancels a scheduled message: refunded, told, audited; then refuses a second cancel', async () => {
    await message(t, { id: 'msg_s', partner: 'prt_a', channel: 'sms', status: 'scheduled', at: 1 });
    t.clock.now = 5_000;
    const m = await cancelScheduled(t.ctx, 'prt_a', 'msg_s', 'token:tok_1');
    expect(m).toMatchObject({ id: 'msg_s', status: 'canceled', refunded: 1 });
    expect(await balance()).toBe(57_500);
    const events = await t.ctx.store.all<{ type: string }>(sql`SELECT type FROM events WHERE partner_id = 'prt_a'`);
    expect(events.map((e) => e.type)).toEqual(['message.canceled']);
    const audit = await t.ctx.store.all<{ actor: string; action: string; target_id: string }>(
      sql`SELECT actor, action, target_id FROM audit_log`,
    );
    expect(audit).toEqual([{ actor: 'token:tok_1', action: 'message.cancel', target_id: 'msg_s' }]);
    await expect(cancelScheduled(t.ctx, 'prt_a', 'msg_s', 'x')).rejects.toMatchObject({
      code: 'message_not_cancelable',
    });
    expect(await balance()).toBe(57_500);
  });

  it('lets one of two cancels at once win: one refund, one 409', async () => {
    await message(t, { id: 'msg_s', partner: 'prt_a', channel: 'sms', status: 'scheduled', at: 1 });
    const outcomes = await raceOnRow(t, sql`SELECT id FROM messages WHERE id = 'msg_s' FOR UPDATE`, [
      () => cancelScheduled(t.ctx, 'prt_a', 'msg_s', 'token:a'),
      () => cancelScheduled(t.ctx, 'prt_a', 'msg_s', 'token:b'),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: 'message_not_cancelable' });
    expect(await balance()).toBe(57_500);
    const refunds = await t.ctx.store.all(sql`SELECT id FROM ledger_entries WHERE kind = 'refund'`);
    expect(refunds).toHaveLength(1);
  });

  it("answers not found for another partner's message or a missing one, changing nothing", async () => {
    await partner(t, 'prt_b');
    await message(t, { id: 'msg_s', partner: 'prt_a', channel: 'sms', status: 'scheduled', at: 1 });
    await expect(cancelScheduled(t.ctx, 'prt_b', 'msg_s', 'x')).rejects.toMatchObject({ code: 'not_found' });
    await expect(cancelScheduled(t.ctx, null, 'msg_nope', 'x')).rejects.toMatchObject({ code: 'not_found' });
    expect((await state('msg_s')).status).toBe('scheduled');
  });
});

describe('restore hold and release', () => {
  it('holds every message waiting for dispatch until released, then sends it flagged', async () => {
    await message(t, { id: 'msg_q', partner: 'prt_a', channel: 'sms', status: 'queued', at: 1 });
    await message(t, { id: 'msg_s', partner: 'prt_a', channel: 'sms', status: 'sending', at: 2 });
    await message(t, { id: 'msg_d', partner: 'prt_a', channel: 'sms', status: 'delivered', at: 3 });
    for (const id of ['msg_q', 'msg_s', 'msg_d']) await enqueue(id);

    expect(await holdRestoredDispatches(t.ctx, queue)).toBe(2);
    expect(await countHeldMessages(t.ctx)).toBe(2);
    expect(await state('msg_s')).toMatchObject({ status: 'queued', error_code: HELD_AFTER_RESTORE });
    expect((await state('msg_d')).status).toBe('delivered');
    // No claim takes a held job.
    expect(await queue.claim('w1', 10)).toEqual([]);

    expect(await releaseHeldDispatches(t.ctx, queue)).toBe(2);
    expect(await countHeldMessages(t.ctx)).toBe(0);
    expect(await state('msg_q')).toMatchObject({ status: 'queued', error_code: null, dispatch_uncertain: 1 });
    const claimed = await queue.claim('w1', 10);
    expect(claimed.map((j) => (j.payload as { message_id: string }).message_id).sort()).toEqual([
      'msg_d',
      'msg_q',
      'msg_s',
    ]);
    expect(await releaseHeldDispatches(t.ctx, queue)).toBe(0);
  });
});

describe('dead dispatch jobs', () => {
  async function deadJob(messageId: string) {
    await enqueue(messageId);
    const [job] = await queue.claim('w1', 1);
    await queue.fail(job.id, 'gave up', { lease: { workerId: 'w1', attempts: job.attempts } });
    return job;
  }

  it('retries a job whose message still waits, and skips one whose message was settled', async () => {
    await message(t, { id: 'msg_w', partner: 'prt_a', channel: 'sms', status: 'queued', at: 1 });
    await message(t, { id: 'msg_f', partner: 'prt_a', channel: 'sms', status: 'failed', errorCode: 'x', at: 2 });
    const waiting = await deadJob('msg_w');
    const settled = await deadJob('msg_f');
    expect(await whyUnretryable(t.ctx, waiting)).toBeNull();
    expect(await whyUnretryable(t.ctx, settled)).toBe(
      'message msg_f is already failed (x), charged: the partner sends it again as a new message',
    );
    await expect(retryDeadJobs(t.ctx, settled.id)).rejects.toMatchObject({ code: 'conflict' });
    const out = await retryDeadJobs(t.ctx, 'all');
    expect(out).toEqual({
      retried: 1,
      skipped: [
        {
          id: settled.id,
          reason: 'message msg_f is already failed (x), charged: the partner sends it again as a new message',
        },
      ],
    });
    expect((await queue.get(waiting.id))?.state).toBe('available');
    expect((await queue.get(settled.id))?.state).toBe('dead');
    await expect(retryDeadJobs(t.ctx, 999_999)).rejects.toMatchObject({ code: 'not_found' });
  });
});
