import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMoney } from '../../src/lib/money.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { EMAIL, SMS, WHATSAPP, sandboxPartner, send } from '../helpers/gateways.js';
import { balanceOf, ledgerOf, message, messagesOf } from '../helpers/rows.js';

// Payload rules per endpoint: every problem is listed in details (field + message), limits
// per channel hold at exactly the boundary, SMS is priced per segment.

let s: TestServer;
let token: string;
let partnerId: string;
beforeAll(async () => {
  s = await startTestServer();
  const p = await sandboxPartner(s.ctx, {
    balance: '1000',
    prices: { sms: '0.01', email: '0.001', whatsapp: '0.02', messenger: '0.003', instagram: '0.004' },
  });
  token = p.token;
  partnerId = p.partnerId;
});
afterAll(async () => {
  await s.stop();
});

async function invalid(path: string, body: unknown) {
  const before = (await messagesOf(s.ctx, partnerId)).length;
  const r = await send(s.url, path, body, token);
  expect(r.status, r.text).toBe(400);
  expect(r.body.error.code).toBe('invalid_request');
  expect((await messagesOf(s.ctx, partnerId)).length).toBe(before);
  return r.body.error.details as Array<{ field?: string; message: string }>;
}

const fields = (details: Array<{ field?: string }>) => details.map((d) => d.field).sort();

async function ok(path: string, body: unknown) {
  const r = await send(s.url, path, body, token);
  expect(r.status, r.text).toBe(200);
  expect(r.body.status).toBe('queued');
  return await message(s.ctx, r.body.id);
}

describe('a body that is JSON but not an object', () => {
  it.each([[[]], [null], [0], ['"text"'], [true]])(
    '%j is 400 "the body must be a JSON object", listing the fields the endpoint needs',
    async (body) => {
      for (const [path, needed] of [
        [SMS, ['text', 'to']],
        [EMAIL, ['html', 'subject', 'to']],
        [WHATSAPP, ['text', 'to']],
      ] as const) {
        const r = await send(s.url, path, body, token);
        expect([r.status, r.body.error.code, r.body.error.message]).toEqual([
          400,
          'invalid_request',
          'the body must be a JSON object',
        ]);
        expect(fields(r.body.error.details)).toEqual(needed);
      }
    },
  );
});

