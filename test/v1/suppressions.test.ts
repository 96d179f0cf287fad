import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accept, checkSend } from '../../src/core/send.js';
import { addSuppressionIn } from '../../src/core/suppressions.js';
import { inList } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { balanceOf as partnerBalance } from '../helpers/rows.js';
import type { TestServer } from '../helpers/server.js';
import { call, richPartner, SENDERS, startV1 } from './helpers.js';

// The suppression list on /v1, and the refusal before cost on both send APIs.

let server: TestServer;
let a: Awaited<ReturnType<typeof richPartner>>;
let b: Awaited<ReturnType<typeof richPartner>>;

beforeAll(async () => {
  server = await startV1();
  a = await richPartner(server.ctx, 1, { balance: '10' });
  b = await richPartner(server.ctx, 2, { balance: '10' });
});
afterAll(() => server.stop());

const balanceOf = (partnerId: string) => partnerBalance(server.ctx, partnerId);
const messagesOf = async (partnerId: string) =>
  (await server.ctx.store.get<{ n: number }>(sql`SELECT count(*) AS n FROM messages WHERE partner_id = ${partnerId}`))!
    .n;
const eventsOf = async (partnerId: string, type: string) =>
  (
    await server.ctx.store.all<{ payload: string }>(
      sql`SELECT payload FROM events WHERE partner_id = ${partnerId} AND type = ${type} ORDER BY id`,
    )
  ).map((e) => JSON.parse(e.payload));

