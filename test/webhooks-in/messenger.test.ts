import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { WATERMARK_SLACK_MS } from '../../src/core/inbound.js';
import { getMessageRowIn, type MessageRow } from '../../src/core/messages.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { asciiJson, instagramEvent, metaHeaders, pageEvent, postWebhook } from '../fakes/webhook-senders.js';
import { connect, postJson, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { processed } from '../helpers/webhook-log.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { testClock } from '../helpers/clock.js';

// Messenger and Instagram: inbound text and attachments, echoes skipped, delivery and read
// watermarks marking every earlier message of the conversation, Instagram's array form.

const PAGE = '682498302938465';
const IG = '17841400000000001';
const PSID = '1254459154682919';
const IGSID = '6543219876543210';
const SECRET = 'meta-app-secret';
let graph: GraphFake;
let s: TestServer;
let p: Awaited<ReturnType<typeof setupPartner>>;

beforeAll(async () => {
  graph = await startGraphFake({
    accounts: [
      { id: PAGE, kind: 'page', token: 'PAGE-TOKEN' },
      { id: IG, kind: 'instagram', token: 'IG-TOKEN' },
    ],
  });
  // Meta and msgd read one clock, which the tests move instead of waiting.
  const clock = testClock();
  graph.now = clock.now;
  s = await startTestServer({}, { clock });
  p = await setupPartner(s.ctx, { balance: '10.00' });
  // One Meta app serves both: the same app secret signs page and Instagram events. The window
  // check is off: these tests send to customers who have not written (test/http/customer-window.test.ts has it).
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'meta_messenger',
      settings: { base_url: graph.url, page_id: PAGE, customer_service_window: 'off' },
      secrets: { page_access_token: 'PAGE-TOKEN', app_secret: SECRET },
    },
    'messenger',
  );
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'meta_instagram',
      settings: { base_url: graph.url, ig_account_id: IG, customer_service_window: 'off' },
      secrets: { access_token: 'IG-TOKEN', app_secret: SECRET },
    },
    'instagram',
  );
});
afterAll(async () => {
  await s.stop();
  await graph.close();
});

async function meta(body: unknown, path = '/api/webhook-messenger.php') {
  const raw = asciiJson(body);
  const res = await postWebhook(`${s.url}${path}`, raw, metaHeaders(SECRET, raw));
  expect(res.status).toBe(200);
  return processed(s.ctx, res.json.id);
}

async function sent(channel: 'messenger' | 'instagram', to: string, text: string): Promise<MessageRow> {
  const res = await postJson(`${s.url}/api/send-whatsapp.php`, { channel, to, text }, p.token);
  expect(res.status).toBe(200);
  const m = await waitFor(
    async () => {
      const row = await getMessageRowIn(s.ctx.store, res.body.id);
      return row?.status === 'sent' && row.sent_at ? row : undefined;
    },
    `${channel} message to be sent`,
    10_000,
  );
  s.clock.advance(3); // distinct sent_at per message, so a named message's mark falls between them
  return m;
}

/** Meta's own stamp of a message: when the Graph fake took the send request for it. */
function metaStamp(m: MessageRow): number {
  const req = graph.requests.find((r) => r.reply?.body.includes(m.provider_message_id!));
  expect(req).toBeDefined();
  return req!.at;
}

const status = async (m: MessageRow) => (await getMessageRowIn(s.ctx.store, m.id))!.status;