describe('POST /api/send-sms.php', () => {
  it.each([
    ['no leading +', '14155550123'],
    ['spaces', '+1 415 555 0123'],
    ['letters', '+1415555O123'],
    ['country code 0', '+04155550123'],
    ['too long', '+1415555012345678'],
    ['too short', '+1415'],
    ['fictional 555 number (max metadata)', '+15555550123'],
    ['a number only max metadata knows is unassigned (min says valid)', '+6538531972'],
    ['not a string', 14155550123],
  ])('rejects %s as "to"', async (_name, to) => {
    const d = await invalid(SMS, { to, text: 'hi' });
    expect(fields(d)).toEqual(['to']);
    expect(d[0].message).toMatch(/E\.164|phone|string/);
  });

  it('lists every problem at once', async () => {
    const d = await invalid(SMS, {});
    expect(fields(d)).toEqual(['text', 'to']);
    for (const x of d) expect(x.message).toMatch(/required/);
    expect(fields(await invalid(SMS, { to: '+15555550123', text: 'x'.repeat(1601) }))).toEqual(['text', 'to']);
    expect(fields(await invalid(SMS, { to: '+14155550123', text: '' }))).toEqual(['text']);
  });

  it('a field of the wrong type says so, not that it is missing', async () => {
    const d = await invalid(SMS, { to: 14155550123, text: 5 });
    expect(d.map((x) => [x.field, x.message])).toEqual([
      ['to', 'must be a string: a phone number in E.164 format, e.g. +14155550123'],
      ['text', 'must be a string: the message text'],
    ]);
  });

  it('whitespace-only text is refused: it would be charged and show nothing', async () => {
    expect(await invalid(SMS, { to: '+14155550123', text: '   ' })).toEqual([
      { field: 'text', message: 'must not be only whitespace' },
    ]);
    expect(await invalid(SMS, { to: '+14155550123', text: '\r\n' })).toEqual([
      { field: 'text', message: 'must not be only whitespace' },
    ]);
    // Zero-width characters show nothing either (trim() keeps them).
    expect(await invalid(SMS, { to: '+14155550123', text: '\u200b\u200d \u2060' })).toEqual([
      { field: 'text', message: 'must not be only whitespace' },
    ]);
    expect(JSON.parse((await ok(SMS, { to: '+14155550123', text: '\u200bhi' })).content).text).toBe('\u200bhi');
    expect(JSON.parse((await ok(SMS, { to: '+14155550123', text: ' hi ' })).content).text).toBe(' hi ');
  });

  it('takes 1600 characters and refuses 1601', async () => {
    const d = await invalid(SMS, { to: '+14155550123', text: 'a'.repeat(1601) });
    expect(d).toEqual([{ field: 'text', message: 'must be at most 1600 characters (an emoji counts as 2)' }]);
    const m = await ok(SMS, { to: '+14155550123', text: 'a'.repeat(1600) });
    expect(m.segments).toBe(11);
  });

  it('counts the 1600 as Twilio does: an emoji is two characters, so Twilio never refuses a text msgd charged for (21617)', async () => {
    const m = await ok(SMS, { to: '+14155550123', text: '😀'.repeat(800) });
    // 33 emoji to a 67-unit part: a surrogate pair is never split across parts.
    expect(m.segments).toBe(25);
    for (const text of ['😀'.repeat(801), `${'a'.repeat(1599)}😀`]) {
      expect(await invalid(SMS, { to: '+14155550123', text })).toEqual([
        { field: 'text', message: 'must be at most 1600 characters (an emoji counts as 2)' },
      ]);
    }
  });

  it('stores the canonical E.164 number and ignores unknown keys', async () => {
    const m = await ok(SMS, { to: '+442071838750', text: 'hi', campaign: 'x', priority: 1 });
    expect(m.to).toBe('+442071838750');
    expect(m.channel_type).toBe('sms');
    expect(JSON.parse(m.content)).toEqual({ kind: 'text', text: 'hi' });
  });

  it.each([
    { name: '160 GSM-7 characters', text: 'a'.repeat(160), segments: 1 },
    { name: '161 GSM-7 characters', text: 'a'.repeat(161), segments: 2 },
    { name: '306 GSM-7 characters', text: 'a'.repeat(306), segments: 2 },
    { name: '307 GSM-7 characters', text: 'a'.repeat(307), segments: 3 },
    { name: '80 euro signs (2 septets each)', text: '€'.repeat(80), segments: 1 },
    { name: '81 euro signs', text: '€'.repeat(81), segments: 2 },
    { name: '70 UCS-2 characters', text: 'ж'.repeat(70), segments: 1 },
    { name: '71 UCS-2 characters', text: 'ж'.repeat(71), segments: 2 },
    { name: 'one emoji makes a GSM text UCS-2', text: `${'a'.repeat(69)}😀`, segments: 2 },
  ])('prices SMS per segment: $name = $segments segment(s)', async ({ text, segments }) => {
    const before = await balanceOf(s.ctx, partnerId);
    const m = await ok(SMS, { to: '+14155550123', text });
    const unit = parseMoney('0.01');
    expect({ segments: m.segments, price: m.price }).toEqual({ segments, price: segments * unit });
    expect(await balanceOf(s.ctx, partnerId)).toBe(before - segments * unit);
    const debit = (await ledgerOf(s.ctx, partnerId)).find((e) => e.message_id === m.id)!;
    expect({ kind: debit.kind, amount: debit.amount }).toEqual({ kind: 'debit', amount: -segments * unit });
  });

  it('402 when the segments cost more than is left, although one segment would fit', async () => {
    const p = await sandboxPartner(s.ctx, { balance: '0.015', channels: ['sms'], prices: { sms: '0.01' } });
    const two = await send(s.url, SMS, { to: '+14155550123', text: 'a'.repeat(161) }, p.token);
    expect(two.status).toBe(402);
    expect(two.body.error.code).toBe('insufficient_balance');
    // It says by how much: the partner can top up the difference.
    expect(two.body.error.message).toBe(
      'balance and credit limit do not cover this message: it costs 0.02 and 0.015 is available (balance 0.015 plus credit limit 0.00); top up to send',
    );
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.015'));
    expect((await send(s.url, SMS, { to: '+14155550123', text: 'a'.repeat(160) }, p.token)).status).toBe(200);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('0.005'));
  });
});

