import { verifyLedger } from '../../src/core/ledger.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { getMessageRowIn, messageHistoryIn } from '../../src/core/messages.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { asciiJson, metaHeaders, postWebhook, waInbound, waStatuses, type WaStatus } from '../fakes/webhook-senders.js';
import { waitForMessageMs } from '../../src/webhooks-in/process.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { processed, row } from '../helpers/webhook-log.js';
import { waitFor } from '../helpers/wait.js';

// End to end with the send path: a message goes out through the Graph fake, then Meta's
// status callbacks come back late, twice and out of order; inbound messages land with the
// partner that owns the receiving number and nowhere else.

const PHONE_A = '106540352242922';
const PHONE_B = '106540352242999';
let graph: GraphFake;
let s: TestServer;
let a: Awaited<ReturnType<typeof setupPartner>>;
let b: Awaited<ReturnType<typeof setupPartner>>;

beforeAll(async () => {
  graph = await startGraphFake({
    accounts: [
      { id: PHONE_A, kind: 'whatsapp', token: 'EAA-a' },
      { id: PHONE_B, kind: 'whatsapp', token: 'EAA-b' },
    ],
  });
  // A short dispatch timeout keeps the wait for a late message id (it covers the timeout) short.
  s = await startTestServer({ 'dispatch.timeoutMs': 2000 });
  a = await setupPartner(s.ctx, { slug: 'acme', balance: '10.00', prices: { whatsapp: '0.05' } });
  b = await setupPartner(s.ctx, { slug: 'beta', balance: '10.00', prices: { whatsapp: '0.05' } });
  const wa = (name: string, phone: string, token: string, secret: string) => ({
    kind: 'whatsapp_cloud',
    name,
    // Off: these tests send to customers who have not written (test/http/customer-window.test.ts has the check).
    settings: { base_url: graph.url, phone_number_id: phone, customer_service_window: 'off' },
    secrets: { access_token: token, app_secret: secret, verify_token: `vt-${name}` },
  });
  await connect(s.ctx, a.partnerId, wa('wa-a', PHONE_A, 'EAA-a', 'secret-a'), 'whatsapp', '+15550783881');
  await connect(s.ctx, b.partnerId, wa('wa-b', PHONE_B, 'EAA-b', 'secret-b'), 'whatsapp', '+15550783882');
});
afterAll(async () => {
  await s.stop();
  await graph.close();
});

async function statusHook(statuses: WaStatus[], secret = 'secret-a', phone = PHONE_A) {
  const body = asciiJson(waStatuses(phone, statuses));
  const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders(secret, body));
  expect(res.status).toBe(200);
  return processed(s.ctx, res.json.id);
}

async function sendSent(text: string) {
  const res = await postJson(`${s.url}/api/send-whatsapp.php`, { to: '+16505551234', text }, a.token);
  expect(res.status).toBe(200);
  const id = res.body.id as string;
  return waitFor(
    async () => {
      const m = await getMessageRowIn(s.ctx.store, id);
      return m?.status === 'sent' && m.provider_message_id ? m : undefined;
    },
    `message ${id} to be sent`,
    10_000,
  );
}

const balance = async (partnerId: string) =>
  ((await s.ctx.store.get(sql`SELECT balance FROM partners WHERE id = ${partnerId}`)) as { balance: number }).balance;
const events = async (partnerId: string, type: string) =>
  (
    (await s.ctx.store.all(
      sql`SELECT payload FROM events WHERE partner_id = ${partnerId} AND type = ${type} ORDER BY id`,
    )) as { payload: string }[]
  ).map((e) => JSON.parse(e.payload));

