import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { makeCert, type TlsFiles } from '../helpers/webhook-receiver.js';
import { FAST_SCHEDULE, inbound, world, type World } from './helpers.js';

// At info, a failed delivery to a partner endpoint is logged with what failed, and the first
// success after failures says so; the endpoint's URL is logged without its query.

let tls: TlsFiles;
let w: World;
beforeAll(async () => {
  tls = makeCert();
  w = await world({}, { tls });
});
afterAll(async () => {
  await w.close();
  tls.cleanup();
});

const lines = () =>
  w.server.logs
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

describe('delivery failures at info', () => {
  it('a failing endpoint: the first failure with its details, then its recovery', async () => {
    expect(FAST_SCHEDULE.length).toBeGreaterThan(2);
    const ep = await w.register();
    w.receiver.behave((_r, n) => (n <= 2 ? { kind: 'status', status: 500, body: 'database down' } : { kind: 'ok' }));
    const { eventId } = await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550201', 'log me');
    const recovered = await waitFor(
      () => lines().find((l) => l.endpointId === ep.id && l.msg?.startsWith('webhook deliveries succeed again')),
      'the recovery line',
      10_000,
    );
    const mine = lines().filter((l) => l.endpointId === ep.id);
    expect(mine[0]).toMatchObject({
      level: 30,
      msg: 'webhook delivery to a partner endpoint failed',
      eventId,
      attempt: 1,
      status: 500,
      code: 'http_500',
    });
    expect(mine[0].url).not.toContain('?');
    expect(recovered.failures).toBe(2);
    expect(mine).toHaveLength(2);
  });
});
