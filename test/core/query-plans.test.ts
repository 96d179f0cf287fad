import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findOrCreateContact } from '../../src/core/contacts.js';
import { OPEN_CONVERSATION_SQL, touchConversation } from '../../src/core/conversations.js';
import { UNSENT_MESSAGE_SQL, watermarkSql } from '../../src/core/inbound.js';
import { MESSAGE_BY_PROVIDER_ID_SQL } from '../../src/core/messages.js';
import { DROP_DELIVERY_ANSWERS_SQL, REDACT_RECEIVED_EVENT_SQL } from '../../src/core/message-status.js';
import { createPartner } from '../../src/core/partners.js';
import { SPEND_PENDING_SQL } from '../../src/core/spend.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';

// Queries that run once per message must seek by the contact or the provider id. A fresh
// database has no ANALYZE statistics, and SQLite then picked (partner_id, id) indexes and walked
// every conversation or message of the partner: a send cost 1 ms at 10,000 recipients.
// SQLite's own: it reads SQLite's plans (EXPLAIN QUERY PLAN) and its index hints.

let t: TestCtx;
beforeEach(() => (t = openTestCtx()));
afterEach(() => t.close());

const plan = (sql: string) => {
  const n = (sql.match(/\?/g) ?? []).length;
  return (t.ctx.db.sqlite.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...Array(n).fill('x')) as { detail: string }[])
    .map((r) => r.detail)
    .join(' | ');
};

describe('per-message queries seek, never walk a partner', () => {
  it.each([
    [
      'the open conversation of a contact (every send, every inbound message)',
      OPEN_CONVERSATION_SQL,
      ['conversations_contact (contact_id=? AND channel_type=? AND status=?)'],
    ],
    [
      'a reply or reaction finding the message it names',
      MESSAGE_BY_PROVIDER_ID_SQL,
      ['messages_provider (provider_message_id=?)'],
    ],
    ['an unsend finding the message it names', UNSENT_MESSAGE_SQL, ['messages_provider (provider_message_id=?)']],
    [
      "an unsent message's message.received event losing its content",
      REDACT_RECEIVED_EVENT_SQL,
      ['events_partner (partner_id=? AND id>? AND id<?)'],
    ],
    [
      "that event's deliveries dropping what the endpoints answered",
      DROP_DELIVERY_ANSWERS_SQL,
      ['webhook_attempts_delivery (delivery_id=?)', 'webhook_deliveries_event_endpoint (event_id=?)'],
    ],
    [
      'a Messenger read watermark',
      watermarkSql('read'),
      ['conversations_contact (contact_id=? AND channel_type=?)', 'messages_conversation (conversation_id=?)'],
    ],
    [
      'a Messenger delivery watermark',
      watermarkSql('delivered'),
      ['conversations_contact (contact_id=? AND channel_type=?)', 'messages_conversation (conversation_id=?)'],
    ],
  ])('%s', (_what, sql, seeks) => {
    const detail = plan(sql);
    for (const s of seeks) expect(detail).toContain(`USING INDEX ${s}`);
    expect(detail).not.toMatch(/_partner \(partner_id=\?\)|SCAN/);
  });

  it('sending to a new recipient costs the same after 5,000 others', async () => {
    const p = await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const send = (i: number) => {
      const { contact } = findOrCreateContact(t.ctx, p.id, 'sms', `+1415555${String(i).padStart(4, '0')}`);
      touchConversation(t.ctx, p.id, contact.id, 'sms', null);
    };
    const tx = t.ctx.db.sqlite.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) send(i);
    });
    const timed = (from: number, to: number) => {
      const t0 = performance.now();
      tx(from, to);
      return performance.now() - t0;
    };
    timed(0, 200); // warm up
    const early = timed(200, 700);
    tx(700, 5000);
    const late = timed(5000, 5500);
    // A walk of the partner's conversations made the late batch ~50x slower; a seek keeps it flat.
    expect(late).toBeLessThan(early * 5 + 50);
  });
});

describe('the console Overview reads seek', () => {
  it('asks whether the ledger has spend to fold by one primary-key seek', () => {
    const detail = plan(SPEND_PENDING_SQL);
    expect(detail).toContain('SEARCH ledger_entries USING INTEGER PRIMARY KEY (rowid>?)');
    expect(detail).toContain('SEARCH meta USING');
    expect(detail).not.toMatch(/SCAN (ledger_entries|meta)/);
  });
});
