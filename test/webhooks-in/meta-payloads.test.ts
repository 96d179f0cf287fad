import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { asciiJson, instagramEvent, metaHeaders, pageEvent, postWebhook } from '../fakes/webhook-senders.js';
import { assignChannel, unassignChannel } from '../../src/core/channels.js';
import { runCli } from '../helpers/cli.js';
import { setupPartner, connect, startTestServer, type TestServer } from '../helpers/server.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { processed } from '../helpers/webhook-log.js';
import { loggedIn } from '../ui/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { apiFor, outOverrides, type Api } from '../webhooks-out/helpers.js';

// Instagram and Messenger payloads as Meta sends them, signed with the app secret, read back
// the way a partner reads them: GET /v1/messages/{id} and the events its HTTPS endpoint gets.
// Story replies keep the story; an unsend redacts the message and tells the partner.

const PAGE = '682498302938465';
const IG = '17841400000000001';
const PSID = '1254459154682919';
const IGSID = '6543219876543210';
const SECRET = 'meta-app-secret';

let tls: TlsFiles;
let graph: GraphFake;
let s: TestServer;
let receiver: Receiver;
let api: Api;
let partnerId: string;
let messengerGateway: string;

beforeAll(async () => {
  tls = makeCert();
  graph = await startGraphFake({
    accounts: [
      { id: PAGE, kind: 'page', token: 'PAGE-TOKEN' },
      { id: IG, kind: 'instagram', token: 'IG-TOKEN' },
    ],
  });
  s = await startTestServer(outOverrides(tls));
  receiver = await startReceiver(tls);
  const p = await setupPartner(s.ctx, { balance: '10.00' });
  partnerId = p.partnerId;
  api = apiFor(s, p.token);
  messengerGateway = (
    await connect(
      s.ctx,
      partnerId,
      {
        kind: 'meta_messenger',
        settings: { base_url: graph.url, page_id: PAGE },
        secrets: { page_access_token: 'PAGE-TOKEN', app_secret: SECRET },
      },
      'messenger',
    )
  ).gateway.id;
  await connect(
    s.ctx,
    partnerId,
    {
      kind: 'meta_instagram',
      settings: { base_url: graph.url, ig_account_id: IG },
      secrets: { access_token: 'IG-TOKEN', app_secret: SECRET },
    },
    'instagram',
  );
  const ep = await api('POST', '/v1/webhooks', { url: receiver.url });
  expect(ep.status).toBe(201);
  receiver.setSecrets([ep.body.secret]);
});
afterAll(async () => {
  await receiver?.close();
  await s?.stop();
  await graph?.close();
  tls?.cleanup();
});

/** POST a notification as Meta does (ASCII-escaped JSON, X-Hub-Signature-256) and wait for its processing. */
async function meta(body: unknown) {
  const raw = asciiJson(body);
  const res = await postWebhook(`${s.url}/api/webhook-messenger.php`, raw, metaHeaders(SECRET, raw));
  expect(res.status).toBe(200);
  return processed(s.ctx, res.json.id);
}

const igMessage = (message: Record<string, unknown>, timestamp = Date.now()) =>
  instagramEvent(IG, [{ sender: { id: IGSID }, recipient: { id: IG }, timestamp, message }]);
const pageMessage = (message: Record<string, unknown>, timestamp = Date.now()) =>
  pageEvent(PAGE, [{ sender: { id: PSID }, recipient: { id: PAGE }, timestamp, message }]);

async function messageIdOf(mid: string): Promise<string> {
  const row = (await s.ctx.store.get(sql`SELECT id FROM messages WHERE provider_message_id = ${mid}`)) as
    { id: string } | undefined;
  expect(row, `a message for ${mid}`).toBeDefined();
  return row!.id;
}

/** The verified events of a type the partner's endpoint got for a message. */
function got(type: string, messageId: string) {
  return receiver.received.filter((r) => r.verified && r.body.event === type && r.body.message_id === messageId);
}