describe('POST /api/send-email.php', () => {
  const base = { to: 'ana@example.com', subject: 'Your order', html: '<p>Shipped</p>' };

  it.each([
    'ana',
    'ana@',
    '@example.com',
    'ana@example',
    'a b@example.com',
    'ana@exa mple.com',
    '<ana@example.com>',
    'Ana <ana@example.com>',
  ])('rejects %j as "to"', async (to) => {
    const d = await invalid(EMAIL, { ...base, to });
    expect(d).toEqual([{ field: 'to', message: 'must be a valid email address' }]);
  });

  it.each([
    '.ana@example.com',
    'ana.@example.com',
    'a..na@example.com',
    'ana@127.0.0.1',
    'ana@example.1',
    'ana@xn--zz.de',
  ])(
    'rejects %j as "to": dots only inside the local part, no numeric top-level domain, punycode that decodes',
    async (to) => {
      expect(await invalid(EMAIL, { ...base, to })).toEqual([
        { field: 'to', message: 'must be a valid email address' },
      ]);
      expect(await invalid(EMAIL, { ...base, reply_to: to })).toEqual([
        { field: 'reply_to', message: 'must be a valid email address' },
      ]);
    },
  );

  it.each(['jörg@example.de', 'ana@exa_mple.com', 'ana@bücher', 'ana@xn--.de', 'ana@.bücher.de'])(
    'rejects %j as "to" (non-ASCII local parts are not taken)',
    async (to) => {
      expect(await invalid(EMAIL, { ...base, to })).toEqual([
        { field: 'to', message: 'must be a valid email address' },
      ]);
    },
  );

  it('trims the address before checking it, and sends an internationalised domain in ASCII', async () => {
    const padded = await ok(EMAIL, { ...base, to: ' bob@example.com\t', reply_to: ' help@example.com ' });
    expect([padded.to, JSON.parse(padded.content).replyTo]).toEqual(['bob@example.com', 'help@example.com']);
    const idn = await ok(EMAIL, { ...base, to: 'bob@bücher.de', reply_to: 'Hilfe@MÜNCHEN.de' });
    expect([idn.to, JSON.parse(idn.content).replyTo]).toEqual(['bob@xn--bcher-kva.de', 'Hilfe@xn--mnchen-3ya.de']);
    // The punycode form was always taken, and an ASCII domain is kept exactly as written.
    expect((await ok(EMAIL, { ...base, to: 'bob@xn--bcher-kva.de' })).to).toBe('bob@xn--bcher-kva.de');
    expect((await ok(EMAIL, { ...base, to: 'Bob@Example.COM' })).to).toBe('Bob@Example.COM');
  });

  it.each(['Hi\nBcc: victim@example.com', 'Hi\r\nX: y', 'Hi\r'])(
    'rejects a subject with a line break (%j)',
    async (subject) => {
      const d = await invalid(EMAIL, { ...base, subject });
      expect(d).toEqual([{ field: 'subject', message: 'must not contain line breaks' }]);
    },
  );

  it('requires html (not empty, at most 512 KiB) and a subject', async () => {
    expect(await invalid(EMAIL, { to: base.to, subject: base.subject })).toEqual([
      { field: 'html', message: 'required: the HTML body' },
    ]);
    expect(fields(await invalid(EMAIL, { ...base, html: '' }))).toEqual(['html']);
    expect(fields(await invalid(EMAIL, { ...base, html: 'x'.repeat(512 * 1024 + 1) }))).toEqual(['html']);
    expect(fields(await invalid(EMAIL, { ...base, subject: '' }))).toEqual(['subject']);
    expect(fields(await invalid(EMAIL, { ...base, subject: 's'.repeat(999) }))).toEqual(['subject']);
    // A blank subject or body would be an empty-looking email, charged.
    expect(await invalid(EMAIL, { ...base, subject: '   ', html: ' \n ' })).toEqual([
      { field: 'subject', message: 'must not be only whitespace' },
      { field: 'html', message: 'must not be only whitespace' },
    ]);
    // The limit is named once, by the field it is on.
    expect(await invalid(EMAIL, { ...base, text: 't'.repeat(512 * 1024 + 1) })).toEqual([
      { field: 'text', message: expect.stringMatching(/^must be at most \d+ bytes of UTF-8$/) },
    ]);
  });

  it('checks the optional fields and lists every problem at once', async () => {
    const d = await invalid(EMAIL, {
      to: 'x',
      subject: 'a\nb',
      reply_to: 'nope',
      from_name: 'Shop\r\nBcc: x',
      text: 5,
    });
    expect(fields(d)).toEqual(['from_name', 'html', 'reply_to', 'subject', 'text', 'to']);
  });

  it('null for an optional field is the same as leaving it out', async () => {
    const m = await ok(EMAIL, { ...base, text: null, from_name: null, reply_to: null });
    expect(JSON.parse(m.content)).toEqual({ kind: 'email', subject: 'Your order', html: '<p>Shipped</p>' });
    // Required fields stay required.
    expect(fields(await invalid(EMAIL, { ...base, subject: null, html: null }))).toEqual(['html', 'subject']);
  });

  it("field problems are worded in the house style, never in zod's own words", async () => {
    const d = await invalid(EMAIL, { to: null, subject: 5, html: '<p>x</p>', text: 5, from_name: 5, reply_to: 5 });
    expect(d.map((x) => [x.field, x.message])).toEqual([
      ['to', 'required: an email address'],
      ['subject', 'must be a string: the subject line'],
      ['text', 'must be a string'],
      ['from_name', 'must be a string'],
      ['reply_to', 'must be a string: an email address'],
    ]);
  });

  it('accepts a full email and stores what the adapters need', async () => {
    const m = await ok(EMAIL, {
      ...base,
      html: 'h'.repeat(512 * 1024),
      text: 'Shipped',
      from_name: 'The Shop',
      reply_to: 'help@shop.example',
    });
    const c = JSON.parse(m.content);
    expect(c).toMatchObject({
      kind: 'email',
      subject: 'Your order',
      text: 'Shipped',
      fromName: 'The Shop',
      replyTo: 'help@shop.example',
    });
    expect(c.html).toHaveLength(512 * 1024);
    expect({ to: m.to, channel: m.channel_type, price: m.price }).toEqual({
      to: 'ana@example.com',
      channel: 'email',
      price: parseMoney('0.001'),
    });
  });
});

