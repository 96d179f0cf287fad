import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { quote, setPrice } from '../../src/core/prices.js';
import { accept, preflight } from '../../src/core/send.js';
import { templatePreflight } from '../../src/core/whatsapp-template-send.js';
import { addSuppressionIn } from '../../src/core/suppressions.js';
import { releaseScheduledIn } from '../../src/core/scheduled.js';
import { sql } from '../../src/db/sql.js';
import { pageOf, templateOut } from '../../src/http/schemas/v1.js';
import { syncGatewayTemplates } from '../../src/jobs/template-sync.js';
import { parseMoney } from '../../src/lib/money.js';
import { startGraphFake, type GraphFake, type MetaTemplate } from '../fakes/graph.js';
import { asciiJson, metaHeaders, postWebhook, waInbound } from '../fakes/webhook-senders.js';
import {
  connect,
  keptStore,
  type KeptStore,
  postJson,
  setupPartner,
  startTestServer,
  type TestServer,
} from '../helpers/server.js';
import { balanceOf } from '../helpers/rows.js';
import { waitFor } from '../helpers/wait.js';
import { processed } from '../helpers/webhook-log.js';

// The WhatsApp template catalogue end to end: read from a fake Graph API that pages as Meta's
// does, kept current by status and category webhooks signed as Meta signs them, and checked on
// every template send before the price: a send Meta would refuse is a 400 template_invalid with
// nothing debited and nothing sent; a valid one is priced by the template's current category.

const PHONE_ID = '106540352242922';
const WABA = '102290129340398';
const TOKEN = 'EAA-wa-token';
const SECRET = 'app-secret';
const SENDER = '+15550783881';

const body = (text: string, example?: unknown) => ({ type: 'BODY', text, ...(example ? { example } : {}) });

const CATALOGUE: MetaTemplate[] = [
  {
    id: '1001',
    name: 'order_update',
    language: 'en_US',
    status: 'APPROVED',
    category: 'UTILITY',
    parameter_format: 'POSITIONAL',
    components: [
      { type: 'HEADER', format: 'IMAGE', example: { header_handle: ['https://scontent.example/h.jpg'] } },
      body('Hi {{1}}, order {{2}} has shipped.', { body_text: [['Ann', '42']] }),
      { type: 'FOOTER', text: 'Reply STOP to opt out' },
      {
        type: 'BUTTONS',
        buttons: [
          { type: 'URL', text: 'Track', url: 'https://track.example/{{1}}', example: ['https://track.example/x'] },
          { type: 'QUICK_REPLY', text: 'Stop' },
        ],
      },
    ],
  },
  {
    id: '1002',
    name: 'order_update',
    language: 'de',
    status: 'APPROVED',
    category: 'UTILITY',
    parameter_format: 'POSITIONAL',
    components: [body('Hallo {{1}}, Bestellung {{2}} ist unterwegs.')],
  },
  {
    id: '1003',
    name: 'promo_named',
    language: 'en_US',
    status: 'APPROVED',
    category: 'MARKETING',
    parameter_format: 'NAMED',
    components: [
      body('Hi {{first_name}}, {{discount}} off today', {
        body_text_named_params: [
          { param_name: 'first_name', example: 'Ann' },
          { param_name: 'discount', example: '10%' },
        ],
      }),
    ],
  },
  {
    id: '1004',
    name: 'otp_code',
    language: 'en_US',
    status: 'APPROVED',
    category: 'AUTHENTICATION',
    components: [
      body('*{{1}}* is your verification code.'),
      { type: 'BUTTONS', buttons: [{ type: 'OTP', otp_type: 'COPY_CODE', text: 'Copy code' }] },
    ],
  },
  {
    id: '1005',
    name: 'spring_sale',
    language: 'en_US',
    status: 'APPROVED',
    category: 'MARKETING',
    components: [body('Our spring sale starts today.')],
  },
  {
    id: '1006',
    name: 'new_arrivals',
    language: 'en_US',
    status: 'PAUSED',
    category: 'MARKETING',
    components: [body('New arrivals are in.')],
  },
  {
    id: '1007',
    name: 'header_text',
    language: 'en_US',
    status: 'APPROVED',
    category: 'UTILITY',
    components: [{ type: 'HEADER', format: 'TEXT', text: 'Order {{1}}' }, body('It is on its way.')],
  },
  {
    id: '1008',
    name: 'cart_reminder',
    language: 'en_US',
    status: 'APPROVED',
    category: 'MARKETING',
    components: [
      { type: 'HEADER', format: 'TEXT', text: 'Forget something, {{1}}?', example: { header_text: ['Pablo'] } },
      body('Looks like you left these items in your cart.'),
      { type: 'BUTTONS', buttons: [{ type: 'MPM', text: 'View items' }] },
    ],
  },
  {
    id: '1010',
    name: 'order_pay',
    language: 'en_US',
    status: 'APPROVED',
    category: 'UTILITY',
    components: [
      body('Your order {{1}} is ready. Pay here.', { body_text: [['42']] }),
      { type: 'BUTTONS', buttons: [{ type: 'ORDER_DETAILS', text: 'Review and Pay' }] },
    ],
  },
  {
    id: '1009',
    name: 'catalog_intro',
    language: 'en_US',
    status: 'APPROVED',
    category: 'MARKETING',
    components: [
      body('Now shop for your favourite products right here on WhatsApp! Get {{1}} off.', { body_text: [['10%']] }),
      { type: 'BUTTONS', buttons: [{ type: 'CATALOG', text: 'View catalog' }] },
    ],
  },
];
// Enough more to need three of msgd's pages of 100.
const FILLERS: MetaTemplate[] = Array.from({ length: 223 }, (_, i) => ({
  id: String(2000 + i),
  name: `filler_${String(i).padStart(3, '0')}`,
  language: 'en_US',
  status: 'APPROVED',
  category: 'MARKETING',
  components: [body('Filler')],
}));

