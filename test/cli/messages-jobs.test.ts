import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getMessageRowIn } from '../../src/core/messages.js';
import { applyStatusIn, flagUncertainIn } from '../../src/core/message-status.js';
import { sql } from '../../src/db/sql.js';
import { queueOf } from '../../src/queue/of-ctx.js';
import type { EnqueueSpec } from '../../src/queue/queue.js';
import { connect, outboundSms, setupPartner } from '../helpers/server.js';
import { type CliStore, cliStore, runCli, runJson } from '../helpers/cli.js';

// The operator sees dead jobs and messages that may have reached the provider twice.

let s: CliStore;
let okId: string;
let dupId: string;
let deadJobId: number;
let deadHookId: number;
let deadDispatchId: number;
let failedId: string;
let retryingId: number;
let waitingId: number;
let inLineId: number;
let linedMsg: string;
let scheduledId: string;
let partnerId: string;

beforeAll(async () => {
  s = await cliStore();
  await s.withCtx(async (ctx) => {
    const p = await setupPartner(ctx, { slug: 'acme', balance: '10.00' });
    const { channel } = await connect(ctx, p.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550001111');
    const mk = (to: string) => outboundSms(ctx, p.partnerId, channel, { to });
    partnerId = p.partnerId;
    scheduledId = (
      await outboundSms(ctx, p.partnerId, channel, {
        to: '+14155550127',
        text: 'at noon',
        price: 7_500,
        sendAt: Date.now() + 3_600_000,
      })
    ).id;
    okId = (await mk('+14155550123')).id;
    dupId = (await mk('+14155550124')).id;
    await flagUncertainIn(ctx.store, ctx, dupId);
    const q = queueOf(ctx);
    const enqueue = async (spec: EnqueueSpec) => (await q.enqueue(ctx.store, spec)).id;
    deadJobId = await enqueue({ kind: 'message.dispatch', payload: { message_id: okId } });
    // A dead webhook delivery: retried. A dead dispatch job whose message was then failed and
    // refunded (what onDead does): nothing would be sent, so it is refused, not "retried".
    deadHookId = await enqueue({ kind: 'webhook.deliver', payload: { delivery_id: 'wd_x' } });
    failedId = (await mk('+14155550125')).id;
    deadDispatchId = await enqueue({ kind: 'message.dispatch', payload: { message_id: failedId } });
    retryingId = await enqueue({ kind: 'webhook.deliver', payload: { delivery_id: 'wd_y' } });
    await q.claim('w1', 10);
    await q.retry(retryingId, { afterMs: 600_000, error: 'endpoint answered 503' });
    waitingId = await enqueue({ kind: 'message.dispatch', payload: { message_id: dupId } });
    // What dispatch writes on a message whose gateway is disabled (the job itself keeps no error).
    await ctx.store.run(
      sql`UPDATE messages SET error_code = 'gateway_disabled', error_message = 'gateway sbx is disabled: the message waits until it is enabled' WHERE id = ${dupId}`,
    );
    // A message in its gateway's line: queued, no error, its job snoozed to its place.
    linedMsg = (await mk('+14155550126')).id;
    inLineId = await enqueue({
      kind: 'message.dispatch',
      payload: { message_id: linedMsg },
      runAt: Date.now() + 60_000,
    });
    await q.fail(deadJobId, 'provider said no forever');
    await q.fail(deadHookId, 'endpoint down');
    await q.fail(deadDispatchId, 'gave up');
    const m = (await getMessageRowIn(ctx.store, failedId))!;
    await ctx.store.transaction((tx) =>
      applyStatusIn(tx, ctx, m, {
        status: 'failed',
        errorCode: 'retries_exhausted',
        errorMessage: 'gave up',
        refundOnFailure: true,
      }),
    );
  });
});
afterAll(() => s.drop());

describe('msgctl messages', () => {
  it('lists messages and filters the possible duplicates', async () => {
    const all = await runJson(['messages', 'list'], s.opts());
    expect(all.data.map((m: any) => m.id).sort()).toEqual([okId, dupId, failedId, linedMsg, scheduledId].sort());
    const dup = await runJson(['messages', 'list', '--uncertain'], s.opts());
    expect(dup.data.map((m: any) => m.id)).toEqual([dupId]);
    expect(dup.data[0].possible_duplicate).toBe(true);
    const text = await runCli(['messages', 'list', '--uncertain'], s.opts());
    expect(text.stdout).toContain('possible duplicate');
    // A status msgd does not have is a mistake, not an empty list.
    const bogus = await runCli(['messages', 'list', '--status', 'bogus'], s.opts());
    expect([bogus.code, bogus.stderr]).toEqual([
      2,
      expect.stringMatching(/--status must be one of scheduled, queued, sending, sent, .*canceled, received/),
    ]);
  });

  it('shows one message with its history, and 404s an unknown id', async () => {
    const m = await runJson(['messages', 'show', okId], s.opts());
    expect(m.status).toBe('queued');
    expect(m.history.map((h: any) => h.status)).toEqual(['queued']);
    expect(m.partner).toEqual({ id: expect.stringMatching(/^prt_/), slug: 'acme' });
    const text = await runCli(['messages', 'show', okId], s.opts());
    expect(text.stdout).toMatch(new RegExp(`^partner\\s+acme \\(${m.partner.id}\\)$`, 'm'));
    const r = await runCli(['messages', 'show', 'msg_nope'], s.opts());
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/message "msg_nope" not found/);
  });
});