describe('Messenger', () => {
  it('delivery and read watermarks mark every earlier outbound message of the conversation', async () => {
    const m1 = await sent('messenger', PSID, 'one');
    const m2 = await sent('messenger', PSID, 'two');
    // Past the watermark's clock slack, so a watermark can fall between m2 and m3. Waited for
    // rather than msgd's clock moved: on PostgreSQL jobs are due on the database's clock, so a
    // moved clock would hold every later send of the file back by as much.
    await sleep(WATERMARK_SLACK_MS + 100);
    const m3 = await sent('messenger', PSID, 'three');
    const stranger = await sent('messenger', '999888777', 'not them');

    let r = await meta(
      pageEvent(PAGE, [
        {
          sender: { id: PSID },
          recipient: { id: PAGE },
          timestamp: s.clock.now(),
          delivery: { watermark: m2.sent_at },
        },
      ]),
    );
    expect(r.processing).toBe('processed');
    expect([await status(m1), await status(m2), await status(m3), await status(stranger)]).toEqual([
      'delivered',
      'delivered',
      'sent',
      'sent',
    ]);

    // mids name messages directly, whatever the watermark.
    r = await meta(
      pageEvent(PAGE, [
        {
          sender: { id: PSID },
          recipient: { id: PAGE },
          delivery: { mids: [m3.provider_message_id], watermark: m1.sent_at },
        },
      ]),
    );
    expect(await status(m3)).toBe('delivered');

    const read = pageEvent(PAGE, [
      { sender: { id: PSID }, recipient: { id: PAGE }, timestamp: s.clock.now(), read: { watermark: m3.sent_at } },
    ]);
    r = await meta(read, '/api/webhook.php');
    expect(r.processing).toBe('processed');
    expect([await status(m1), await status(m2), await status(m3), await status(stranger)]).toEqual([
      'read',
      'read',
      'read',
      'sent',
    ]);
    expect((await meta(read)).processing).toBe('duplicate');
  });

  it('a delivery or read happened at the event timestamp (when it was delivered/read), not at the watermark (when the message was sent)', async () => {
    const them = '7788990033';
    const m = await sent('messenger', them, 'read me later');
    const deliveredAt = m.sent_at! + 30_000;
    const readAt = m.sent_at! + 90_000;
    await meta(
      pageEvent(PAGE, [
        {
          sender: { id: them },
          recipient: { id: PAGE },
          timestamp: deliveredAt,
          delivery: { mids: [m.provider_message_id], watermark: m.sent_at },
        },
      ]),
    );
    const r = await meta(
      pageEvent(PAGE, [
        { sender: { id: them }, recipient: { id: PAGE }, timestamp: readAt, read: { watermark: m.sent_at } },
      ]),
    );
    expect(r.processing).toBe('processed');
    expect(await status(m)).toBe('read');
    const at = async (st: string) =>
      (
        (await s.ctx.store.get(
          sql`SELECT occurred_at FROM message_status_history WHERE message_id = ${m.id} AND status = ${st}`,
        )) as any
      ).occurred_at;
    expect(await at('delivered')).toBe(deliveredAt);
    expect(await at('read')).toBe(readAt);
    const ev = (await s.ctx.store.get(
      sql`SELECT payload FROM events WHERE type = 'message.read' AND payload LIKE ${`%${m.id}%`}`,
    )) as any;
    expect(JSON.parse(ev.payload).occurred_at).toBe(new Date(readAt).toISOString());
  });

  it("a read at Meta's own stamp of the newest message marks it, whatever the Graph call's latency", async () => {
    const them = '7788990011';
    graph.latencyMs = 150;
    try {
      const m1 = await sent('messenger', them, 'first');
      const m2 = await sent('messenger', them, 'newest');
      // Meta stamps a message when it takes it; msgd settles it after the answer comes back.
      expect(metaStamp(m2)).toBeLessThan((await getMessageRowIn(s.ctx.store, m2.id))!.updated_at);
      const r = await meta(
        pageEvent(PAGE, [
          {
            sender: { id: them },
            recipient: { id: PAGE },
            timestamp: s.clock.now(),
            read: { watermark: metaStamp(m2) },
          },
        ]),
      );
      expect(r.processing).toBe('processed');
      expect([await status(m1), await status(m2)]).toEqual(['read', 'read']);
    } finally {
      graph.latencyMs = 0;
    }
  });

  it("a delivery watermark still covers the newest message when msgd's clock runs ahead of Meta's", async () => {
    const them = '7788990022';
    const m = await sent('messenger', them, 'hello');
    const behind = metaStamp(m) - (WATERMARK_SLACK_MS - 200);
    await meta(pageEvent(PAGE, [{ sender: { id: them }, recipient: { id: PAGE }, delivery: { watermark: behind } }]));
    expect(await status(m)).toBe('delivered');
  });

  it('a receipt that comes while its message is still in the Graph call waits for the send to settle, then applies', async () => {
    const them = '7788990044';
    graph.latencyMs = 1200;
    try {
      const res = await postJson(
        `${s.url}/api/send-whatsapp.php`,
        { channel: 'messenger', to: them, text: 'in flight' },
        p.token,
      );
      expect(res.status).toBe(200);
      const before = graph.requests.length;
      // Meta has the message (and reports it delivered) before it has answered msgd.
      await waitFor(
        async () =>
          graph.requests.length > before && (await getMessageRowIn(s.ctx.store, res.body.id))!.status === 'sending',
        'the send to be in flight',
        10_000,
      );
      const raw = asciiJson(
        pageEvent(PAGE, [
          {
            sender: { id: them },
            recipient: { id: PAGE },
            timestamp: s.clock.now(),
            delivery: { watermark: s.clock.now() },
          },
        ]),
      );
      const hook = await postWebhook(`${s.url}/api/webhook-messenger.php`, raw, metaHeaders(SECRET, raw));
      expect(hook.status).toBe(200);
      await waitFor(
        async () => (await getMessageRowIn(s.ctx.store, res.body.id))!.status === 'delivered',
        'the message to be delivered',
        15_000,
      );
      const r = await processed(s.ctx, hook.json.id);
      expect([r.processing, r.error]).toEqual(['processed', null]);
    } finally {
      graph.latencyMs = 0;
    }
  });

  it('keeps a quick reply’s payload and the message replied to (reply_to.mid, with msgd’s id when it is ours)', async () => {
    const them = '7788990044';
    const out = await sent('messenger', them, 'Pick a size');
    const r = await meta(
      pageEvent(PAGE, [
        // FACTS B2: quick_reply.payload beside the text; reply_to names the message answered.
        {
          sender: { id: them },
          recipient: { id: PAGE },
          timestamp: s.clock.now(),
          message: {
            mid: 'm_qr1',
            text: 'Medium',
            quick_reply: { payload: 'SIZE_M' },
            reply_to: { mid: out.provider_message_id },
          },
        },
        {
          sender: { id: them },
          recipient: { id: PAGE },
          timestamp: s.clock.now(),
          message: {
            mid: 'm_rt1',
            attachments: [{ type: 'image', payload: { url: 'https://scontent.xx.fbcdn.net/y.jpg' } }],
            reply_to: { mid: 'm_unknown' },
          },
        },
      ]),
    );
    expect(r.processing).toBe('processed');
    const stored = async (mid: string) =>
      (await s.ctx.store.get(sql`SELECT id, content FROM messages WHERE provider_message_id = ${mid}`)) as any;
    const qr = {
      kind: 'text',
      text: 'Medium',
      choice: { type: 'quick_reply', id: null, payload: 'SIZE_M', title: 'Medium' },
      reply_to: { provider_message_id: out.provider_message_id, message_id: out.id },
    };
    expect(JSON.parse((await stored('m_qr1')).content)).toEqual(qr);
    expect(JSON.parse((await stored('m_rt1')).content).reply_to).toEqual({
      provider_message_id: 'm_unknown',
      message_id: null,
    });
    const ev = (await s.ctx.store.get(
      sql`SELECT payload FROM events WHERE type = 'message.received' AND payload LIKE ${`%${(await stored('m_qr1')).id}%`}`,
    )) as any;
    expect(JSON.parse(ev.payload)).toMatchObject({ body: 'Medium', from: them, content: qr });
  });

  it('stores postbacks (title as text, payload kept), reactions and unsupported messages, announces them and moves the window', async () => {
    const them = '7788990055';
    const out = await sent('messenger', them, 'Rate us?');
    const t0 = s.clock.now() + 1000;
    const ev = (dt: number, body: Record<string, unknown>) => ({
      sender: { id: them },
      recipient: { id: PAGE },
      timestamp: t0 + dt,
      ...body,
    });
    const batch = pageEvent(PAGE, [
      ev(0, { postback: { mid: 'm_pb1', title: 'Get Started', payload: 'GET_STARTED' } }),
      // An older postback without a mid.
      ev(10, { postback: { title: 'Talk to a human', payload: 'HUMAN' } }),
      ev(20, { reaction: { mid: out.provider_message_id, action: 'react', emoji: '\u{1F60D}', reaction: 'love' } }),
      ev(30, { reaction: { mid: out.provider_message_id, action: 'unreact' } }),
      ev(40, { message: { mid: 'm_unsup1', is_unsupported: true } }),
    ]);
    const r = await meta(batch);
    expect([r.processing, r.error]).toEqual(['processed', null]);
    const rows = (await s.ctx.store.all(
      sql`SELECT * FROM messages WHERE direction = 'inbound' AND "from" = ${them} ORDER BY id`,
    )) as any[];
    const target = { provider_message_id: out.provider_message_id, message_id: out.id };
    expect(rows.map((m) => [m.provider_message_id, m.sent_at - t0, JSON.parse(m.content)])).toEqual([
      [
        'm_pb1',
        0,
        {
          kind: 'text',
          text: 'Get Started',
          choice: { type: 'postback', id: null, payload: 'GET_STARTED', title: 'Get Started' },
        },
      ],
      [
        null,
        10,
        {
          kind: 'text',
          text: 'Talk to a human',
          choice: { type: 'postback', id: null, payload: 'HUMAN', title: 'Talk to a human' },
        },
      ],
      [null, 20, { kind: 'reaction', action: 'react', emoji: '\u{1F60D}', reaction: 'love', target }],
      [null, 30, { kind: 'reaction', action: 'unreact', emoji: null, reaction: null, target }],
      ['m_unsup1', 40, { kind: 'other', type: 'unsupported', text: null, error: null, data: { is_unsupported: true } }],
    ]);
    const received = (
      (await s.ctx.store.all(
        sql`SELECT payload FROM events WHERE type = 'message.received' AND partner_id = ${p.partnerId}`,
      )) as any[]
    )
      .map((e) => JSON.parse(e.payload))
      .filter((e) => e.from === them);
    expect(received.map((e) => [e.message_id, e.body, e.content.kind])).toEqual(
      rows.map((m, i) => [
        m.id,
        ['Get Started', 'Talk to a human', '\u{1F60D}', '', ''][i],
        JSON.parse(m.content).kind,
      ]),
    );
    const contact = (await s.ctx.store.get(
      sql`SELECT last_inbound_at FROM contacts WHERE id = ${rows[0].contact_id}`,
    )) as any;
    expect(contact.last_inbound_at).toBe(t0 + 40);
    const conv = (await s.ctx.store.get(
      sql`SELECT last_inbound_at FROM conversations WHERE id = ${rows[0].conversation_id}`,
    )) as any;
    expect(conv.last_inbound_at).toBe(t0 + 40);

    // Meta redelivers: nothing is stored or announced twice, ids or not.
    expect((await meta(batch)).processing).toBe('duplicate');
    expect(
      (
        (await s.ctx.store.get(
          sql`SELECT COUNT(*) AS n FROM messages WHERE direction = 'inbound' AND "from" = ${them}`,
        )) as any
      ).n,
    ).toBe(5);
  });

  it('stores text and attachments, skips echoes of our own sends', async () => {
    const r = await meta(
      pageEvent(PAGE, [
        {
          sender: { id: '4455' },
          recipient: { id: PAGE },
          timestamp: 1518479195308,
          message: { mid: 'm_abc', text: 'hello, world!', quick_reply: { payload: 'DEV' } },
        },
        {
          sender: { id: '4455' },
          recipient: { id: PAGE },
          timestamp: 1518479195400,
          message: {
            mid: 'm_img',
            attachments: [{ type: 'image', payload: { url: 'https://scontent.xx.fbcdn.net/x.jpg' } }],
          },
        },
        {
          sender: { id: PAGE },
          recipient: { id: '4455' },
          timestamp: 1518479195500,
          message: { mid: 'm_echo', is_echo: true, text: 'ours' },
        },
      ]),
    );
    expect(r.processing).toBe('processed');
    expect(r.error).toContain('echo of our own messenger send skipped (m_echo)');
    const rows = (await s.ctx.store.all(
      sql`SELECT provider_message_id, content, "from", contact_id FROM messages WHERE direction = 'inbound' AND channel_type = 'messenger' AND "from" = '4455' ORDER BY id`,
    )) as any[];
    expect(rows.map((m) => [m.provider_message_id, JSON.parse(m.content), m.from])).toEqual([
      [
        'm_abc',
        {
          kind: 'text',
          text: 'hello, world!',
          choice: { type: 'quick_reply', id: null, payload: 'DEV', title: 'hello, world!' },
        },
        '4455',
      ],
      [
        'm_img',
        {
          kind: 'media',
          caption: null,
          media: [{ type: 'image', url: 'https://scontent.xx.fbcdn.net/x.jpg', caption: null }],
        },
        '4455',
      ],
    ]);
    const contact = (await s.ctx.store.get(sql`SELECT * FROM contacts WHERE id = ${rows[0].contact_id}`)) as any;
    expect(contact).toMatchObject({ psid: '4455', partner_id: p.partnerId });
    expect(rows[1].contact_id).toBe(rows[0].contact_id);
  });
});