describe('/v1/suppressions', () => {
  it('adds (normalized), finds by filter, reads, and answers a repeat with the entry as it was', async () => {
    const r = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'email', address: '  Ann@Example.COM ', detail: 'asked by phone' },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      channel: 'email',
      address: 'ann@example.com',
      reason: 'manual',
      sender: null,
      group_id: null,
      detail: 'asked by phone',
    });
    expect(r.body.id).toMatch(/^sup_/);
    expect(r.body.source).toMatch(/^token:tok_/);
    const again = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'email', address: 'ann@example.com' },
    });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(r.body.id);
    expect(again.body.detail).toBe('asked by phone');

    const found = await call(server, 'GET', '/v1/suppressions?channel=email&address=ANN%40example.com', {
      token: a.token,
    });
    expect(found.body.data.map((s: any) => s.id)).toEqual([r.body.id]);
    // A number's + written unencoded in the query (it arrives as a space) still finds it.
    const sms = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'sms', address: '+14155550177' },
    });
    for (const q of ['channel=sms&address=+14155550177', 'address=+14155550177', 'address=%2B14155550177']) {
      const byNumber = await call(server, 'GET', `/v1/suppressions?${q}`, { token: a.token });
      expect(
        byNumber.body.data.map((s: any) => s.id),
        q,
      ).toEqual([sms.body.id]);
    }
    expect((await call(server, 'GET', `/v1/suppressions/${r.body.id}`, { token: a.token })).body.address).toBe(
      'ann@example.com',
    );
    expect((await eventsOf(a.partnerId, 'suppression.created')).map((e) => e.suppression.id)).toContain(r.body.id);
  });

  it('another partner’s ids are not found, not listed and not removable', async () => {
    const mine = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'sms', address: '+14155550101' },
    });
    for (const [m, path] of [
      ['GET', `/v1/suppressions/${mine.body.id}`],
      ['DELETE', `/v1/suppressions/${mine.body.id}`],
    ]) {
      const r = await call(server, m, path, { token: b.token });
      expect(r.status, `${m} ${path}`).toBe(404);
      expect(r.body.error.code).toBe('not_found');
    }
    const missing = await call(server, 'GET', '/v1/suppressions/sup_01kzzzzzzzzzzzzzzzzzzzzzzz', { token: b.token });
    const theirs = await call(server, 'GET', `/v1/suppressions/${mine.body.id}`, { token: b.token });
    // The same answer as for an id that never existed, but for the id it names.
    expect(theirs.body.error.message.replace(mine.body.id, 'ID')).toBe(
      missing.body.error.message.replace('sup_01kzzzzzzzzzzzzzzzzzzzzzzz', 'ID'),
    );
    const list = await call(server, 'GET', '/v1/suppressions', { token: b.token });
    expect(list.body.data.map((s: any) => s.id)).not.toContain(mine.body.id);
    // Still there for its owner.
    expect((await call(server, 'GET', `/v1/suppressions/${mine.body.id}`, { token: a.token })).status).toBe(200);
  });

  it('needs its scopes: read for reading, write for adding and removing', async () => {
    const reader = await richPartner(server.ctx, 3, { scopes: 'suppressions:read' });
    const none = await richPartner(server.ctx, 4, { scopes: 'messages:send' });
    const writer = await richPartner(server.ctx, 5, { scopes: 'suppressions:write' });
    expect((await call(server, 'GET', '/v1/suppressions', { token: reader.token })).status).toBe(200);
    expect((await call(server, 'GET', '/v1/suppressions', { token: writer.token })).status).toBe(200);
    const denied = await call(server, 'POST', '/v1/suppressions', {
      token: reader.token,
      body: { channel: 'sms', address: '+14155550102' },
    });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('insufficient_scope');
    expect((await call(server, 'GET', '/v1/suppressions', { token: none.token })).status).toBe(403);
    expect((await call(server, 'GET', '/v1/suppressions', { token: null })).status).toBe(401);
  });

  it('refuses addresses that are not the channel’s, control characters and markup included, and changes nothing', async () => {
    const before = (await call(server, 'GET', '/v1/suppressions?limit=200', { token: a.token })).body.data.length;
    const cases: [string, string][] = [
      ['sms', '+1415555\u00000103'],
      ['sms', '<script>alert(1)</script>'],
      ['sms', '4155550103'],
      ['email', 'ann@example.com\r\nBcc: x@example.com'],
      ['email', '<b>ann</b>@example.com'],
      ['messenger', '123\u202e456'],
      ['instagram', 'abc'],
    ];
    for (const [channel, address] of cases) {
      const r = await call(server, 'POST', '/v1/suppressions', { token: a.token, body: { channel, address } });
      expect(r.status, `${channel} ${JSON.stringify(address)}`).toBe(400);
      // A NUL never gets past the JSON parser (invalid_json); everything else is the address's problem.
      if (address.includes('\u0000')) expect(r.body.error.code).toBe('invalid_json');
      else expect(r.body.error.details[0].field).toBe('address');
    }
    const badChannel = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'fax', address: '+14155550103' },
    });
    expect(badChannel.status).toBe(400);
    const notOurs = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'sms', address: '+14155550103', sender: SENDERS(2).sms },
    });
    expect(notOurs.status).toBe(400);
    expect(notOurs.body.error.details[0].field).toBe('sender');
    expect((await call(server, 'GET', '/v1/suppressions?limit=200', { token: a.token })).body.data.length).toBe(before);
  });

  it('pages newest first with cursors, and filters by channel and reason', async () => {
    const p = await richPartner(server.ctx, 6);
    for (let i = 0; i < 5; i++)
      await call(server, 'POST', '/v1/suppressions', {
        token: p.token,
        body: { channel: 'sms', address: `+1415555020${i}`, reason: i % 2 ? 'unsubscribe' : 'manual' },
      });
    await call(server, 'POST', '/v1/suppressions', {
      token: p.token,
      body: { channel: 'email', address: 'x@example.com' },
    });
    const seen: string[] = [];
    let cursor: string | null = '';
    while (cursor !== null) {
      const r: any = await call(server, 'GET', `/v1/suppressions?channel=sms&limit=2&cursor=${cursor}`, {
        token: p.token,
      });
      expect(r.status).toBe(200);
      seen.push(...r.body.data.map((s: any) => s.address));
      cursor = r.body.next_cursor;
    }
    expect(seen).toEqual(['+14155550204', '+14155550203', '+14155550202', '+14155550201', '+14155550200']);
    const unsub = await call(server, 'GET', '/v1/suppressions?reason=unsubscribe', { token: p.token });
    expect(unsub.body.data.map((s: any) => s.address)).toEqual(['+14155550203', '+14155550201']);
    expect((await call(server, 'GET', '/v1/suppressions?reason=nope', { token: p.token })).status).toBe(400);
    expect((await call(server, 'GET', '/v1/suppressions?cursor=garbage', { token: p.token })).status).toBe(400);
  });

  it('removes an entry (suppression.deleted); a keyword opt-out only with consent, audited', async () => {
    const manual = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'sms', address: '+14155550104' },
    });
    expect((await call(server, 'DELETE', `/v1/suppressions/${manual.body.id}`, { token: a.token })).status).toBe(204);
    expect((await call(server, 'GET', `/v1/suppressions/${manual.body.id}`, { token: a.token })).status).toBe(404);
    const deleted = (await eventsOf(a.partnerId, 'suppression.deleted')).find(
      (e) => e.suppression.id === manual.body.id,
    );
    expect(deleted.deleted_by).toMatch(/^token:tok_/);
    expect(deleted.consent_confirmed_by).toBeUndefined();

    const stop = await call(server, 'POST', '/v1/suppressions', {
      token: a.token,
      body: { channel: 'sms', address: '+14155550105', reason: 'opt_out_keyword' },
    });
    const refused = await call(server, 'DELETE', `/v1/suppressions/${stop.body.id}`, { token: a.token });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('consent_required');
    expect(refused.body.error.details[0].field).toBe('consent_confirmed');
    expect((await call(server, 'GET', `/v1/suppressions/${stop.body.id}`, { token: a.token })).status).toBe(200);
    const ok = await call(server, 'DELETE', `/v1/suppressions/${stop.body.id}?consent_confirmed=true`, {
      token: a.token,
    });
    expect(ok.status).toBe(204);
    const ev = (await eventsOf(a.partnerId, 'suppression.deleted')).find((e) => e.suppression.id === stop.body.id);
    expect(ev.consent_confirmed_by).toMatch(/^token:tok_/);
    const audit = (await server.ctx.store.get<{ actor: string; details: string }>(
      sql`SELECT actor, details FROM audit_log WHERE action = 'suppression.remove' AND target_id = ${stop.body.id}`,
    ))!;
    expect(audit.actor).toMatch(/^token:tok_/);
    expect(JSON.parse(audit.details)).toMatchObject({ consent_confirmed: true, reason: 'opt_out_keyword' });
  });
});