describe('WhatsApp statuses, end to end', () => {
  it('read, delivered, sent arrive out of order: the message ends read with the full history', async () => {
    const m = await sendSent('Your order shipped');
    const wamid = m.provider_message_id!;
    expect(graph.last()!.body.to).toBe('16505551234');
    for (const st of ['read', 'delivered', 'sent']) {
      const r = await statusHook([{ id: wamid, status: st }]);
      expect(r.processing).toBe('processed');
    }
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('read');
    expect((await messageHistoryIn(s.ctx.store, m.id)).map((h) => [h.status, h.provider_status, h.ignored])).toEqual([
      ['queued', null, 0],
      ['sent', null, 0],
      ['read', 'read', 0],
      ['delivered', 'delivered', 1],
      ['sent', 'sent', 1],
    ]);
    expect((await events(a.partnerId, 'message.read')).map((e) => e.message_id)).toContain(m.id);

    // Meta delivers at least once: the same event again is acknowledged and ignored.
    const again = await statusHook([{ id: wamid, status: 'delivered' }]);
    expect(again.processing).toBe('duplicate');
    expect(await messageHistoryIn(s.ctx.store, m.id)).toHaveLength(5);
  });

  it('a failure after acceptance records the error and refunds once, even when the event comes twice in one batch', async () => {
    const before = await balance(a.partnerId);
    const m = await sendSent('Are you there?');
    expect(await balance(a.partnerId)).toBe(before - 50_000);
    const failed: WaStatus = {
      id: m.provider_message_id!,
      status: 'failed',
      errors: [
        {
          code: 131047,
          title: 'Re-engagement message',
          message: 'Re-engagement message',
          error_data: {
            details:
              'Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
          },
        },
      ],
    };
    const r = await statusHook([failed, failed]);
    expect(r.processing).toBe('processed');
    const after = (await getMessageRowIn(s.ctx.store, m.id))!;
    expect(after).toMatchObject({ status: 'failed', error_code: '131047', refunded: 1 });
    expect(after.error_message).toMatch(/^Re-engagement message: Message failed to send because more than 24 hours/);
    expect(await balance(a.partnerId)).toBe(before);
    const refunds = (await s.ctx.store.get(
      sql`SELECT COUNT(*) AS n FROM ledger_entries WHERE message_id = ${m.id} AND kind = 'refund'`,
    )) as { n: number };
    expect(refunds.n).toBe(1);
  });

  it('a failed message that Meta then reports read is charged again once; a late delivered changes nothing', async () => {
    const before = await balance(a.partnerId);
    const m = await sendSent('failed, then read');
    const wamid = m.provider_message_id!;
    await statusHook([
      {
        id: wamid,
        status: 'failed',
        errors: [{ code: 131026, title: 'Message undeliverable', message: 'Message undeliverable' }],
      },
    ]);
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({
      status: 'failed',
      refunded: 1,
      error_code: '131026',
    });
    expect(await balance(a.partnerId)).toBe(before);
    // Out of order: the recipient read it after all. Proof it arrived moves it out of the failure,
    // and the failure's error goes with it (the history keeps it).
    expect((await statusHook([{ id: wamid, status: 'read' }])).processing).toBe('processed');
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({
      status: 'read',
      refunded: 0,
      error_code: null,
      error_message: null,
    });
    expect((await messageHistoryIn(s.ctx.store, m.id)).find((h) => h.status === 'failed')).toMatchObject({
      error_code: '131026',
    });
    expect(await balance(a.partnerId)).toBe(before - 50_000);
    await statusHook([{ id: wamid, status: 'delivered' }]);
    expect(await getMessageRowIn(s.ctx.store, m.id)).toMatchObject({ status: 'read', refunded: 0 });
    expect(await balance(a.partnerId)).toBe(before - 50_000);
    const kinds = await s.ctx.store.all(
      sql`SELECT kind, note FROM ledger_entries WHERE message_id = ${m.id} ORDER BY id`,
    );
    expect(kinds).toEqual([
      { kind: 'debit', note: null },
      { kind: 'refund', note: 'refund: failed (131026)' },
      { kind: 'debit', note: 'charged again: read after the refund' },
    ]);
    expect((await verifyLedger(s.ctx)).ok).toBe(true);
  });

  it('a status that beats the dispatch commit waits for its message, then lands', async () => {
    const m = await sendSent('racing');
    const res = await postWebhook(`${s.url}/api/webhook.php`, ...signed([{ id: 'wamid.EARLY', status: 'delivered' }]));
    await waitFor(
      async () =>
        (await row(s.ctx, res.json.id)).error?.includes('waiting for no message with provider id wamid.EARLY'),
      'the webhook to wait',
      10_000,
    );
    expect((await row(s.ctx, res.json.id)).processing).toBe('pending');
    // What the late dispatch commit would do: record the provider id.
    await s.ctx.store.run(sql`UPDATE messages SET provider_message_id = ${'wamid.EARLY'} WHERE id = ${m.id}`);
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('delivered');
  });

  it('the wait for a late message id covers the dispatch timeout: 25 s at the default 15 s', () => {
    expect(waitForMessageMs(15_000)).toEqual([200, 400, 800, 1600, 3200, 6400, 12800]);
    expect(waitForMessageMs(2000)).toEqual([200, 400, 800, 1600, 3200]);
  });

  it('a status for a message that never appears ends unroutable after the short waits', async () => {
    const res = await postWebhook(`${s.url}/api/webhook.php`, ...signed([{ id: 'wamid.NEVER', status: 'read' }]));
    const r = await processed(s.ctx, res.json.id, 20_000);
    expect(r.processing).toBe('unroutable');
    expect(r.error).toContain('no message with provider id wamid.NEVER');
  });

  it('one partner cannot move another partner’s message: the status must be signed by its gateway’s app', async () => {
    const m = await sendSent('private');
    // Signed by B's app and addressed to B's number, naming A's message.
    const r = await statusHook([{ id: m.provider_message_id!, status: 'read' }], 'secret-b', PHONE_B);
    expect(r.processing).toBe('unroutable');
    expect(r.error).toContain('is not one this webhook');
    expect((await getMessageRowIn(s.ctx.store, m.id))!.status).toBe('sent');
    // Addressed to A's number but signed with B's secret: refused outright.
    const body = asciiJson(waStatuses(PHONE_A, [{ id: m.provider_message_id!, status: 'read' }]));
    expect((await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders('secret-b', body))).status).toBe(401);
  });
});