describe('Instagram', () => {
  it('takes the array-wrapped form, and a messaging_seen read marks that message and every earlier one', async () => {
    const r = await meta(
      instagramEvent(
        IG,
        [
          {
            sender: { id: IGSID },
            recipient: { id: IG },
            timestamp: s.clock.now(),
            message: { mid: 'ig_m1', text: 'hi from IG' },
          },
        ],
        { wrapped: true },
      ),
    );
    expect(r.processing).toBe('processed');
    const inbound = await s.ctx.store.get(
      sql`SELECT m.partner_id, c.igsid FROM messages m JOIN contacts c ON c.id = m.contact_id WHERE m.provider_message_id = 'ig_m1'`,
    );
    expect(inbound).toEqual({ partner_id: p.partnerId, igsid: IGSID });

    const m1 = await sent('instagram', IGSID, 'first');
    const m2 = await sent('instagram', IGSID, 'second');
    const m3 = await sent('instagram', IGSID, 'third');
    const seen = await meta(
      instagramEvent(IG, [
        {
          sender: { id: IGSID },
          recipient: { id: IG },
          timestamp: s.clock.now(),
          read: { mid: m2.provider_message_id },
        },
      ]),
    );
    expect(seen.processing).toBe('processed');
    expect([await status(m1), await status(m2), await status(m3)]).toEqual(['read', 'read', 'sent']);
  });

  it('skips Instagram echoes and reports event kinds that are not messages as ignored', async () => {
    const r = await meta(
      instagramEvent(IG, [
        {
          sender: { id: IG },
          recipient: { id: IGSID },
          timestamp: s.clock.now(),
          message: { mid: 'ig_echo', is_echo: true, text: 'ours' },
        },
        {
          sender: { id: IGSID },
          recipient: { id: IG },
          timestamp: s.clock.now(),
          optin: { type: 'notification_messages', payload: 'x' },
        },
      ]),
    );
    expect(r.processing).toBe('ignored');
    expect(r.error).toBe('echo of our own instagram send skipped (ig_echo); instagram event optin is not handled');
  });

  it('stores Instagram reactions and postbacks as inbound messages', async () => {
    const out = await sent('instagram', IGSID, 'new arrivals!');
    const at = s.clock.now();
    const r = await meta(
      instagramEvent(IG, [
        {
          sender: { id: IGSID },
          recipient: { id: IG },
          timestamp: at,
          reaction: { mid: out.provider_message_id, action: 'react', reaction: 'love', emoji: '\u{2764}\u{FE0F}' },
        },
        {
          sender: { id: IGSID },
          recipient: { id: IG },
          timestamp: at + 1,
          postback: { mid: 'ig_pb1', title: 'Shop now', payload: 'SHOP' },
        },
      ]),
    );
    expect([r.processing, r.error]).toEqual(['processed', null]);
    const rows = (await s.ctx.store.all(
      sql`SELECT provider_message_id, content FROM messages WHERE direction = 'inbound' AND channel_type = 'instagram' AND sent_at >= ${at} ORDER BY id`,
    )) as any[];
    expect(rows.map((m) => [m.provider_message_id, JSON.parse(m.content)])).toEqual([
      [
        null,
        {
          kind: 'reaction',
          action: 'react',
          emoji: '\u{2764}\u{FE0F}',
          reaction: 'love',
          target: { provider_message_id: out.provider_message_id, message_id: out.id },
        },
      ],
      [
        'ig_pb1',
        { kind: 'text', text: 'Shop now', choice: { type: 'postback', id: null, payload: 'SHOP', title: 'Shop now' } },
      ],
    ]);
  });
});
