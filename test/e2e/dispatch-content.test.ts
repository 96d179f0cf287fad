import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessageContent } from '../../src/core/message-content.js';
import { sql } from '../../src/db/sql.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { parseMoney } from '../../src/lib/money.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { expectFailedAndRefunded } from '../helpers/expectations.js';
import { FAST_DISPATCH, twilioGateway } from '../helpers/gateways.js';
import { storeOutboundSmsIn } from '../helpers/outbound.js';
import { balanceOf, historyOf, jobsOf, waitStatus } from '../helpers/rows.js';
import { setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';

// A queued message whose stored content no provider can be sent (a kind only inbound messages
// have, or content that is not JSON at all) fails at its first dispatch: no provider call, no
// retries, refunded as any message the provider never took, and the partner told.

let s: TestServer;
let fake: TwilioFake;
let p: PartnerSetup;
let channel: { id: string; gateway_id: string; sender: string };

beforeAll(async () => {
  fake = await startTwilioFake();
  s = await startTestServer(FAST_DISPATCH);
  p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.0075' } });
  const g = await twilioGateway(s.ctx, p.partnerId, fake);
  channel = { id: g.channel.id, gateway_id: g.gateway.id, sender: g.from };
});
afterAll(async () => {
  await s?.stop();
  await fake?.close();
});

/**
 * A message accepted and queued as the send path does it (its debit, the message, its dispatch
 * job, in one transaction), with the content given, or stored as `raw` when given.
 */
function queue(content: MessageContent, raw?: string): Promise<string> {
  return s.ctx.store.transaction(async (tx) => {
    const id = await storeOutboundSmsIn(tx, s.ctx, p.partnerId, channel, { content, raw, price: parseMoney('0.0075') });
    await s.rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: id } });
    return id;
  });
}

async function failedEvents(id: string) {
  return (
    await s.ctx.store.all<{ payload: string }>(
      sql`SELECT payload FROM events WHERE partner_id = ${p.partnerId} AND type = 'message.failed'`,
    )
  )
    .map((e) => JSON.parse(e.payload))
    .filter((e) => e.message_id === id);
}

describe('unsendable content', () => {
  it.each([
    ['a kind only inbound messages have', { kind: 'media', media: [] } as MessageContent, undefined, /media/],
    ['content that is not JSON', { kind: 'text', text: 'x' } as MessageContent, '{not json', /not valid JSON/],
  ])('%s: failed at once as unsendable_content, refunded, the partner told', async (_name, content, raw, why) => {
    fake.reset();
    const start = await balanceOf(s.ctx, p.partnerId);
    const id = await queue(content, raw);
    const m = await waitStatus(s.ctx, id, 'failed');
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'unsendable_content', start);
    expect(m.error_message).toMatch(why);
    expect(m.dispatch_uncertain).toBe(0);
    // One attempt, no provider call: the job is done, not dead after its retries.
    expect(fake.requests).toHaveLength(0);
    expect(await jobsOf(s.ctx, id)).toEqual([]);
    expect(await historyOf(s.ctx, id)).toEqual(['queued', 'failed']);
    expect(await failedEvents(id)).toEqual([
      expect.objectContaining({
        status: 'failed',
        previous_status: 'sending',
        error: { code: 'unsendable_content', message: m.error_message },
      }),
    ]);
  });
});