function waitGot(type: string, messageId: string) {
  return waitFor(() => got(type, messageId)[0]?.body, `${type} for ${messageId} at the partner's endpoint`, 10_000);
}

describe('Instagram story replies', () => {
  it('keep the story answered (id and URL) in the content, in /v1 and in message.received', async () => {
    const story = { url: 'https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=17999&signature=AbC', id: '17999' };
    const r = await meta(
      igMessage({ mid: 'aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQx', text: 'love this!', reply_to: { story } }),
    );
    expect(r.processing).toBe('processed');
    const id = await messageIdOf('aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQx');

    const res = await api('GET', `/v1/messages/${id}`);
    expect(res.status).toBe(200);
    expect(res.body.content).toEqual({ kind: 'text', text: 'love this!', reply_to_story: story });
    expect(res.body.deleted_at).toBeNull();

    const ev = await waitGot('message.received', id);
    expect(ev).toMatchObject({ channel: 'instagram', from: IGSID, body: 'love this!' });
    expect(ev.content).toEqual({ kind: 'text', text: 'love this!', reply_to_story: story });

    // A story mention is an attachment of type story_mention, its URL kept as a media reference.
    await meta(
      igMessage({
        mid: 'aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQy',
        attachments: [{ type: 'story_mention', payload: { url: story.url } }],
      }),
    );
    const mention = await api('GET', `/v1/messages/${await messageIdOf('aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQy')}`);
    expect(mention.body.content.media).toEqual([{ type: 'story_mention', url: story.url, caption: null }]);
  });
});