describe('msgctl messages cancel', () => {
  const balance = () =>
    s.withCtx(
      async (ctx) =>
        (await ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = ${partnerId}`))!.balance,
    );

  it('cancels a scheduled message with a refund, and refuses one that is not scheduled', async () => {
    const listed = await runJson(['messages', 'list', '--status', 'scheduled'], s.opts());
    expect(listed.data.map((m: any) => m.id)).toEqual([scheduledId]);
    const before = await balance();
    const r = await runCli(['messages', 'cancel', scheduledId], s.opts());
    expect([r.code, r.stdout.trim()]).toEqual([0, `Canceled ${scheduledId}: 0.0075 refunded to the partner.`]);
    expect((await balance()) - before).toBe(7_500);
    const m = await runJson(['messages', 'show', scheduledId], s.opts());
    expect(m).toMatchObject({ status: 'canceled', refunded: true });
    expect(m.history.map((h: any) => h.status)).toEqual(['scheduled', 'canceled']);

    const again = await runCli(['messages', 'cancel', scheduledId], s.opts());
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain('only a scheduled message can be canceled; this one is canceled');
    const queued = await runCli(['messages', 'cancel', okId], s.opts());
    expect(queued.code).not.toBe(0);
    expect(queued.stderr).toContain('this one is queued');
    expect((await balance()) - before).toBe(7_500);
    const missing = await runCli(['messages', 'cancel', 'msg_nope'], s.opts());
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringMatching(/message "msg_nope" not found/)]);
  });
});

describe('msgctl jobs', () => {
  it('lists the jobs still to run, next first, with why one is waiting to retry', async () => {
    const all = await runJson(['jobs', 'list'], s.opts());
    expect(all.data.map((j: any) => [j.id, j.state])).toEqual([
      [waitingId, 'available'],
      [inLineId, 'available'],
      [retryingId, 'retry'],
    ]);
    expect(all.data[2]).toMatchObject({
      kind: 'webhook.deliver',
      attempts: 1,
      last_error: 'endpoint answered 503',
      reason: 'endpoint answered 503',
    });
    expect(all.data[1]).toMatchObject({ last_error: null, reason: "in line for its gateway's rate" });
    // A dispatch job waits for the reason its message gives.
    expect(all.data[0]).toMatchObject({
      last_error: null,
      reason: 'gateway_disabled: gateway sbx is disabled: the message waits until it is enabled',
    });
    expect((await runCli(['jobs', 'list'], s.opts())).stdout).toMatch(
      /available .*gateway_disabled: gateway sbx is disabled/,
    );
    const retrying = await runCli(['jobs', 'list', '--state', 'retry'], s.opts());
    expect(retrying.stdout).toMatch(
      new RegExp(`${retryingId}\\s+webhook\\.deliver\\s+retry\\s+1/\\d+ .*endpoint answered 503`),
    );
    expect(retrying.stdout).not.toContain('message.dispatch');
    expect(
      (await runJson(['jobs', 'list', '--kind', 'message.dispatch'], s.opts())).data.map((j: any) => j.id),
    ).toEqual([waitingId, inLineId]);
    const bad = await runCli(['jobs', 'list', '--state', 'dead'], s.opts());
    expect([bad.code, bad.stderr]).toEqual([
      2,
      expect.stringMatching(/--state must be available, running, retry \(dead jobs: msgctl jobs dead\)/),
    ]);
  });

  it('shows dead jobs and retries them, but not a dispatch whose message is already settled', async () => {
    const dead = await runJson(['jobs', 'dead'], s.opts());
    expect(dead.data.map((j: any) => j.id)).toEqual([deadJobId, deadHookId, deadDispatchId]);
    expect(dead.data[0]).toMatchObject({
      id: deadJobId,
      kind: 'message.dispatch',
      state: 'dead',
      last_error: 'provider said no forever',
    });
    const stats = await runJson(['jobs', 'stats'], s.opts());
    expect(stats.data).toContainEqual({ kind: 'message.dispatch', state: 'dead', count: 2 });

    const one = await runJson(['jobs', 'retry', String(deadJobId)], s.opts());
    expect(one).toEqual({ retried: 1, skipped: [] });
    const settled = await runCli(['jobs', 'retry', String(deadDispatchId)], s.opts());
    expect(settled.code).toBe(1);
    expect(settled.stderr).toContain(`message ${failedId} is already failed (retries_exhausted), refunded`);
    const missing = await runCli(['jobs', 'retry', '99999'], s.opts());
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/dead job "99999" not found/);

    const all = await runCli(['jobs', 'retry', '--all'], s.opts());
    expect(all.code).toBe(0);
    expect(all.stdout).toContain('1 dead job(s) queued again');
    expect(all.stdout).toContain(`not retried: job ${deadDispatchId}: message ${failedId} is already failed`);
    // The refused one stays visible to the operator.
    expect((await runJson(['jobs', 'dead'], s.opts())).data.map((j: any) => j.id)).toEqual([deadDispatchId]);
    const usage = await runCli(['jobs', 'retry'], s.opts());
    expect(usage.code).toBe(2);
  });
});