describe('a send to a suppressed recipient', () => {
  it('is refused with 400 recipient_suppressed on both APIs, naming the reason and since when; nothing is debited', async () => {
    const p = await richPartner(server.ctx, 7, { balance: '1' });
    const to = '+14155550301';
    const added = await call(server, 'POST', '/v1/suppressions', {
      token: p.token,
      body: { channel: 'sms', address: to, reason: 'opt_out_keyword' },
    });
    const balance = await balanceOf(p.partnerId);
    const v1 = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'sms', to, body: 'hello' },
    });
    expect(v1.status).toBe(400);
    expect(v1.body.error.code).toBe('recipient_suppressed');
    expect(v1.body.error.details).toEqual([
      {
        field: 'to',
        code: 'opt_out_keyword',
        message: expect.stringContaining(`since ${added.body.created_at}`),
      },
    ]);
    const legacy = await call(server, 'POST', '/api/send-sms.php', { token: p.token, body: { to, text: 'hello' } });
    expect(legacy.status).toBe(400);
    expect(legacy.body.error.code).toBe('recipient_suppressed');
    expect(await balanceOf(p.partnerId)).toBe(balance);
    expect(await messagesOf(p.partnerId)).toBe(0);
    // Another recipient, and the same one on another channel, are sent.
    expect(
      (
        await call(server, 'POST', '/v1/messages', {
          token: p.token,
          body: { channel: 'sms', to: '+14155550302', body: 'x' },
        })
      ).status,
    ).toBe(200);
    expect(
      (await call(server, 'POST', '/v1/messages', { token: p.token, body: { channel: 'whatsapp', to, body: 'x' } }))
        .status,
    ).toBe(200);
  });

  it('is what a price quote says the send would get, and the quote writes nothing', async () => {
    const p = await richPartner(server.ctx, 13, { balance: '1' });
    const to = '+14155550306';
    await call(server, 'POST', '/v1/suppressions', { token: p.token, body: { channel: 'sms', address: to } });
    const q = await call(server, 'POST', '/v1/messages/quote', {
      token: p.token,
      body: { channel: 'sms', to, body: 'hello' },
    });
    expect(q.status).toBe(200);
    expect(q.body.sendable).toBe(false);
    expect(q.body.refusal).toMatchObject({ code: 'recipient_suppressed' });
    expect(await messagesOf(p.partnerId)).toBe(0);
  });

  it('committed between the send’s check and its accept transaction refuses it there, before the debit', async () => {
    const p = await richPartner(server.ctx, 41, { balance: '1' });
    const to = '+14155550341';
    const principal = {
      tokenId: 'tok_test',
      partnerId: p.partnerId,
      partnerSlug: p.slug,
      scopes: ['*'],
      rateLimitPerMinute: null,
    };
    const checked = await checkSend(server.ctx, {
      principal,
      channel: 'sms',
      channels: ['sms'],
      build: () => ({ to, content: { kind: 'text', text: 'hello' }, priceText: 'hello' }),
    });
    // The customer's STOP arrives (its webhook commits) before the accept transaction runs.
    await server.ctx.store.transaction((tx) =>
      addSuppressionIn(tx, server.ctx, {
        partnerId: p.partnerId,
        channel: 'sms',
        address: to,
        reason: 'opt_out_keyword',
        scope: SENDERS(41).sms,
        source: 'msg_stop',
      }),
    );
    const balance = await balanceOf(p.partnerId);
    await expect(accept(server.rt.acceptDeps, checked, { render: (m) => ({ id: m.id }) })).rejects.toMatchObject({
      code: 'recipient_suppressed',
    });
    expect(await balanceOf(p.partnerId)).toBe(balance);
    expect(await messagesOf(p.partnerId)).toBe(0);
  });

  it('comes after an invalid payload (400 invalid_request) and exhausted funds (402)', async () => {
    const p = await richPartner(server.ctx, 8, { balance: '0' });
    const to = '+14155550303';
    await call(server, 'POST', '/v1/suppressions', { token: p.token, body: { channel: 'sms', address: to } });
    const broke = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: { channel: 'sms', to, body: 'x' },
    });
    expect(broke.status).toBe(402);
    const q = await richPartner(server.ctx, 9, { balance: '1' });
    await call(server, 'POST', '/v1/suppressions', { token: q.token, body: { channel: 'sms', address: to } });
    const bad = await call(server, 'POST', '/v1/messages', { token: q.token, body: { channel: 'sms', to, body: '' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
  });

  it('is scoped: an entry for one sender does not stop the partner’s other senders; email matches in any case', async () => {
    const p = await richPartner(server.ctx, 10, { balance: '1' });
    const to = '+14155550304';
    await server.ctx.store.transaction((tx) =>
      addSuppressionIn(tx, server.ctx, {
        partnerId: p.partnerId,
        channel: 'sms',
        address: to,
        reason: 'opt_out_keyword',
        scope: '+15550009999',
        source: 'test',
      }),
    );
    expect(
      (await call(server, 'POST', '/v1/messages', { token: p.token, body: { channel: 'sms', to, body: 'x' } })).status,
    ).toBe(200);
    await call(server, 'POST', '/v1/suppressions', {
      token: p.token,
      body: { channel: 'sms', address: to, sender: SENDERS(10).sms },
    });
    expect(
      (await call(server, 'POST', '/v1/messages', { token: p.token, body: { channel: 'sms', to, body: 'x' } })).status,
    ).toBe(400);
    await call(server, 'POST', '/v1/suppressions', {
      token: p.token,
      body: { channel: 'email', address: 'bob@example.com', reason: 'hard_bounce' },
    });
    const mail = await call(server, 'POST', '/api/send-email.php', {
      token: p.token,
      body: { to: 'Bob@EXAMPLE.com', subject: 'Hi', html: '<p>x</p>' },
    });
    expect(mail.status).toBe(400);
    expect(mail.body.error.details[0].code).toBe('hard_bounce');
  });

  it('lets a WhatsApp AUTHENTICATION template through all but a manual entry; Meta’s marketing opt-out stops marketing only', async () => {
    const p = await richPartner(server.ctx, 11, { balance: '1' });
    const to = '+14155550305';
    const template = (category?: string) => ({
      to,
      type: 'template',
      template: { name: 'otp_code', language: 'en', parameters: ['123456'], ...(category ? { category } : {}) },
    });
    const send = (body: unknown) => call(server, 'POST', '/api/send-whatsapp.php', { token: p.token, body });
    const add = (reason: 'provider_refused' | 'unsubscribe' | 'manual') =>
      server.ctx.store.transaction((tx) =>
        addSuppressionIn(tx, server.ctx, {
          partnerId: p.partnerId,
          channel: 'whatsapp',
          address: to,
          reason,
          scope: reason === 'provider_refused' ? SENDERS(11).whatsapp : '',
          source: 'test',
        }),
      );
    await add('provider_refused');
    expect((await send(template())).status).toBe(400);
    expect((await send(template('marketing'))).status).toBe(400);
    expect((await send(template('UTILITY'))).status).toBe(200);
    expect((await send(template('AUTHENTICATION'))).status).toBe(200);
    expect((await send({ to, text: 'a reply' })).status).toBe(200);
    await add('unsubscribe');
    expect((await send({ to, text: 'a reply' })).status).toBe(400);
    expect((await send(template('UTILITY'))).status).toBe(400);
    expect((await send(template('authentication'))).status).toBe(200);
    await add('manual');
    const refused = await send(template('AUTHENTICATION'));
    expect(refused.status).toBe(400);
    expect(refused.body.error.details.map((d: any) => d.code)).toEqual(['manual']);
    const wrong = await send(template('PROMO'));
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.details[0]).toMatchObject({ field: 'template.category' });
  });

  it('under the overspend race, with suppressed recipients among the sends: no overspend, no suppressed debit', async () => {
    const p = await richPartner(server.ctx, 12, { balance: '0.10' });
    const suppressed = Array.from({ length: 10 }, (_, i) => `+1415555040${i}`);
    for (const address of suppressed)
      await call(server, 'POST', '/v1/suppressions', { token: p.token, body: { channel: 'sms', address } });
    const sends = Array.from({ length: 40 }, (_, i) =>
      call(server, 'POST', '/v1/messages', {
        token: p.token,
        body: {
          channel: 'sms',
          to: i % 4 === 0 ? suppressed[i / 4] : `+141555506${String(i).padStart(2, '0')}`,
          body: 'race',
        },
      }),
    );
    const results = await Promise.all(sends);
    const byStatus = (s: number) => results.filter((r) => r.status === s).length;
    // Once the money is gone, exhausted funds (402) come first for them too; never a 200.
    const forSuppressed = results.filter((_, i) => i % 4 === 0).map((r) => r.body.error?.code);
    expect(forSuppressed.every((c) => c === 'recipient_suppressed' || c === 'insufficient_balance')).toBe(true);
    expect(forSuppressed).toContain('recipient_suppressed');
    expect(byStatus(200)).toBe(10);
    expect(results.filter((r, i) => i % 4 !== 0 && r.status === 402).length).toBe(20);
    expect(await balanceOf(p.partnerId)).toBe(0);
    const toSuppressed = (await server.ctx.store.get<{ n: number }>(
      sql`SELECT count(*) AS n FROM messages WHERE partner_id = ${p.partnerId} AND ${inList(server.ctx.store.dialect, sql`"to"`, suppressed)}`,
    ))!;
    expect(toSuppressed.n).toBe(0);
  });
});
