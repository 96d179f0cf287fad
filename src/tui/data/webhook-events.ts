import type { CoreCtx } from '../../core/context.js';
import type { WebhookLogRow } from '../../core/webhook-log.js';
import { stmt } from '../../db/stmt.js';
import { parseStoredWebhook } from '../../providers/webhooks.js';

// What a stored webhook says, in msgd's terms, for the tail's detail pane: each event parsed
// from the stored body as processing parses it, with the message a status names and where
// that message stands now.

export function describeEvents(ctx: CoreCtx, row: WebhookLogRow): string[] {
  if (row.verification !== 'ok') return ['not processed: its signature was not verified'];
  const parsed = parseStoredWebhook(row);
  if ('fault' in parsed) {
    if (parsed.fault === 'no_handler') return [`no handler for provider ${row.provider}`];
    if (parsed.fault === 'no_parse') return ['the stored body does not parse'];
    return [`the stored body does not parse: ${(parsed.error as Error).message}`];
  }
  const { events } = parsed;
  if (events.length === 0) return ['no events in it'];
  const byProviderId = stmt<[string], { id: string; status: string }>(
    ctx.db.sqlite,
    `SELECT id, status FROM messages INDEXED BY messages_provider
      WHERE provider_message_id = ? AND provider_message_id IS NOT NULL AND provider_id_indexed = 1 LIMIT 1`,
  );
  const byId = stmt<[string], { id: string; status: string }>(ctx.db.sqlite, 'SELECT id, status FROM messages WHERE id = ?');
  return events.slice(0, 20).map((ev) => {
    if (ev.type === 'message')
      return `inbound message from ${ev.from}${ev.providerMessageId ? ` (${ev.providerMessageId})` : ''}`;
    if (ev.type === 'watermark') return `${ev.status} up to a watermark, for ${ev.contact}`;
    if (ev.type === 'unsend') return `${ev.from} unsent ${ev.providerMessageId}`;
    if (ev.type !== 'status') return ev.note;
    const ref = ev.ref.messageId ?? ev.ref.providerMessageId ?? '?';
    const m =
      (ev.ref.messageId && byId.get(ev.ref.messageId)) ||
      (ev.ref.providerMessageId && byProviderId.get(ev.ref.providerMessageId)) ||
      null;
    const what = ev.status ? `status ${ev.status}` : `${ev.providerStatus} (history only)`;
    // The message first: the provider's id is long and the pane is 78 columns.
    return `${what}: ${m ? `message ${m.id} (now ${m.status})` : 'no message here has this id'} · ${ref}`;
  });
}