let graph: GraphFake;
let s: TestServer;
let p: Awaited<ReturnType<typeof setupPartner>>;
let gatewayId: string;
let kept: KeptStore;

const balance = () => balanceOf(s.ctx, p.partnerId);
const messageCount = async () =>
  (await s.ctx.store.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM messages WHERE partner_id = ${p.partnerId}`))!.n;
const posts = () => graph.requests.filter((r) => r.method === 'POST');
const sync = () =>
  syncGatewayTemplates({ ctx: s.ctx, dispatcher: s.rt.dispatcher, timeoutMs: 5000 }, gatewayId) as Promise<any>;
const sendWa = (template: Record<string, unknown>, to = '+16505550101') =>
  postJson(`${s.url}/api/send-whatsapp.php`, { to, type: 'template', template }, p.token);

/** A template webhook as Meta posts it: entry.id the WABA, signed with the app secret. */
async function templateWebhook(field: string, value: Record<string, unknown>, time = Math.floor(Date.now() / 1000)) {
  const raw = asciiJson({
    object: 'whatsapp_business_account',
    entry: [{ id: WABA, time, changes: [{ field, value }] }],
  });
  const res = await postWebhook(`${s.url}/api/webhook.php`, raw, metaHeaders(SECRET, raw));
  expect(res.status).toBe(200);
  return processed(s.ctx, res.json.id);
}

const statusUpdate = (t: MetaTemplate, event: string, time?: number) =>
  templateWebhook(
    'message_template_status_update',
    {
      event,
      message_template_id: Number(t.id),
      message_template_name: t.name,
      message_template_language: t.language,
      reason: event === 'PAUSED' ? 'NONE' : null,
      message_template_category: t.category,
      ...(event === 'PAUSED' ? { other_info: { title: 'FIRST_PAUSE', description: 'paused for low quality' } } : {}),
    },
    time,
  );

const ORDER_UPDATE = {
  name: 'order_update',
  language: 'en_US',
  components: [
    { type: 'header', parameters: [{ type: 'image', image: { link: 'https://cdn.example/p.jpg' } }] },
    {
      type: 'body',
      parameters: [
        { type: 'text', text: 'Ann' },
        { type: 'text', text: '42' },
      ],
    },
    { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'abc' }] },
  ],
};

beforeAll(async () => {
  graph = await startGraphFake({ accounts: [{ id: PHONE_ID, kind: 'whatsapp', token: TOKEN }] });
  graph.setCatalogue(WABA, TOKEN, [...CATALOGUE, ...FILLERS]);
  kept = await keptStore();
  s = await startTestServer({ 'log.level': 'warn' }, { dataDir: kept.dataDir, env: kept.env });
  // The sync msgd runs on start (of no gateway yet) done, so the ones below are the test's own.
  await waitFor(
    async () =>
      (await s.ctx.store.get(sql`SELECT 1 FROM cron_runs WHERE key LIKE 'whatsapp-templates-sync:%'`)) !== undefined &&
      (await s.ctx.store.get(sql`SELECT 1 FROM jobs WHERE kind = 'maintenance.whatsapp-templates-sync'`)) === undefined,
    'the sync on start',
    10_000,
  );
  p = await setupPartner(s.ctx, { balance: '10.00', prices: { whatsapp: '0.05' } });
  gatewayId = (
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: { base_url: graph.url, phone_number_id: PHONE_ID, waba_id: WABA },
        secrets: { access_token: TOKEN, app_secret: SECRET },
      },
      'whatsapp',
      SENDER,
    )
  ).gateway.id;
});
afterAll(async () => {
  await s.stop();
  await graph.close();
  await kept.drop();
});
beforeEach(() => graph.reset());

describe('before the first sync', () => {
  it('sends any template unchecked, as before', async () => {
    const r = await sendWa({ name: 'not_in_any_catalogue', language: 'en_US' });
    expect(r.status, r.text).toBe(200);
  });
});

describe('sync', () => {
  it('reads every page by cursor, with the token in the header and never in a URL', async () => {
    const out = await sync();
    expect(out).toEqual({ gateway: expect.any(String), templates: CATALOGUE.length + FILLERS.length });
    const gets = graph.requests.filter((r) => r.method === 'GET');
    expect(gets).toHaveLength(3);
    expect(gets.map((r) => r.query.after ?? null)).toEqual([null, expect.any(String), expect.any(String)]);
    for (const g of gets) {
      expect(g.path).toBe(`/v26.0/${WABA}/message_templates`);
      expect(g.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(g.query.access_token).toBeUndefined();
      expect(g.query.fields).toContain('components');
    }
    const rows = await s.ctx.store.all<any>(
      sql`SELECT name, language, status, category, parameter_format FROM whatsapp_templates WHERE gateway_id = ${gatewayId} ORDER BY name, language`,
    );
    expect(rows).toHaveLength(CATALOGUE.length + FILLERS.length);
    expect(rows.find((r) => r.name === 'promo_named')).toEqual({
      name: 'promo_named',
      language: 'en_US',
      status: 'APPROVED',
      category: 'marketing',
      parameter_format: 'named',
    });
  });

  it('drops a template deleted at Meta on the next sync', async () => {
    graph.setCatalogue(WABA, TOKEN, [...CATALOGUE, ...FILLERS.slice(1)]);
    try {
      await sync();
      const n = (await s.ctx.store.get<{ n: number }>(
        sql`SELECT COUNT(*) AS n FROM whatsapp_templates WHERE name = 'filler_000'`,
      ))!;
      expect(n.n).toBe(0);
      expect((await sendWa({ name: 'filler_000', language: 'en_US' })).body.error.code).toBe('template_invalid');
    } finally {
      graph.setCatalogue(WABA, TOKEN, [...CATALOGUE, ...FILLERS]);
      await sync();
    }
  });

  it('keeps the last catalogue when Graph refuses, and says why without the token', async () => {
    graph.setCatalogue(WABA, 'another-token', [...CATALOGUE, ...FILLERS]);
    try {
      const out = await sync();
      expect(out.error).toMatch(/HTTP 401, Graph error 190/);
      expect(out.error).not.toContain(TOKEN);
      const row = await s.ctx.store.get<any>(
        sql`SELECT * FROM whatsapp_template_syncs WHERE gateway_id = ${gatewayId}`,
      );
      expect(row.error).toMatch(/190/);
      expect(row.synced_at).not.toBeNull();
      expect((await sendWa(ORDER_UPDATE)).status).toBe(200);
    } finally {
      graph.setCatalogue(WABA, TOKEN, [...CATALOGUE, ...FILLERS]);
      await sync();
    }
  });
});

describe('a template send checked against the catalogue', () => {
  beforeAll(async () => {
    await sync();
  });

  it('passes a template that fits, and sends it to Meta as given', async () => {
    const before = await balance();
    const r = await sendWa(ORDER_UPDATE);
    expect(r.status, r.text).toBe(200);
    expect(before - (await balance())).toBe(50_000);
    await waitFor(() => posts().length === 1, 'the template to reach Graph', 5000);
    expect(posts()[0].body.template.components).toEqual(ORDER_UPDATE.components);
  });

  const cases: [string, Record<string, unknown>, RegExp, { field: string; message: RegExp }][] = [
    [
      'an unknown name',
      { name: 'order_updates', language: 'en_US' },
      /is not in the WhatsApp catalogue/,
      { field: 'template.name', message: /no approved template by this name/ },
    ],
    [
      'a language it has no translation in',
      { ...ORDER_UPDATE, language: 'fr' },
      /has no translation in this language/,
      { field: 'template.language', message: /de, en_US/ },
    ],
    [
      'a PAUSED template',
      { name: 'new_arrivals', language: 'en_US' },
      /is PAUSED/,
      { field: 'template.status', message: /only an APPROVED template/ },
    ],
    [
      'too few body parameters',
      { name: 'order_update', language: 'de', parameters: ['Ann'] },
      /does not take these parameters/,
      { field: 'template.components.body', message: /takes 2 parameters \(\{\{1\}\}, \{\{2\}\}\), got 1/ },
    ],
    [
      'body parameters for a template without any',
      { name: 'spring_sale', language: 'en_US', parameters: ['x'] },
      /does not take these parameters/,
      { field: 'template.components.body', message: /takes 0 parameters, got 1/ },
    ],
    [
      'positional parameters for a named template',
      { name: 'promo_named', language: 'en_US', parameters: ['Ann', '10%'] },
      /does not take these parameters/,
      {
        field: 'template.components.body',
        message: /parameters are named: give parameter_name for each of first_name, discount/,
      },
    ],
    [
      'a wrong parameter name',
      {
        name: 'promo_named',
        language: 'en_US',
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', parameter_name: 'first_name', text: 'Ann' },
              { type: 'text', parameter_name: 'percent', text: '10%' },
            ],
          },
        ],
      },
      /does not take these parameters/,
      { field: 'template.components.body', message: /missing named parameter discount/ },
    ],
    [
      'named parameters for a positional template',
      {
        name: 'order_update',
        language: 'de',
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', parameter_name: 'a', text: 'Ann' },
              { type: 'text', parameter_name: 'b', text: '42' },
            ],
          },
        ],
      },
      /does not take these parameters/,
      { field: 'template.components.body', message: /positional parameters .* leave out parameter_name/ },
    ],
    [
      'a document for an image header',
      {
        ...ORDER_UPDATE,
        components: [
          { type: 'header', parameters: [{ type: 'document', document: { link: 'https://cdn.example/a.pdf' } }] },
          ...ORDER_UPDATE.components.slice(1),
        ],
      },
      /does not take these parameters/,
      { field: 'template.components.header', message: /image header: give a image parameter, not document/ },
    ],
    [
      'no header parameter for an image header',
      { ...ORDER_UPDATE, components: ORDER_UPDATE.components.slice(1) },
      /does not take these parameters/,
      { field: 'template.components.header', message: /takes one image parameter, got 0/ },
    ],
    [
      'no parameter for a text header variable',
      { name: 'header_text', language: 'en_US' },
      /does not take these parameters/,
      { field: 'template.components.header', message: /text header takes 1 parameter, got 0/ },
    ],
    [
      'no parameter for the URL button',
      { ...ORDER_UPDATE, components: ORDER_UPDATE.components.slice(0, 2) },
      /does not take these parameters/,
      { field: 'template.components.button[0]', message: /url button at index 0 takes 1 parameter/ },
    ],
    [
      'a button the template does not have',
      {
        ...ORDER_UPDATE,
        components: [
          ...ORDER_UPDATE.components,
          { type: 'button', sub_type: 'quick_reply', index: '5', parameters: [] },
        ],
      },
      /does not take these parameters/,
      { field: 'template.components.button[5]', message: /no button at index 5/ },
    ],
    [
      'an authentication template without its code button',
      { name: 'otp_code', language: 'en_US', parameters: ['123456'] },
      /does not take these parameters/,
      { field: 'template.components.button[0]', message: /otp button at index 0 takes 1 parameter/ },
    ],
  ];

  it.each(cases)('refuses %s with template_invalid, before any cost', async (_what, template, message, detail) => {
    const before = [await balance(), await messageCount()];
    const r = await sendWa(template);
    expect(r.status, r.text).toBe(400);
    expect(r.body.error.code).toBe('template_invalid');
    expect(r.body.error.message).toMatch(message);
    expect(r.body.error.details).toContainEqual({
      field: detail.field,
      message: expect.stringMatching(detail.message),
    });
    expect([await balance(), await messageCount()]).toEqual(before);
    await new Promise((res) => setTimeout(res, 50));
    expect(posts()).toHaveLength(0);
  });

  it('passes a quick reply payload, a named template and an authentication code', async () => {
    const ok = [
      {
        ...ORDER_UPDATE,
        components: [
          ...ORDER_UPDATE.components,
          { type: 'button', sub_type: 'quick_reply', index: '1', parameters: [{ type: 'payload', payload: 'STOP' }] },
        ],
      },
      {
        name: 'promo_named',
        language: 'en_US',
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', parameter_name: 'discount', text: '10%' },
              { type: 'text', parameter_name: 'first_name', text: 'Ann' },
            ],
          },
        ],
      },
      {
        name: 'otp_code',
        language: 'en_US',
        components: [
          { type: 'body', parameters: [{ type: 'text', text: '123456' }] },
          { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: '123456' }] },
        ],
      },
    ];
    for (const t of ok) {
      const r = await sendWa(t);
      expect(r.status, r.text).toBe(200);
    }
  });

  it('passes a multi-product template with its products, a catalogue template with or without a thumbnail and an order to pay', async () => {
    const products = {
      type: 'button',
      sub_type: 'mpm',
      index: 0,
      parameters: [
        {
          type: 'action',
          action: {
            thumbnail_product_retailer_id: '2lc20305pt',
            sections: [{ title: 'Your cart', product_items: [{ product_retailer_id: '2lc20305pt' }] }],
          },
        },
      ],
    };
    const discount = { type: 'body', parameters: [{ type: 'text', text: '10%' }] };
    const ok = [
      {
        name: 'cart_reminder',
        language: 'en_US',
        components: [{ type: 'header', parameters: [{ type: 'text', text: 'Pablo' }] }, products],
      },
      {
        name: 'catalog_intro',
        language: 'en_US',
        components: [
          discount,
          {
            type: 'button',
            sub_type: 'CATALOG',
            index: 0,
            parameters: [{ type: 'action', action: { thumbnail_product_retailer_id: '2lc20305pt' } }],
          },
        ],
      },
      { name: 'catalog_intro', language: 'en_US', components: [discount] },
      {
        name: 'order_pay',
        language: 'en_US',
        components: [
          { type: 'body', parameters: [{ type: 'text', text: '42' }] },
          {
            type: 'button',
            sub_type: 'order_details',
            index: 0,
            parameters: [
              {
                type: 'action',
                action: {
                  order_details: {
                    reference_id: 'order-42',
                    type: 'digital-goods',
                    currency: 'INR',
                    total_amount: { value: 21000, offset: 100 },
                    order: { status: 'pending', items: [], subtotal: { value: 21000, offset: 100 } },
                  },
                },
              },
            ],
          },
        ],
      },
    ];
    for (const t of ok) {
      const r = await sendWa(t);
      expect(r.status, r.text).toBe(200);
    }
    // The products are what a multi-product message shows: Meta refuses it without them.
    const r = await sendWa({
      name: 'cart_reminder',
      language: 'en_US',
      components: [{ type: 'header', parameters: [{ type: 'text', text: 'Pablo' }] }],
    });
    expect(r.status, r.text).toBe(400);
    expect(r.body.error.details).toEqual([
      {
        field: 'template.components.button[0]',
        message: expect.stringMatching(/mpm button at index 0 takes 1 parameter/),
      },
    ]);
  });

  it("a recipient's marketing opt-out stops a marketing template, not an authentication one, by the catalogue's category", async () => {
    const to = '+16505550177';
    await s.ctx.store.transaction((tx) =>
      addSuppressionIn(tx, s.ctx, {
        partnerId: p.partnerId,
        channel: 'whatsapp',
        address: to,
        reason: 'provider_refused',
        source: 'test',
      }),
    );
    const otp = {
      name: 'otp_code',
      language: 'en_US',
      components: [
        { type: 'body', parameters: [{ type: 'text', text: '123456' }] },
        { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: '123456' }] },
      ],
    };
    // The request names no category (or a wrong one): the catalogue's AUTHENTICATION counts.
    expect((await sendWa(otp, to)).status).toBe(200);
    expect((await sendWa({ ...otp, category: 'MARKETING' }, to)).status).toBe(200);
    const sale = await sendWa({ name: 'spring_sale', language: 'en_US', category: 'AUTHENTICATION' }, to);
    expect(sale.status).toBe(400);
    expect(sale.body.error.code).toBe('recipient_suppressed');
  });

  it("a scheduled template is judged at its time by the catalogue's category too", async () => {
    const to = '+16505550178';
    const sendAt = new Date(s.clock.now() + 3_600_000).toISOString();
    // Accepted before any opt-out; the marketing one is labelled AUTHENTICATION, the passcode MARKETING.
    const sale = await postJson(
      `${s.url}/api/send-whatsapp.php`,
      {
        to,
        type: 'template',
        template: { name: 'spring_sale', language: 'en_US', category: 'AUTHENTICATION' },
        send_at: sendAt,
      },
      p.token,
    );
    const otp = await postJson(
      `${s.url}/api/send-whatsapp.php`,
      {
        to,
        type: 'template',
        template: {
          name: 'otp_code',
          language: 'en_US',
          category: 'MARKETING',
          components: [
            { type: 'body', parameters: [{ type: 'text', text: '123456' }] },
            { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: '123456' }] },
          ],
        },
        send_at: sendAt,
      },
      p.token,
    );
    expect([sale.status, otp.status], JSON.stringify([sale.body, otp.body])).toEqual([200, 200]);
    // Then the customer stops marketing messages (Meta 131050), and their time comes.
    await s.ctx.store.transaction((tx) =>
      addSuppressionIn(tx, s.ctx, {
        partnerId: p.partnerId,
        channel: 'whatsapp',
        address: to,
        reason: 'provider_refused',
        source: 'test',
      }),
    );
    const statusOf = (id: string) =>
      s.ctx.store.get<{ status: string; error_code: string | null }>(
        sql`SELECT status, error_code FROM messages WHERE id = ${id}`,
      );
    for (const r of [sale, otp]) await s.ctx.store.transaction((tx) => releaseScheduledIn(tx, s.ctx, r.body.id));
    expect(await statusOf(sale.body.id)).toEqual({ status: 'failed', error_code: 'recipient_suppressed' });
    expect(await statusOf(otp.body.id)).toEqual({ status: 'queued', error_code: null });
  });
});

describe('status and category webhooks', () => {
  beforeAll(async () => {
    await sync();
  });

  it('a PAUSED webhook refuses the template at once; APPROVED lets it through again', async () => {
    const t = CATALOGUE.find((c) => c.name === 'spring_sale')!;
    expect((await sendWa({ name: 'spring_sale', language: 'en_US' })).status).toBe(200);
    const paused = await statusUpdate(t, 'PAUSED');
    expect(paused.processing).toBe('processed');
    const r = await sendWa({ name: 'spring_sale', language: 'en_US' });
    expect(r.body.error).toMatchObject({ code: 'template_invalid', message: expect.stringMatching(/is PAUSED/) });
    await statusUpdate(t, 'APPROVED');
    expect((await sendWa({ name: 'spring_sale', language: 'en_US' })).status).toBe(200);
  });

  it('events that are not a status leave the template sendable; REINSTATED and UNARCHIVED make it sendable again', async () => {
    const t = CATALOGUE.find((c) => c.name === 'spring_sale')!;
    const send = () => sendWa({ name: 'spring_sale', language: 'en_US' });
    // At risk from feedback, locked against edits: Meta still sends it.
    for (const event of ['FLAGGED', 'LOCKED', 'LIMIT_EXCEEDED']) {
      expect((await statusUpdate(t, event)).processing).not.toBe('failed');
      const r = await send();
      expect(r.status, `${event}: ${r.text}`).toBe(200);
    }
    for (const [off, on] of [
      ['DISABLED', 'REINSTATED'],
      ['ARCHIVED', 'UNARCHIVED'],
    ]) {
      await statusUpdate(t, off);
      expect((await send()).status).toBe(400);
      await statusUpdate(t, on);
      const r = await send();
      expect(r.status, `${on}: ${r.text}`).toBe(200);
    }
  });

  it('an older webhook arriving late does not undo a newer state', async () => {
    const t = CATALOGUE.find((c) => c.name === 'order_update' && c.language === 'de')!;
    const now = Math.floor(Date.now() / 1000);
    await statusUpdate(t, 'DISABLED', now + 5);
    const late = await statusUpdate(t, 'APPROVED', now + 1);
    expect(late.error).toMatch(/a newer state is already recorded/);
    const r = await sendWa({ name: 'order_update', language: 'de', parameters: ['Ann', '42'] });
    expect(r.body.error.message).toMatch(/is DISABLED/);
    await statusUpdate(t, 'APPROVED', now + 10);
  });

  it('a webhook not signed with the gateway app secret changes nothing', async () => {
    const raw = asciiJson({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: WABA,
          time: Math.floor(Date.now() / 1000) + 100,
          changes: [
            {
              field: 'message_template_status_update',
              value: {
                event: 'DISABLED',
                message_template_id: 1005,
                message_template_name: 'spring_sale',
                message_template_language: 'en_US',
              },
            },
          ],
        },
      ],
    });
    const res = await postWebhook(`${s.url}/api/webhook.php`, raw, metaHeaders('not-the-secret', raw));
    expect(res.status).toBe(401);
    expect((await sendWa({ name: 'spring_sale', language: 'en_US' })).status).toBe(200);
  });

  it('a template created since the sync is known from its APPROVED webhook, parameters unchecked', async () => {
    await templateWebhook('message_template_status_update', {
      event: 'APPROVED',
      message_template_id: 1099,
      message_template_name: 'brand_new',
      message_template_language: 'en-US',
      reason: null,
      message_template_category: 'UTILITY',
    });
    expect((await sendWa({ name: 'brand_new', language: 'en_US', parameters: ['any'] })).status).toBe(200);
  });

  it('a PAUSED webhook between the check and the accept transaction refuses the send there, before the debit', async () => {
    const t = CATALOGUE.find((c) => c.name === 'spring_sale')!;
    const principal = {
      tokenId: 'tok_test',
      partnerId: p.partnerId,
      partnerSlug: p.slug,
      scopes: ['*'],
      rateLimitPerMinute: null,
    };
    const content = { kind: 'template' as const, template: { name: 'spring_sale', language: 'en_US' } };
    const pre = await templatePreflight(
      s.ctx,
      p.partnerId,
      await preflight(s.ctx, principal, 'whatsapp'),
      '+16505554001',
      content,
    );
    expect(pre.template).toBeDefined();
    await statusUpdate(t, 'PAUSED', Math.floor(Date.now() / 1000) + 500);
    const before = [await balance(), await messageCount()];
    await expect(
      accept(
        s.rt.acceptDeps,
        { principal, preflight: pre, to: '+16505554001', content, quote: quote(pre.unitPrice, 'whatsapp') },
        { render: (m) => ({ id: m.id }) },
      ),
    ).rejects.toMatchObject({ code: 'template_invalid', message: expect.stringMatching(/is PAUSED/) });
    expect([await balance(), await messageCount()]).toEqual(before);
    await statusUpdate(t, 'APPROVED', Math.floor(Date.now() / 1000) + 600);
  });

  it('a send racing a PAUSED webhook either passed before it or is refused: never debited and then failed', async () => {
    const t = CATALOGUE.find((c) => c.name === 'order_update' && c.language === 'en_US')!;
    const before = await balance();
    const startedCount = await messageCount();
    const sends = Array.from({ length: 40 }, (_, i) => sendWa(ORDER_UPDATE, `+1650555${String(2000 + i)}`));
    const hook = statusUpdate(t, 'PAUSED', Math.floor(Date.now() / 1000) + 1000);
    const results = await Promise.all(sends);
    const done = await hook;
    expect(done.processing).toBe('processed');
    const accepted = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status !== 200);
    expect(accepted.length + refused.length).toBe(40);
    for (const r of refused) expect(r.body.error.code, r.text).toBe('template_invalid');
    // Every accepted send was debited once, nothing else was.
    expect(before - (await balance())).toBe(accepted.length * 50_000);
    expect((await messageCount()) - startedCount).toBe(accepted.length);
    // Every accepted message was committed before the webhook's change; after it, all are refused.
    const pausedAt = (await s.ctx.store.get<{ updated_at: number }>(
      sql`SELECT updated_at FROM whatsapp_templates WHERE meta_id = '1001'`,
    ))!.updated_at;
    for (const r of accepted) {
      const m = (await s.ctx.store.get<{ created_at: number }>(
        sql`SELECT created_at FROM messages WHERE id = ${r.body.id}`,
      ))!;
      expect(m.created_at).toBeLessThanOrEqual(pausedAt);
    }
    expect((await sendWa(ORDER_UPDATE)).body.error.code).toBe('template_invalid');
    await statusUpdate(t, 'APPROVED', Math.floor(Date.now() / 1000) + 2000);
  });
});

describe('price per template category', () => {
  beforeAll(async () => {
    await sync();
    await setPrice(s.ctx, { channel: 'whatsapp', category: 'marketing', amount: parseMoney('0.08') }, 'test');
    await setPrice(s.ctx, { channel: 'whatsapp', category: 'utility', amount: parseMoney('0.02') }, 'test');
    await setPrice(
      s.ctx,
      { channel: 'whatsapp', category: 'authentication', amount: parseMoney('0.03'), partner: p.partnerId },
      'test',
    );
  });

  const lastDebit = async () =>
    (await s.ctx.store.get<{ amount: number; note: string }>(
      sql`SELECT amount, note FROM ledger_entries WHERE partner_id = ${p.partnerId} AND kind = 'debit' ORDER BY id DESC LIMIT 1`,
    ))!;

  it('charges the category price, partner+category first, and says so in the ledger', async () => {
    expect((await sendWa({ name: 'spring_sale', language: 'en_US' })).status).toBe(200);
    expect(await lastDebit()).toEqual({ amount: -80_000, note: 'whatsapp template spring_sale (en_US), marketing' });
    const otp = {
      name: 'otp_code',
      language: 'en_US',
      components: [
        { type: 'body', parameters: [{ type: 'text', text: '1' }] },
        { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: '1' }] },
      ],
    };
    expect((await sendWa(otp)).status).toBe(200);
    expect((await lastDebit()).amount).toBe(-30_000);
    expect((await sendWa(ORDER_UPDATE, '+16505553001')).status).toBe(200);
    expect(await lastDebit()).toEqual({ amount: -20_000, note: 'whatsapp template order_update (en_US), utility' });
  });

  it('uses the category of the last template_category_update', async () => {
    await templateWebhook(
      'template_category_update',
      {
        message_template_id: 1005,
        message_template_name: 'spring_sale',
        message_template_language: 'en_US',
        previous_category: 'MARKETING',
        new_category: 'UTILITY',
      },
      Math.floor(Date.now() / 1000) + 3000,
    );
    expect((await sendWa({ name: 'spring_sale', language: 'en_US' }, '+16505553002')).status).toBe(200);
    expect(await lastDebit()).toEqual({ amount: -20_000, note: 'whatsapp template spring_sale (en_US), utility' });
  });

  it('a utility template inside an open customer-service window is free', async () => {
    const who = '+16505553003';
    const raw = asciiJson(
      waInbound(PHONE_ID, {
        from: who.slice(1),
        id: `wamid.${Math.random().toString(36).slice(2)}`,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: 'text',
        text: { body: 'where is my order?' },
      }),
    );
    const res = await postWebhook(`${s.url}/api/webhook.php`, raw, metaHeaders(SECRET, raw));
    expect((await processed(s.ctx, res.json.id)).processing).toBe('processed');
    const before = await balance();
    expect((await sendWa(ORDER_UPDATE, who)).status).toBe(200);
    expect(await balance()).toBe(before);
    expect(await lastDebit()).toEqual({
      amount: 0,
      note: 'whatsapp template order_update (en_US), utility, free inside the customer-service window',
    });
    // A marketing template to the same customer is charged all the same.
    expect(
      (
        await sendWa(
          {
            name: 'promo_named',
            language: 'en_US',
            components: [
              {
                type: 'body',
                parameters: [
                  { type: 'text', parameter_name: 'first_name', text: 'A' },
                  { type: 'text', parameter_name: 'discount', text: '5%' },
                ],
              },
            ],
          },
          who,
        )
      ).status,
    ).toBe(200);
    expect(before - (await balance())).toBe(80_000);
  });
});

describe('GET /v1/templates', () => {
  beforeAll(async () => {
    await sync();
  });
  const get = async (query: string, token = p.token) => {
    const res = await fetch(`${s.url}/v1/templates${query}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('lists what the partner may send, filtered, in the documented shape', async () => {
    const r = await get('?name=order_update&language=en_US');
    expect(r.status).toBe(200);
    expect(() => pageOf(templateOut).parse(r.body)).not.toThrow();
    expect(r.body.data).toHaveLength(1);
    expect(r.body.data[0]).toMatchObject({
      name: 'order_update',
      language: 'en_US',
      status: 'APPROVED',
      category: 'utility',
      parameter_format: 'positional',
      parameters: {
        header: { kind: 'media', type: 'image' },
        body: ['1', '2'],
        buttons: [{ index: 0, type: 'url', params: 1 }],
        checked: true,
      },
    });
    const paused = await get('?status=paused');
    expect(paused.body.data.map((t: any) => t.name)).toEqual(['new_arrivals']);
    const auth = await get('?category=AUTHENTICATION');
    expect(auth.body.data.map((t: any) => t.name)).toEqual(['otp_code']);
  });

  it('pages with cursors, without gaps or repeats', async () => {
    const seen: string[] = [];
    let cursor: string | null = '';
    for (let i = 0; cursor !== null && i < 20; i++) {
      const r = await get(`?category=marketing&limit=50${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      seen.push(...r.body.data.map((t: any) => t.id));
      cursor = r.body.next_cursor;
    }
    expect(cursor).toBeNull();
    expect(new Set(seen).size).toBe(seen.length);
    const all = (await s.ctx.store.get<{ n: number }>(
      sql`SELECT COUNT(*) AS n FROM whatsapp_templates WHERE gateway_id = ${gatewayId} AND category = 'marketing'`,
    ))!;
    expect(seen).toHaveLength(all.n);
  });

  it('needs templates:read, and shows another partner none of these', async () => {
    const other = await setupPartner(s.ctx, { scopes: 'channels:read' });
    const r = await get('', other.token);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('insufficient_scope');
    const reader = await setupPartner(s.ctx, { scopes: 'templates:read' });
    expect((await get('', reader.token)).body).toEqual({ data: [], next_cursor: null });
    expect((await get('?category=promotional')).status).toBe(400);
  });
});

describe('on start', () => {
  it('msgd reads the catalogue of every WhatsApp gateway with a waba_id when it starts', async () => {
    graph.setCatalogue(WABA, TOKEN, [...CATALOGUE, ...FILLERS.slice(0, 10)]);
    await s.stop();
    s.clock.advance(2000);
    graph.reset();
    s = await startTestServer({ 'log.level': 'warn' }, { dataDir: kept.dataDir, env: kept.env, clock: s.clock });
    await waitFor(
      async () =>
        (
          await s.ctx.store.get<{ templates: number }>(
            sql`SELECT templates FROM whatsapp_template_syncs WHERE gateway_id = ${gatewayId}`,
          )
        )?.templates ===
        CATALOGUE.length + 10,
      'the catalogue read on start',
      10_000,
    );
    expect(graph.requests.filter((r) => r.method === 'GET')).toHaveLength(1);
  });
});