describe('POST /api/send-whatsapp.php', () => {
  it('WhatsApp text: E.164 (max metadata) and at most 4096 characters', async () => {
    expect(fields(await invalid(WHATSAPP, { to: '+15555550123', type: 'text', text: 'hi' }))).toEqual(['to']);
    expect(fields(await invalid(WHATSAPP, { to: '4155550123', text: 'hi' }))).toEqual(['to']);
    const long = await invalid(WHATSAPP, { to: '+14155550123', type: 'text', text: 'x'.repeat(4097) });
    expect(long).toEqual([
      { field: 'text', message: 'must be at most 4096 characters on whatsapp (an emoji counts as 2)' },
    ]);
    expect(fields(await invalid(WHATSAPP, { to: '+14155550123', type: 'text' }))).toEqual(['text']);
    const m = await ok(WHATSAPP, { to: '+14155550123', type: 'text', text: 'x'.repeat(4096) });
    expect({ channel: m.channel_type, to: m.to, price: m.price, segments: m.segments }).toEqual({
      channel: 'whatsapp',
      to: '+14155550123',
      price: parseMoney('0.02'),
      segments: 1,
    });
    // type defaults to text
    expect((await ok(WHATSAPP, { to: '+14155550123', text: 'hi' })).channel_type).toBe('whatsapp');
    // Characters are counted as Twilio counts them: an emoji (two UTF-16 units) is two.
    expect((await ok(WHATSAPP, { to: '+14155550123', text: '😀'.repeat(2048) })).channel_type).toBe('whatsapp');
    expect(await invalid(WHATSAPP, { to: '+14155550123', text: '😀'.repeat(2049) })).toEqual([
      { field: 'text', message: 'must be at most 4096 characters on whatsapp (an emoji counts as 2)' },
    ]);
  });

  it('Messenger: a page-scoped id and at most 2000 characters', async () => {
    expect(fields(await invalid(WHATSAPP, { channel: 'messenger', to: '+14155550123', text: 'hi' }))).toEqual(['to']);
    const long = await invalid(WHATSAPP, { channel: 'messenger', to: '2460102340987654', text: 'x'.repeat(2001) });
    expect(long).toEqual([
      { field: 'text', message: 'must be at most 2000 characters on messenger (an emoji counts as 2)' },
    ]);
    const m = await ok(WHATSAPP, { channel: 'messenger', to: '2460102340987654', text: 'x'.repeat(2000) });
    expect({ channel: m.channel_type, to: m.to, price: m.price }).toEqual({
      channel: 'messenger',
      to: '2460102340987654',
      price: parseMoney('0.003'),
    });
  });

  it('Instagram: an Instagram-scoped id and at most 1000 bytes of UTF-8', async () => {
    expect(fields(await invalid(WHATSAPP, { channel: 'instagram', to: 'user.name', text: 'hi' }))).toEqual(['to']);
    const long = await invalid(WHATSAPP, { channel: 'instagram', to: '6789012345678901', text: 'x'.repeat(1001) });
    expect(long).toEqual([
      {
        field: 'text',
        message: "must be at most 1000 bytes of UTF-8 on instagram (Meta's limit: é counts 2, an emoji 4)",
      },
    ]);
    // Meta counts Instagram's limit in bytes of UTF-8: 400 Chinese characters are 1,200.
    expect(
      fields(await invalid(WHATSAPP, { channel: 'instagram', to: '6789012345678901', text: '中'.repeat(400) })),
    ).toEqual(['text']);
    expect(
      (await ok(WHATSAPP, { channel: 'instagram', to: '6789012345678901', text: '中'.repeat(333) })).channel_type,
    ).toBe('instagram');
    const m = await ok(WHATSAPP, { channel: 'instagram', to: '6789012345678901', text: 'x'.repeat(1000) });
    expect({ channel: m.channel_type, price: m.price }).toEqual({ channel: 'instagram', price: parseMoney('0.004') });
  });

  it('an unknown channel or type is reported, with everything else', async () => {
    expect(fields(await invalid(WHATSAPP, { channel: 'telegram', to: '+14155550123', text: 'hi' }))).toEqual([
      'channel',
    ]);
    expect(fields(await invalid(WHATSAPP, { to: 'bad', type: 'image', text: 'hi' }))).toEqual(['to', 'type']);
    expect(fields(await invalid(WHATSAPP, { to: 'bad', text: 5 }))).toEqual(['text', 'to']);
  });

  it('templates need a name and a language; every problem is listed', async () => {
    const noName = await invalid(WHATSAPP, { to: '+14155550123', type: 'template', template: { language: 'en_US' } });
    expect(noName).toEqual([{ field: 'template.name', message: expect.stringMatching(/required: the template name/) }]);
    const noLang = await invalid(WHATSAPP, { to: '+14155550123', type: 'template', template: 'order_shipped' });
    expect(noLang).toEqual([{ field: 'language', message: expect.stringMatching(/language code/) }]);
    expect(fields(await invalid(WHATSAPP, { to: '+14155550123', type: 'template' }))).toEqual(['template']);
    expect(
      fields(
        await invalid(WHATSAPP, {
          to: '+14155550123',
          type: 'template',
          template: 'Order Shipped!',
          language: 'english',
        }),
      ),
    ).toEqual(['language', 'template']);
    const all = await invalid(WHATSAPP, { to: 'bad', type: 'template', template: { name: 'X', parameters: [1] } });
    expect(fields(all)).toEqual(['template.language', 'template.name', 'template.parameters.0', 'to']);
  });

  it('flat shape: top-level components are sent, in the Cloud API shape', async () => {
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ann' }] }];
    const m = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: 'order_update',
      language: 'en_US',
      components,
    });
    expect(JSON.parse(m.content)).toEqual({
      kind: 'template',
      template: { name: 'order_update', language: 'en_US', components },
    });
  });

  it('parameters and components together are a 400 naming the conflict, in either shape', async () => {
    const parameters = ['Ann'];
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ann' }] }];
    const flat = await invalid(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: 'order_update',
      language: 'en_US',
      parameters,
      components,
    });
    expect(flat).toEqual([
      { field: 'components', message: expect.stringMatching(/parameters or components, not both/) },
    ]);
    const obj = await invalid(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'order_update', language: 'en_US', parameters, components },
    });
    expect(obj).toEqual([
      { field: 'template.components', message: expect.stringMatching(/parameters or components, not both/) },
    ]);
    // Beside a template object they would not be sent: refused, not dropped.
    for (const extra of [{ parameters }, { components }, { language: 'de' }]) {
      const d = await invalid(WHATSAPP, {
        to: '+14155550123',
        type: 'template',
        template: { name: 'order_update', language: 'en_US' },
        ...extra,
      });
      expect(d).toEqual([{ field: Object.keys(extra)[0], message: expect.stringMatching(/put .* inside it/) }]);
    }
  });

  it('object shape: the Cloud API language {"code": ...} is taken', async () => {
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ann' }] }];
    const m = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'order_update', language: { code: 'en_US' }, components },
    });
    expect(JSON.parse(m.content)).toEqual({
      kind: 'template',
      template: { name: 'order_update', language: 'en_US', components },
    });
    const bad = await invalid(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'order_update', language: { code: 'english' } },
    });
    expect(bad).toEqual([{ field: 'template.language', message: expect.stringMatching(/language code/) }]);
  });

  it('clearly broken template content is refused before anything is charged', async () => {
    const base = { to: '+14155550123', type: 'template', template: 'order_update', language: 'en_US' };
    expect(await invalid(WHATSAPP, { ...base, components: [{}] })).toEqual([
      { field: 'components.0.type', message: 'required: the component type (header, body, button, ...)' },
    ]);
    expect(await invalid(WHATSAPP, { ...base, parameters: ['Ann', '', ' \t'] })).toEqual([
      { field: 'parameters.1', message: expect.stringMatching(/must not be empty or only whitespace/) },
      { field: 'parameters.2', message: expect.stringMatching(/must not be empty or only whitespace/) },
    ]);
    const blankText = [
      { type: 'body', parameters: [{ type: 'text', text: 'Ann' }, { type: 'text', text: '  ' }, { type: 'text' }, {}] },
    ];
    expect(fields(await invalid(WHATSAPP, { ...base, components: blankText }))).toEqual([
      'components.0.parameters.1.text',
      'components.0.parameters.2.text',
      'components.0.parameters.3.type',
    ]);
    const obj = await invalid(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'order_update', language: 'en', parameters: [''] },
    });
    expect(fields(obj)).toEqual(['template.parameters.0']);
    // Non-text parameters and extra component keys are Meta's to judge.
    const rich = [
      { type: 'header', parameters: [{ type: 'image', image: { link: 'https://example.com/a.png' } }] },
      { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: 'ABC' }] },
    ];
    expect(JSON.parse((await ok(WHATSAPP, { ...base, components: rich })).content).template.components).toEqual(rich);
  });

  it('whitespace-only text is refused on every channel of the endpoint', async () => {
    const blank = ' \n\t ';
    expect(await invalid(WHATSAPP, { to: '+14155550123', text: blank })).toEqual([
      { field: 'text', message: 'must not be only whitespace' },
    ]);
    expect(fields(await invalid(WHATSAPP, { channel: 'messenger', to: '2460102340987654', text: blank }))).toEqual([
      'text',
    ]);
    expect(fields(await invalid(WHATSAPP, { channel: 'instagram', to: '6789012345678901', text: '\u00a0' }))).toEqual([
      'text',
    ]);
  });

  it('null for an optional field is the same as leaving it out', async () => {
    const text = await ok(WHATSAPP, {
      to: '+14155550123',
      type: null,
      text: 'hi',
      channel: null,
      template: null,
      language: null,
      parameters: null,
      components: null,
    });
    expect([text.channel_type, JSON.parse(text.content)]).toEqual(['whatsapp', { kind: 'text', text: 'hi' }]);
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ann' }] }];
    const flat = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      text: null,
      template: 'order_update',
      language: 'en',
      parameters: null,
      components,
    });
    expect(JSON.parse(flat.content).template).toEqual({ name: 'order_update', language: 'en', components });
    const obj = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'order_update', language: 'en', parameters: ['Ann'], components: null },
      parameters: null,
    });
    expect(JSON.parse(obj.content).template).toEqual({ name: 'order_update', language: 'en', components });
    expect(await invalid(WHATSAPP, { to: '+14155550123', type: 'template', template: null })).toEqual([
      { field: 'template', message: expect.stringMatching(/^required for type "template"/) },
    ]);
  });

  it("template problems are worded in the house style, never in zod's own words", async () => {
    const bodies = [
      { to: '+14155550123', type: 'template', template: { name: 'a_b', language: 'en', parameters: ['x', 1] } },
      { to: '+14155550123', type: 'template', template: 'a_b', language: 'en', components: ['x'] },
      { to: '+14155550123', type: 'template', template: 'a_b', language: 'en', parameters: 'x' },
      { to: '+14155550123', type: 'template', template: 5 },
      { to: null, channel: 5, type: 5, text: 5 },
    ];
    const all = (await Promise.all(bodies.map((b) => invalid(WHATSAPP, b)))).flat();
    for (const x of all) expect(x.message).not.toMatch(/Invalid|expected .* received/);
    expect(all.slice(0, 2)).toEqual([
      { field: 'template.parameters.1', message: 'must be a string' },
      { field: 'components.0', message: expect.stringMatching(/^must be an object with a type/) },
    ]);
    expect(all.find((x) => x.field === 'to')).toEqual({ field: 'to', message: 'required: the recipient' });
  });

  it('a template name or language given in the wrong form is "must be", not "required"', async () => {
    const wrong = await invalid(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'Order Update!', language: 'english' },
    });
    expect(wrong).toEqual([
      { field: 'template.name', message: 'must be a template name: lowercase letters, digits and underscores' },
      {
        field: 'template.language',
        message: 'must be a language code such as en or en_US (ll or ll_CC), or {"code": "en_US"}',
      },
    ]);
    const flat = await invalid(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: 'order_update',
      language: 'en_us',
    });
    expect(flat).toEqual([
      { field: 'language', message: 'must be a language code such as en or en_US (ll or ll_CC), or {"code": "en_US"}' },
    ]);
    const missing = await invalid(WHATSAPP, { to: '+14155550123', type: 'template', template: {} });
    expect(missing.map((d) => d.message)).toEqual([
      'required: the template name (lowercase letters, digits and underscores)',
      'required: a language code such as en or en_US, or {"code": "en_US"}',
    ]);
  });

  it('templates are refused on Messenger and Instagram', async () => {
    for (const channel of ['messenger', 'instagram']) {
      const d = await invalid(WHATSAPP, {
        channel,
        to: '2460102340987654',
        type: 'template',
        template: 'order_shipped',
        language: 'en',
      });
      expect(d).toEqual([{ field: 'type', message: expect.stringMatching(/WhatsApp feature/) }]);
    }
  });

  it('a valid template is stored the way the Cloud API takes it', async () => {
    const a = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: 'order_shipped',
      language: 'en_US',
      parameters: ['Ana', '#42'],
    });
    expect(JSON.parse(a.content)).toEqual({
      kind: 'template',
      template: {
        name: 'order_shipped',
        language: 'en_US',
        components: [
          {
            type: 'body',
            parameters: [
              { type: 'text', text: 'Ana' },
              { type: 'text', text: '#42' },
            ],
          },
        ],
      },
    });
    const components = [{ type: 'header', parameters: [{ type: 'text', text: 'Hi' }] }];
    const b = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'hello_world', language: 'en', components },
    });
    expect(JSON.parse(b.content)).toEqual({
      kind: 'template',
      template: { name: 'hello_world', language: 'en', components },
    });
    const c = await ok(WHATSAPP, {
      to: '+14155550123',
      type: 'template',
      template: { name: 'hello_world', language: 'en' },
    });
    expect(JSON.parse(c.content)).toEqual({ kind: 'template', template: { name: 'hello_world', language: 'en' } });
  });
});
