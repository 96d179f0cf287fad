import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { suspendPartner, activatePartner } from '../../src/core/partners.js';
import { messageOut } from '../../src/http/schemas/v1.js';
import { addSuppressionIn } from '../../src/core/suppressions.js';
import { jsonText } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import type { TestServer } from '../helpers/server.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';
import { balanceOf, historyOf, ledgerOf, message } from '../helpers/rows.js';
import { waitFor } from '../helpers/wait.js';
import { call, richPartner, startV1 } from './helpers.js';

// Scheduled sends: every check and the debit at acceptance, the message 'scheduled' until its
// send_at, then dispatched as any other; canceled before it with a refund, and never both.

let server: TestServer;
let token: string;
let partnerId: string;

// A short minimum so the tests wait seconds, not minutes, for a send_at to come.
beforeAll(async () => {
  server = await startV1({ 'scheduling.minAheadSeconds': 1 });
  const p = await richPartner(server.ctx, 1);
  token = p.token;
  partnerId = p.partnerId;
});
afterAll(() => server.stop());

const inMs = (ms: number) => new Date(server.clock.now() + ms).toISOString();
const sms = (extra: Record<string, unknown> = {}) => ({ channel: 'sms', to: '+14155550123', body: 'later', ...extra });
/** The day after the end of the first month ending in the next weeks, e.g. 2026-11-31: one the month does not have. */
const dayAfterMonthEnd = () => {
  const soon = new Date(server.clock.now() + 2 * 86_400_000);
  const last = new Date(Date.UTC(soon.getUTCFullYear(), soon.getUTCMonth() + 1, 0));
  return `${last.toISOString().slice(0, 8)}${last.getUTCDate() + 1}T12:00:00Z`;
};
const eventsOf = async (messageId: string) =>
  (
    await server.ctx.store.all<{ type: string }>(
      sql`SELECT type FROM events WHERE partner_id = ${partnerId} AND ${jsonText(server.ctx.store.dialect, 'payload', 'message_id')} = ${messageId}`,
    )
  ).map((e) => e.type);