function signed(statuses: WaStatus[]): [string, Record<string, string>] {
  const body = asciiJson(waStatuses(PHONE_A, statuses));
  return [body, metaHeaders('secret-a', body)];
}

describe('WhatsApp inbound', () => {
  it('a text from a new number creates contact, conversation, message and message.received for the owning partner only', async () => {
    const body = asciiJson(
      waInbound(PHONE_A, { from: '14155550199', id: 'wamid.IN1', text: { body: 'Hallo, schön!' } }, { name: 'Zoë' }),
    );
    const res = await postWebhook(`${s.url}/api/webhook-messenger.php`, body, metaHeaders('secret-a', body));
    expect(res.status).toBe(200);
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    const contact = (await s.ctx.store.all(sql`SELECT * FROM contacts WHERE phone = ${'+14155550199'}`)) as any[];
    expect(contact).toHaveLength(1);
    expect(contact[0]).toMatchObject({ partner_id: a.partnerId, name: 'Zoë' });
    expect(contact[0].last_inbound_at).toBeGreaterThan(0);
    const conv = (await s.ctx.store.all(sql`SELECT * FROM conversations WHERE contact_id = ${contact[0].id}`)) as any[];
    expect(conv).toHaveLength(1);
    expect(conv[0]).toMatchObject({
      partner_id: a.partnerId,
      channel_type: 'whatsapp',
      status: 'open',
      last_inbound_at: contact[0].last_inbound_at,
    });
    const msg = (await s.ctx.store.get(sql`SELECT * FROM messages WHERE provider_message_id = 'wamid.IN1'`)) as any;
    expect(msg).toMatchObject({
      partner_id: a.partnerId,
      conversation_id: conv[0].id,
      direction: 'inbound',
      from: '+14155550199',
    });

    const received = (await events(a.partnerId, 'message.received')).filter((e) => e.message_id === msg.id);
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({
      event: 'message.received',
      channel: 'whatsapp',
      from: '+14155550199',
      body: 'Hallo, schön!',
      conversation_id: conv[0].id,
    });
    expect(await events(b.partnerId, 'message.received')).toEqual([]);
    expect(await s.ctx.store.get(sql`SELECT COUNT(*) AS n FROM contacts WHERE partner_id = ${b.partnerId}`)).toEqual({
      n: 0,
    });
  });

  it("the /v1 message shows when the customer sent it (Meta's timestamp) as sent_at, beside created_at (when it arrived)", async () => {
    // FACTS A4: timestamps are strings of Unix seconds; this one is 2025-02-12T00:43:44Z.
    const body = asciiJson(
      waInbound(PHONE_A, {
        from: '14155550177',
        id: 'wamid.LATE1',
        timestamp: '1739321024',
        text: { body: 'sent while offline' },
      }),
    );
    const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders('secret-a', body));
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    const msg = (await s.ctx.store.get(
      sql`SELECT id, conversation_id FROM messages WHERE provider_message_id = 'wamid.LATE1'`,
    )) as any;
    const auth = { authorization: `Bearer ${a.token}` };
    const one = (await (await fetch(`${s.url}/v1/messages/${msg.id}`, { headers: auth })).json()) as any;
    expect(one.sent_at).toBe('2025-02-12T00:43:44.000Z');
    expect(Date.parse(one.created_at)).toBeGreaterThan(Date.parse(one.sent_at));
    const conv = (await (
      await fetch(`${s.url}/v1/conversations/${msg.conversation_id}`, { headers: auth })
    ).json()) as any;
    expect(conv.messages.data.find((m: any) => m.id === msg.id).sent_at).toBe('2025-02-12T00:43:44.000Z');

    // Outbound: when msgd handed it to the provider.
    const out = await sendSent('handed over');
    const sent = (await (await fetch(`${s.url}/v1/messages/${out.id}`, { headers: auth })).json()) as any;
    expect(sent.sent_at).toBe(new Date(out.sent_at!).toISOString());
  });

  it('a timestamp no date can hold (signed all the same) stands for arrival time; the batch around it is stored', async () => {
    const payload = waInbound(PHONE_A, {
      from: '14155550166',
      id: 'wamid.ODD1',
      timestamp: '99999999999999999999',
      text: { body: 'odd' },
    });
    const normal = waInbound(PHONE_A, {
      from: '14155550166',
      id: 'wamid.ODD2',
      timestamp: '1739321024',
      text: { body: 'fine' },
    });
    payload.entry[0].changes[0].value.messages.push(normal.entry[0].changes[0].value.messages[0]);
    const body = asciiJson(payload);
    const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders('secret-a', body));
    const r = await processed(s.ctx, res.json.id);
    expect([r.processing, r.error]).toEqual(['processed', null]);
    const rows = await s.ctx.store.all(
      sql`SELECT provider_message_id, sent_at FROM messages WHERE provider_message_id LIKE 'wamid.ODD%' ORDER BY 1`,
    );
    expect(rows).toEqual([
      { provider_message_id: 'wamid.ODD1', sent_at: r.received_at },
      { provider_message_id: 'wamid.ODD2', sent_at: 1739321024000 },
    ]);
  });

  it('media arrives as a reference (type, media id, mime type, caption); B’s number routes to B', async () => {
    const image = { caption: 'receipt', mime_type: 'image/jpeg', sha256: 'abc', id: '2754859441498128' };
    const body = asciiJson(
      waInbound(PHONE_B, { from: '14155550123', id: 'wamid.IMG1', type: 'image', image }, { display: '15550783882' }),
    );
    const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders('secret-b', body));
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    const msg = (await s.ctx.store.get(sql`SELECT * FROM messages WHERE provider_message_id = 'wamid.IMG1'`)) as any;
    expect(msg.partner_id).toBe(b.partnerId);
    expect(JSON.parse(msg.content)).toEqual({
      kind: 'media',
      caption: 'receipt',
      media: [
        {
          type: 'image',
          media_id: '2754859441498128',
          url: null,
          mime_type: 'image/jpeg',
          caption: 'receipt',
          filename: null,
          sha256: 'abc',
        },
      ],
    });
  });

  it('keeps what a tap carried (button payload, button/list ids, a Flow answer) and the message replied to, in content and message.received', async () => {
    const out = await sendSent('Confirm your order?');
    const wamid = out.provider_message_id!;
    const flow = '{"flow_token":"tok-1","size":"M","agree":true}';
    const cases: [Record<string, unknown>, Record<string, unknown>][] = [
      // A template's quick-reply button (FACTS A4 shapes; context names the message replied to).
      [
        { type: 'button', button: { payload: 'CONFIRM_42', text: 'Yes' }, context: { from: '15550783881', id: wamid } },
        {
          kind: 'text',
          text: 'Yes',
          choice: { type: 'button', id: null, payload: 'CONFIRM_42', title: 'Yes' },
          reply_to: { provider_message_id: wamid, message_id: out.id, from: '+15550783881' },
        },
      ],
      [
        {
          type: 'interactive',
          interactive: { type: 'button_reply', button_reply: { id: 'btn-yes', title: 'Yes please' } },
          context: { from: '15550783881', id: wamid },
        },
        {
          kind: 'text',
          text: 'Yes please',
          choice: { type: 'button_reply', id: 'btn-yes', payload: null, title: 'Yes please' },
          reply_to: { provider_message_id: wamid, message_id: out.id, from: '+15550783881' },
        },
      ],
      [
        {
          type: 'interactive',
          interactive: { type: 'list_reply', list_reply: { id: 'row-2', title: 'Tomorrow', description: '9-12 am' } },
          context: { from: '15550783881', id: 'wamid.NOT_OURS' },
        },
        {
          kind: 'text',
          text: 'Tomorrow',
          choice: { type: 'list_reply', id: 'row-2', payload: null, title: 'Tomorrow', description: '9-12 am' },
          reply_to: { provider_message_id: 'wamid.NOT_OURS', message_id: null, from: '+15550783881' },
        },
      ],
      [
        {
          type: 'interactive',
          interactive: { type: 'nfm_reply', nfm_reply: { name: 'flow', body: 'Sent', response_json: flow } },
        },
        {
          kind: 'text',
          text: 'Sent',
          choice: {
            type: 'nfm_reply',
            id: null,
            payload: null,
            title: null,
            name: 'flow',
            response: { flow_token: 'tok-1', size: 'M', agree: true },
          },
        },
      ],
      // A plain text reply, quoting our message.
      [
        { type: 'text', text: { body: 'and one more thing' }, context: { from: '15550783881', id: wamid } },
        {
          kind: 'text',
          text: 'and one more thing',
          reply_to: { provider_message_id: wamid, message_id: out.id, from: '+15550783881' },
        },
      ],
    ];
    for (const [i, [msg, content]] of cases.entries()) {
      const id = `wamid.TAP${i}`;
      const body = asciiJson(waInbound(PHONE_A, { from: '16505551234', id, ...msg }));
      const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders('secret-a', body));
      expect((await processed(s.ctx, res.json.id)).processing, id).toBe('processed');
      const row = (await s.ctx.store.get(
        sql`SELECT id, content FROM messages WHERE provider_message_id = ${id}`,
      )) as any;
      expect(JSON.parse(row.content), id).toEqual(content);
      const ev = (await events(a.partnerId, 'message.received')).find((e) => e.message_id === row.id);
      expect(ev, id).toMatchObject({ body: content.text, content, media: [] });
      const v1 = (await (
        await fetch(`${s.url}/v1/messages/${row.id}`, { headers: { authorization: `Bearer ${a.token}` } })
      ).json()) as any;
      expect(v1.content, id).toEqual(content);
    }
  });

  it('reactions, shared contacts, unsupported and unknown types are stored, announced and move the 24-hour window', async () => {
    const out = await sendSent('How was your delivery?');
    const customer = '14155550155';
    const card = {
      name: { formatted_name: 'Ann Example', first_name: 'Ann', last_name: 'Example' },
      phones: [{ phone: '+1 (415) 555-0111', wa_id: '14155550111', type: 'CELL' }],
      emails: [{ email: 'ann@example.com', type: 'WORK' }],
      org: { company: 'Example Inc' },
      urls: [{ url: 'https://example.com', type: 'WORK' }],
    };
    const unsupportedErr = {
      code: 131051,
      title: 'Message type unknown',
      message: 'Message type unknown',
      error_data: { details: 'Message type is currently not supported.' },
    };
    const cases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
      [
        'wamid.REACT1',
        { type: 'reaction', reaction: { message_id: out.provider_message_id, emoji: '\u{1F44D}' } },
        {
          kind: 'reaction',
          action: 'react',
          emoji: '\u{1F44D}',
          target: { provider_message_id: out.provider_message_id, message_id: out.id },
        },
        '\u{1F44D}',
      ],
      [
        'wamid.UNREACT1',
        { type: 'reaction', reaction: { message_id: out.provider_message_id, emoji: '' } },
        {
          kind: 'reaction',
          action: 'unreact',
          emoji: null,
          target: { provider_message_id: out.provider_message_id, message_id: out.id },
        },
        '',
      ],
      [
        'wamid.CARD1',
        { type: 'contacts', contacts: [card] },
        {
          kind: 'contacts',
          contacts: [
            {
              name: 'Ann Example',
              phones: [{ phone: '+1 (415) 555-0111', wa_id: '14155550111', type: 'CELL' }],
              emails: [{ email: 'ann@example.com', type: 'WORK' }],
              organization: 'Example Inc',
              data: card,
            },
          ],
        },
        '',
      ],
      [
        'wamid.UNSUP1',
        { type: 'unsupported', errors: [unsupportedErr], unsupported: { type: 'edit' } },
        {
          kind: 'other',
          type: 'unsupported',
          text: null,
          error: { code: '131051', message: 'Message type unknown: Message type is currently not supported.' },
          data: { type: 'edit' },
        },
        '',
      ],
      [
        'wamid.SYS1',
        {
          type: 'system',
          system: { body: 'Ann changed their phone number', wa_id: '14155550156', type: 'user_changed_number' },
        },
        {
          kind: 'other',
          type: 'system',
          text: 'Ann changed their phone number',
          error: null,
          data: { body: 'Ann changed their phone number', wa_id: '14155550156', type: 'user_changed_number' },
        },
        'Ann changed their phone number',
      ],
      // A type newer than msgd, quoting our message.
      [
        'wamid.NEW1',
        {
          type: 'poll_vote',
          poll_vote: { option: 'B' },
          context: { from: '15550783881', id: out.provider_message_id },
        },
        {
          kind: 'other',
          type: 'poll_vote',
          text: null,
          error: null,
          data: { option: 'B' },
          reply_to: { provider_message_id: out.provider_message_id, message_id: out.id, from: '+15550783881' },
        },
        '',
      ],
    ];
    for (const [i, [id, msg, content, body]] of cases.entries()) {
      // Each a little later by Meta's clock: the window's last inbound time must follow.
      const ts = 1_790_000_000 + i * 60;
      const raw = asciiJson(waInbound(PHONE_A, { from: customer, id, timestamp: String(ts), ...msg }));
      const res = await postWebhook(`${s.url}/api/webhook.php`, raw, metaHeaders('secret-a', raw));
      const r = await processed(s.ctx, res.json.id);
      expect([r.processing, r.error], id).toEqual(['processed', null]);
      const row = (await s.ctx.store.get(sql`SELECT * FROM messages WHERE provider_message_id = ${id}`)) as any;
      expect(row, id).toMatchObject({
        partner_id: a.partnerId,
        direction: 'inbound',
        status: 'received',
        from: `+${customer}`,
        sent_at: ts * 1000,
      });
      expect(JSON.parse(row.content), id).toEqual(content);
      const ev = (await events(a.partnerId, 'message.received')).filter((e) => e.message_id === row.id);
      expect(ev, id).toHaveLength(1);
      expect(ev[0], id).toMatchObject({ from: `+${customer}`, body, content, conversation_id: row.conversation_id });
      const contact = (await s.ctx.store.get(
        sql`SELECT last_inbound_at FROM contacts WHERE id = ${row.contact_id}`,
      )) as any;
      const conv = (await s.ctx.store.get(
        sql`SELECT last_inbound_at FROM conversations WHERE id = ${row.conversation_id}`,
      )) as any;
      expect([contact.last_inbound_at, conv.last_inbound_at], id).toEqual([ts * 1000, ts * 1000]);
    }
    // The reacted-to message itself is untouched.
    expect((await getMessageRowIn(s.ctx.store, out.id))!.status).toBe('sent');
  });

  it('only events that are not messages stay ignored: an out-of-band value.errors', async () => {
    const raw = asciiJson({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: '102290129340398',
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: '15550783881', phone_number_id: PHONE_A },
                errors: [
                  {
                    code: 130429,
                    title: 'Rate limit hit',
                    message: 'Rate limit hit',
                    error_data: { details: 'too many messages' },
                  },
                ],
              },
            },
          ],
        },
      ],
    });
    const res = await postWebhook(`${s.url}/api/webhook.php`, raw, metaHeaders('secret-a', raw));
    const r = await processed(s.ctx, res.json.id);
    expect(r.processing).toBe('ignored');
    expect(r.error).toContain('WhatsApp error 130429: Rate limit hit: too many messages');
  });

  it('a location becomes a geo: URI only with a real position; a sender that is no number is not stored', async () => {
    const payload = waInbound(PHONE_A, {
      from: '14155550155',
      id: 'wamid.LOC1',
      type: 'location',
      location: { latitude: 52.52, longitude: '13.405', name: 'Office' },
    });
    const value = payload.entry[0].changes[0].value;
    value.messages.push(
      {
        from: '14155550155',
        id: 'wamid.LOC2',
        timestamp: '1739321024',
        type: 'location',
        location: { name: 'Somewhere' },
      },
      {
        from: '14155550155',
        id: 'wamid.LOC3',
        timestamp: '1739321024',
        type: 'location',
        location: { latitude: 123, longitude: 0 },
      },
      { from: 'abc', id: 'wamid.NOTANUMBER', timestamp: '1739321024', type: 'text', text: { body: 'x' } },
    );
    const raw = asciiJson(payload);
    const res = await postWebhook(`${s.url}/api/webhook.php`, raw, metaHeaders('secret-a', raw));
    const r = await processed(s.ctx, res.json.id);
    expect(r.processing).toBe('processed');
    expect(r.error).toContain('WhatsApp message wamid.NOTANUMBER from "abc", which is not a phone number');
    const media = async (id: string) =>
      JSON.parse(
        ((await s.ctx.store.get(sql`SELECT content FROM messages WHERE provider_message_id = ${id}`)) as any).content,
      ).media[0];
    expect(await media('wamid.LOC1')).toEqual({ type: 'location', url: 'geo:52.52,13.405', caption: 'Office' });
    expect(await media('wamid.LOC2')).toEqual({ type: 'location', url: null, caption: 'Somewhere' });
    expect((await media('wamid.LOC3')).url).toBeNull();
    expect(await s.ctx.store.get(sql`SELECT count(*) AS n FROM contacts WHERE phone = '+abc'`)).toEqual({ n: 0 });
  });
});