describe('an unsend (is_deleted)', () => {
  it('redacts the message, keeps who, when and history, and sends message.deleted', async () => {
    const mid = 'm_unsend-1';
    const sentAt = Date.now() - 5000;
    expect((await meta(pageMessage({ mid, text: 'my card number is 4111 1111 1111 1111' }, sentAt))).processing).toBe(
      'processed',
    );
    const id = await messageIdOf(mid);
    const received = await waitGot('message.received', id);
    expect(received.body).toContain('4111');

    const unsentAt = Date.now();
    const r = await meta(pageMessage({ mid, is_deleted: true }, unsentAt));
    expect(r.processing).toBe('processed');

    const res = await api('GET', `/v1/messages/${id}`);
    expect(res.body).toMatchObject({
      id,
      direction: 'inbound',
      channel: 'messenger',
      from: PSID,
      status: 'received',
      provider_message_id: mid,
      sent_at: new Date(sentAt).toISOString(),
      deleted_at: new Date(unsentAt).toISOString(),
    });
    expect(res.body.content).toEqual({ kind: 'redacted', was: 'text', redacted_at: expect.any(String) });
    expect(res.body.history.map((h: any) => h.status)).toEqual(['received']);
    expect(JSON.stringify(res.body)).not.toContain('4111');

    const deleted = await waitGot('message.deleted', id);
    expect(deleted).toEqual({
      id: expect.stringMatching(/^evt_/),
      event: 'message.deleted',
      created_at: expect.any(String),
      message_id: id,
      channel: 'messenger',
      from: PSID,
      to: PAGE,
      conversation_id: res.body.conversation_id,
      provider_message_id: mid,
      deleted_at: new Date(unsentAt).toISOString(),
    });
    // No copy of the content is left in msgd's own records: the message, and the message.received
    // event kept for replays.
    const rows = (await s.ctx.store.all(
      sql`SELECT payload FROM events WHERE partner_id = ${partnerId} AND payload LIKE ${`%${id}%`}`,
    )) as { payload: string }[];
    expect(rows.length).toBe(2);
    for (const row of rows) expect(row.payload).not.toContain('4111');

    // The web console shows it unsent, not as retention's redaction.
    const { client } = await loggedIn(s.ctx, s.url, partnerId, 'developer');
    const page = await client.get(`/ui/messages/${id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('(unsent by the customer)');
    expect(page.text).not.toContain('4111');

    // Meta's retry of the same unsend is a duplicate: one message.deleted.
    expect((await meta(pageMessage({ mid, is_deleted: true }, unsentAt))).processing).toBe('duplicate');
    await new Promise((r) => setTimeout(r, 300));
    expect(got('message.deleted', id)).toHaveLength(1);
  });

  it('of a mid msgd does not have is ignored; should that message arrive later, it is stored deleted', async () => {
    const mid = 'aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODUw';
    const unsentAt = Date.now();
    const r = await meta(igMessage({ mid, is_deleted: true }, unsentAt));
    expect(r.processing).toBe('ignored');
    expect(r.error).toContain(mid);

    // Meta delivered the message after its unsend.
    const late = await meta(igMessage({ mid, text: 'oops, wrong chat' }, unsentAt - 2000));
    expect(late.processing).toBe('ignored');
    const id = await messageIdOf(mid);
    const res = await api('GET', `/v1/messages/${id}`);
    expect(res.body).toMatchObject({ channel: 'instagram', from: IGSID, status: 'received' });
    expect(res.body.deleted_at).not.toBeNull();
    expect(res.body.content).toEqual({ kind: 'redacted', was: 'text', redacted_at: expect.any(String) });
    const events = (await s.ctx.store.all(
      sql`SELECT type, payload FROM events WHERE partner_id = ${partnerId} AND payload LIKE ${`%${id}%`}`,
    )) as { type: string; payload: string }[];
    // Nothing to announce: the partner never had it.
    expect(events).toEqual([]);
    expect(JSON.stringify(await s.ctx.store.get(sql`SELECT * FROM messages WHERE id = ${id}`))).not.toContain(
      'wrong chat',
    );
  });

  it('by someone other than its sender changes nothing', async () => {
    const mid = 'm_unsend-2';
    await meta(pageMessage({ mid, text: 'keep me' }));
    const id = await messageIdOf(mid);
    const r = await meta(
      pageEvent(PAGE, [
        {
          sender: { id: '999000999' },
          recipient: { id: PAGE },
          timestamp: Date.now(),
          message: { mid, is_deleted: true },
        },
      ]),
    );
    expect(r.processing).toBe('ignored');
    const res = await api('GET', `/v1/messages/${id}`);
    expect(res.body.content).toEqual({ kind: 'text', text: 'keep me' });
    expect(res.body.deleted_at).toBeNull();
  });

  it("reaches the customer's message after its page left the partner: unassigned, then given to another", async () => {
    const before = ['m_unsend-3', 'm_unsend-4'];
    for (const mid of before) await meta(pageMessage({ mid, text: `call me on +44 20 7946 0958 (${mid})` }));
    const [first, second] = await Promise.all(before.map(messageIdOf));
    for (const id of [first, second]) await waitGot('message.received', id);
    const other = await setupPartner(s.ctx);
    try {
      // The operator takes the page off this partner: no channel serves it any more.
      await unassignChannel(s.ctx, { partner: partnerId, type: 'messenger' }, 'test');
      expect((await meta(pageMessage({ mid: before[0], is_deleted: true }))).processing).toBe('processed');
      // Then gives the page to another partner.
      await assignChannel(s.ctx, { partner: other.partnerId, gateway: messengerGateway, type: 'messenger' }, 'test');
      expect((await meta(pageMessage({ mid: before[1], is_deleted: true }))).processing).toBe('processed');

      for (const id of [first, second]) {
        const res = await api('GET', `/v1/messages/${id}`);
        expect(res.body).toMatchObject({ id, channel: 'messenger', from: PSID, deleted_at: expect.any(String) });
        expect(res.body.content).toEqual({ kind: 'redacted', was: 'text', redacted_at: expect.any(String) });
        expect(JSON.stringify(res.body)).not.toContain('7946');
        // Told to the partner whose message it is.
        expect(await waitGot('message.deleted', id)).toMatchObject({
          message_id: id,
          provider_message_id: expect.any(String),
        });
      }
      // The page's new partner learns nothing of a message that was never its own.
      expect(await s.ctx.store.all(sql`SELECT type FROM events WHERE partner_id = ${other.partnerId}`)).toEqual([]);
    } finally {
      // The page back to this partner, however far the test got.
      const holder = (await s.ctx.store.get(
        sql`SELECT partner_id FROM channels WHERE type = 'messenger' AND sender = ${PAGE} AND status = 'active'`,
      )) as { partner_id: string } | undefined;
      if (holder?.partner_id === other.partnerId)
        await unassignChannel(s.ctx, { partner: other.partnerId, type: 'messenger' }, 'test');
      if (holder?.partner_id !== partnerId)
        await assignChannel(s.ctx, { partner: partnerId, gateway: messengerGateway, type: 'messenger' }, 'test');
    }
  });

  it("cannot be made by another partner's Meta app, whatever page it names", async () => {
    const mid = 'm_unsend-5';
    await meta(pageMessage({ mid, text: 'the door code is 4512' }));
    const id = await messageIdOf(mid);
    const OTHER_PAGE = '105555555555555';
    const intruder = await setupPartner(s.ctx);
    await connect(
      s.ctx,
      intruder.partnerId,
      {
        kind: 'meta_messenger',
        settings: { base_url: graph.url, page_id: OTHER_PAGE },
        secrets: { page_access_token: 'OTHER-TOKEN', app_secret: 'another-app-secret' },
      },
      'messenger',
    );
    // Signed by the other app, for its own page, naming this partner's page as the recipient.
    const raw = asciiJson(
      pageEvent(OTHER_PAGE, [
        { sender: { id: PSID }, recipient: { id: PAGE }, timestamp: Date.now(), message: { mid, is_deleted: true } },
      ]),
    );
    const res = await postWebhook(`${s.url}/api/webhook-messenger.php`, raw, metaHeaders('another-app-secret', raw));
    expect(res.status).toBe(200);
    expect((await processed(s.ctx, res.json.id)).processing).toBe('ignored');
    const msg = await api('GET', `/v1/messages/${id}`);
    expect(msg.body.content).toEqual({ kind: 'text', text: 'the door code is 4512' });
    expect(msg.body.deleted_at).toBeNull();
  });

  it("leaves no copy in the delivery log, where the partner's endpoint quoted it back", async () => {
    const mid = 'm_unsend-6';
    const secret = 'IBAN GB33BUKB20201555555555';
    // The partner's endpoint fails once with a debug page that quotes the request, as many
    // frameworks' error pages do; msgd keeps the start of every response for the operator.
    let quoted = false;
    receiver.behave((r) =>
      !quoted && r.body?.event === 'message.received' && String(r.body.body).includes(secret)
        ? ((quoted = true), { kind: 'status', status: 500, body: `Internal Server Error\nPOST body: ${r.raw}` })
        : { kind: 'ok' },
    );
    const attempts = async () => {
      const r = await runCli(['webhooks', 'deliveries', '--attempts', '--json', '--limit', '1000'], {
        dataDir: s.dataDir,
        env: s.storeEnv,
      });
      expect(r.code, r.stderr).toBe(0);
      return r.stdout;
    };
    try {
      await meta(pageMessage({ mid, text: `pay to ${secret}` }));
      const id = await messageIdOf(mid);
      // Its first attempt, and what the endpoint answered, are in the log.
      await waitFor(
        async () => (await attempts()).includes(secret) || undefined,
        'the quoting answer logged',
        10_000,
        100,
      );

      expect((await meta(pageMessage({ mid, is_deleted: true }))).processing).toBe('processed');
      await waitGot('message.deleted', id);
      expect(await attempts()).not.toContain(secret);
    } finally {
      receiver.behave({ kind: 'ok' });
    }
  });
});
