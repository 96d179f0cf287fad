import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestCtx, type TestCtx } from '../core/ctx.js';
import { createOutbound, flagUncertain } from '../../src/core/messages.js';
import { JobQueue } from '../../src/jobs/queue.js';
import { connect, setupPartner } from '../helpers/server.js';
import { runCli, runJson } from '../helpers/cli.js';

// The operator sees dead jobs and messages that may have reached the provider twice.

let t: TestCtx;
let okId: string;
let dupId: string;
let deadJobId: number;

beforeAll(() => {
  t = openTestCtx();
  const p = setupPartner(t.ctx, { slug: 'acme', balance: '10.00' });
  const { channel } = connect(t.ctx, p.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550001111');
  const ch = { id: channel.id, type: 'sms' as const, gatewayId: channel.gatewayId, sender: channel.sender };
  const mk = (to: string) =>
    createOutbound(t.ctx, { partnerId: p.partnerId, channel: ch, to, content: { kind: 'text', text: 'hi' }, price: 1000, segments: 1, actor: 't', lowBalanceThreshold: null });
  okId = mk('+14155550123').id;
  dupId = mk('+14155550124').id;
  flagUncertain(t.ctx, dupId);
  const q = new JobQueue(t.ctx.db);
  deadJobId = q.enqueue({ kind: 'message.dispatch', payload: { message_id: okId } }).id;
  q.claim('w1', 10);
  q.fail(deadJobId, 'provider said no forever');
  t.dd.close();
});
afterAll(() => t.close());

describe('msgctl messages', () => {
  it('lists messages and filters the possible duplicates', async () => {
    const all = await runJson(['messages', 'list'], { dataDir: t.dir });
    expect(all.data.map((m: any) => m.id).sort()).toEqual([okId, dupId].sort());
    const dup = await runJson(['messages', 'list', '--uncertain'], { dataDir: t.dir });
    expect(dup.data.map((m: any) => m.id)).toEqual([dupId]);
    expect(dup.data[0].possible_duplicate).toBe(true);
    const text = await runCli(['messages', 'list', '--uncertain'], { dataDir: t.dir });
    expect(text.stdout).toContain('possible duplicate');
  });

  it('shows one message with its history, and 404s an unknown id', async () => {
    const m = await runJson(['messages', 'show', okId], { dataDir: t.dir });
    expect(m.status).toBe('queued');
    expect(m.history.map((h: any) => h.status)).toEqual(['queued']);
    const r = await runCli(['messages', 'show', 'msg_nope'], { dataDir: t.dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/message "msg_nope" not found/);
  });
});

describe('msgctl jobs', () => {
  it('shows dead jobs and retries them', async () => {
    const dead = await runJson(['jobs', 'dead'], { dataDir: t.dir });
    expect(dead.data).toHaveLength(1);
    expect(dead.data[0]).toMatchObject({ id: deadJobId, kind: 'message.dispatch', state: 'dead', last_error: 'provider said no forever' });
    const stats = await runJson(['jobs', 'stats'], { dataDir: t.dir });
    expect(stats.data).toContainEqual({ kind: 'message.dispatch', state: 'dead', count: 1 });
    const retried = await runJson(['jobs', 'retry', String(deadJobId)], { dataDir: t.dir });
    expect(retried.retried).toBe(1);
    expect((await runJson(['jobs', 'dead'], { dataDir: t.dir })).data).toHaveLength(0);
    const usage = await runCli(['jobs', 'retry'], { dataDir: t.dir });
    expect(usage.code).toBe(2);
  });
});