describe('a scheduled send', () => {
  it('is debited and scheduled at once, then sent at its time', async () => {
    const before = await balanceOf(server.ctx, partnerId);
    const at = inMs(2_000);
    const r = await call(server, 'POST', '/v1/messages', { token, body: sms({ send_at: at }) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'scheduled', send_at: at });
    expect(before - (await balanceOf(server.ctx, partnerId))).toBe(10_000);

    const g = await call(server, 'GET', `/v1/messages/${r.body.id}`, { token });
    expect(messageOut.parse(g.body)).toBeTruthy();
    expect(g.body).toMatchObject({ status: 'scheduled', send_at: at, provider_message_id: null });
    expect(g.body.history.map((h: any) => h.status)).toEqual(['scheduled']);
    const listed = await call(server, 'GET', '/v1/messages?status=scheduled', { token });
    expect(listed.body.data.map((m: any) => m.id)).toContain(r.body.id);

    // Not before its time: still scheduled well inside the wait.
    await new Promise((res) => setTimeout(res, 500));
    expect((await message(server.ctx, r.body.id)).status).toBe('scheduled');

    const sent = await waitFor(
      async () => {
        const m = await message(server.ctx, r.body.id);
        return m.status === 'sent' || m.status === 'delivered' ? m : undefined;
      },
      'scheduled message sent',
      10_000,
    );
    expect(sent.sent_at!).toBeGreaterThanOrEqual(Date.parse(at));
    expect((await historyOf(server.ctx, r.body.id)).slice(0, 3)).toEqual(['scheduled', 'queued', 'sent']);
    const full = await call(server, 'GET', `/v1/messages/${r.body.id}`, { token });
    expect(full.body.history.map((h: any) => h.status).slice(0, 3)).toEqual(['scheduled', 'queued', 'sent']);
    expect(sent.refunded).toBe(0);
    await expectMoneyConsistent(server.ctx, partnerId);
  });

  it('canceled before its time: never sent, refunded, message.canceled; a second cancel is a 409', async () => {
    const before = await balanceOf(server.ctx, partnerId);
    const r = await call(server, 'POST', '/v1/messages', { token, body: sms({ send_at: inMs(1_500) }) });
    expect(r.status).toBe(200);
    const c = await call(server, 'POST', `/v1/messages/${r.body.id}/cancel`, { token });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ id: r.body.id, status: 'canceled', refunded: true });
    expect(await balanceOf(server.ctx, partnerId)).toBe(before);
    expect(
      (await ledgerOf(server.ctx, partnerId)).filter((e) => e.message_id === r.body.id).map((e) => e.kind),
    ).toEqual(['debit', 'refund']);
    const again = await call(server, 'POST', `/v1/messages/${r.body.id}/cancel`, { token });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'message_not_cancelable', details: [{ field: 'status' }] });
    expect(again.body.error.message).toContain('canceled');

    // Its time passes: the job finds nothing to send.
    await new Promise((res) => setTimeout(res, 2_500));
    const m = await message(server.ctx, r.body.id);
    expect(m.status).toBe('canceled');
    expect(m.provider_message_id).toBeNull();
    expect(await eventsOf(r.body.id)).toEqual(['message.canceled']);
    await expectMoneyConsistent(server.ctx, partnerId);
  });

  it("another partner's message is a 404, and a message sent at once cannot be canceled", async () => {
    const other = await richPartner(server.ctx, 2);
    const theirs = await call(server, 'POST', '/v1/messages', {
      token: other.token,
      body: sms({ send_at: inMs(60_000) }),
    });
    const c = await call(server, 'POST', `/v1/messages/${theirs.body.id}/cancel`, { token });
    expect(c.status).toBe(404);
    expect((await message(server.ctx, theirs.body.id)).status).toBe('scheduled');

    const now = await call(server, 'POST', '/v1/messages', { token, body: sms() });
    expect(now.body).toMatchObject({ status: 'queued', send_at: null });
    const late = await call(server, 'POST', `/v1/messages/${now.body.id}/cancel`, { token });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('message_not_cancelable');
  });

  it.each([
    ['no offset', '2030-01-01T09:00:00', 'an ISO 8601 time with an offset'],
    ['not a time', 'tomorrow', 'an ISO 8601 time with an offset'],
    ['markup', '<script>alert(1)</script>', 'an ISO 8601 time with an offset'],
    ['a day the month does not have', 'no-such-day', 'an ISO 8601 time with an offset'],
    ['too soon', 'soon', 'between 1 second and 35 days from now'],
    ['too far', 'far', 'and 35 days from now'],
  ])('send_at %s: 400 naming the field, nothing debited', async (_, value, message) => {
    const send_at =
      value === 'soon'
        ? inMs(200)
        : value === 'far'
          ? inMs(36 * 86_400_000)
          : value === 'no-such-day'
            ? dayAfterMonthEnd()
            : value;
    const before = await balanceOf(server.ctx, partnerId);
    const r = await call(server, 'POST', '/v1/messages', { token, body: sms({ send_at }) });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.details).toEqual([expect.objectContaining({ field: 'send_at' })]);
    expect(r.body.error.details[0].message).toContain(message);
    expect(await balanceOf(server.ctx, partnerId)).toBe(before);
  });

  it('the legacy send API schedules too, answering status scheduled', async () => {
    const r = await call(server, 'POST', '/api/send-sms.php', {
      token,
      body: { to: '+14155550123', text: 'legacy later', send_at: inMs(60_000) },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: r.body.id, status: 'scheduled' });
    const bad = await call(server, 'POST', '/api/send-email.php', {
      token,
      body: { to: 'a@example.com', subject: 'S', html: '<p>x</p>', send_at: 'yesterday' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.map((d: any) => d.field)).toEqual(['send_at']);
  });

  it('a partner suspended before the time: failed at its time and refunded', async () => {
    const p = await richPartner(server.ctx, 3);
    const before = await balanceOf(server.ctx, p.partnerId);
    const r = await call(server, 'POST', '/v1/messages', { token: p.token, body: sms({ send_at: inMs(1_500) }) });
    expect(r.status).toBe(200);
    await suspendPartner(server.ctx, p.partnerId, 'test');
    try {
      const m = await waitFor(
        async () => {
          const m = await message(server.ctx, r.body.id);
          return m.status === 'failed' ? m : undefined;
        },
        'failed at its time',
        10_000,
      );
      expect(m).toMatchObject({ error_code: 'partner_suspended', refunded: 1, provider_message_id: null });
      expect(await balanceOf(server.ctx, p.partnerId)).toBe(before);
      await expectMoneyConsistent(server.ctx, p.partnerId);
    } finally {
      await activatePartner(server.ctx, p.partnerId, 'test');
    }
  });

  it('a recipient who opted out before the time: failed recipient_suppressed at its time, refunded', async () => {
    const p = await richPartner(server.ctx, 5);
    const before = await balanceOf(server.ctx, p.partnerId);
    const r = await call(server, 'POST', '/v1/messages', {
      token: p.token,
      body: sms({ to: '+14155550199', send_at: inMs(1_500) }),
    });
    expect(r.status).toBe(200);
    await server.ctx.store.transaction((tx) =>
      addSuppressionIn(tx, server.ctx, {
        partnerId: p.partnerId,
        channel: 'sms',
        address: '+14155550199',
        reason: 'opt_out_keyword',
        source: 'test',
      }),
    );
    const m = await waitFor(
      async () => {
        const m = await message(server.ctx, r.body.id);
        return m.status === 'failed' ? m : undefined;
      },
      'failed at its time',
      10_000,
    );
    expect(m).toMatchObject({ error_code: 'recipient_suppressed', refunded: 1, provider_message_id: null });
    expect(await balanceOf(server.ctx, p.partnerId)).toBe(before);
    await expectMoneyConsistent(server.ctx, p.partnerId);
  });

  it('50 cancels racing their dispatch: each message is sent or canceled and refunded, never both', async () => {
    const p = await richPartner(server.ctx, 4);
    const start = await balanceOf(server.ctx, p.partnerId);
    const at = inMs(60_000);
    const sends = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        call(server, 'POST', '/v1/messages', { token: p.token, body: sms({ send_at: at, body: `r${i}` }) }),
      ),
    );
    for (const r of sends) expect(r.status).toBe(200);
    const ids: string[] = sends.map((r) => r.body.id);
    // Their time comes (the clock moves; a send due now wakes the job loop) while the cancels
    // arrive: some win, some find the message already taken by dispatch.
    server.clock.advance(60_000);
    const [, ...answers] = await Promise.all([
      call(server, 'POST', '/v1/messages', { token: p.token, body: sms() }),
      ...ids.map((id) => call(server, 'POST', `/v1/messages/${id}/cancel`, { token: p.token })),
    ]);
    for (const a of answers) expect([200, 409]).toContain(a.status);
    const canceled = new Set(ids.filter((_, i) => answers[i].status === 200));
    console.log('SPLIT', canceled.size);
    await waitFor(
      async () =>
        (await Promise.all(ids.map((id) => message(server.ctx, id)))).every((m) =>
          ['canceled', 'sent', 'delivered'].includes(m.status),
        ) || undefined,
      'all settled',
      15_000,
    );
    for (const id of ids) {
      const m = await message(server.ctx, id);
      if (canceled.has(id)) {
        expect(m).toMatchObject({ status: 'canceled', refunded: 1, provider_message_id: null });
      } else {
        expect(['sent', 'delivered']).toContain(m.status);
        expect(m.refunded).toBe(0);
      }
    }
    // The 50, and the message that woke the loop.
    expect(start - (await balanceOf(server.ctx, p.partnerId))).toBe((ids.length - canceled.size + 1) * 10_000);
    await expectMoneyConsistent(server.ctx, p.partnerId);
  });
});
