import { describe, expect, it } from 'vitest';
import { FailureLog } from '../../src/lib/failure-log.js';
import { sleep } from '../helpers/wait.js';

// An outage is a few lines a minute: the first failure at once, then one summary per interval
// while failures go on, and one line when it works again.

function recorder() {
  const lines: { obj: Record<string, unknown>; msg: string }[] = [];
  return { lines, logger: { info: (obj: object, msg?: string) => lines.push({ obj: obj as any, msg: msg ?? '' }) } };
}

describe('FailureLog', () => {
  it('logs the first failure, sums up the rest per interval by code, and the recovery', async () => {
    const r = recorder();
    const log = new FailureLog(r.logger, { what: 'send attempts', intervalMs: 200 });
    for (let i = 0; i < 1000; i++)
      log.failure('gw_1', i % 4 === 0 ? 'http_429' : 'http_503', { gateway: 'tw', messageId: `msg_${i}` }, 'failed');
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]).toEqual({ obj: { gateway: 'tw', messageId: 'msg_0', code: 'http_429' }, msg: 'failed' });
    await sleep(300);
    expect(r.lines).toHaveLength(2);
    expect(r.lines[1].obj).toMatchObject({ gateway: 'tw', failures: 999, codes: { http_429: 249, http_503: 750 } });
    expect(r.lines[1].obj).not.toHaveProperty('messageId');
    expect(r.lines[1].msg).toMatch(/^999 more send attempts failed in the last 0 s$/);
    // Quiet intervals write nothing.
    await sleep(300);
    expect(r.lines).toHaveLength(2);
    log.failure('gw_1', 'http_503', { gateway: 'tw', messageId: 'msg_x' }, 'failed');
    log.success('gw_1');
    expect(r.lines).toHaveLength(3);
    expect(r.lines[2].msg).toMatch(/^send attempts succeed again after 1001 failures in \d+ s$/);
    // A success with no failures before it writes nothing.
    log.success('gw_1');
    log.success('gw_2');
    expect(r.lines).toHaveLength(3);
  });

  it('keeps keys apart', () => {
    const r = recorder();
    const log = new FailureLog(r.logger, { what: 'deliveries' });
    log.failure('a', 'x', { endpointId: 'a' }, 'failed');
    log.failure('b', 'x', { endpointId: 'b' }, 'failed');
    log.failure('a', 'x', { endpointId: 'a' }, 'failed');
    expect(r.lines.map((l) => l.obj.endpointId)).toEqual(['a', 'b']);
    log.success('a');
    log.success('b');
  });
});
