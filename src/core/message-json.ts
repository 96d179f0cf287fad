import { moneyJson } from '../lib/money.js';
import { iso } from '../lib/time.js';
import type { MessageContent } from './message-content.js';
import type { HistoryRow, MessageRow } from './messages.js';

// A message as the partner APIs and msgctl show it.

/** Content as the API shows it: snake_case, as the partner wrote from_name and reply_to. */
function contentJson(content: MessageContent): object {
  if (content.kind !== 'email') return content;
  const { fromName, replyTo, ...rest } = content;
  return {
    ...rest,
    ...(fromName !== undefined ? { from_name: fromName } : {}),
    ...(replyTo !== undefined ? { reply_to: replyTo } : {}),
  };
}

export function messageJson(m: MessageRow, hist?: HistoryRow[]) {
  const content = contentJson(JSON.parse(m.content) as MessageContent);
  return {
    id: m.id,
    direction: m.direction,
    channel: m.channel_type,
    to: m.to,
    from: m.from,
    status: m.status,
    content,
    price: moneyJson(m.price),
    segments: m.segments,
    refunded: m.refunded === 1,
    provider_message_id: m.provider_message_id,
    error: m.error_code || m.error_message ? { code: m.error_code, message: m.error_message } : null,
    possible_duplicate: m.dispatch_uncertain === 1,
    conversation_id: m.conversation_id,
    contact_id: m.contact_id,
    // Inbound: when the customer sent it (the provider's timestamp); outbound: when msgd handed
    // it to the provider. created_at is when msgd stored the message.
    sent_at: m.sent_at === null ? null : iso(m.sent_at),
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
    // When the customer unsent it (inbound Messenger/Instagram); its content is then redacted.
    deleted_at: m.deleted_at === null ? null : iso(m.deleted_at),
    // A scheduled send's time; null for a message sent at once.
    send_at: m.send_at === null ? null : iso(m.send_at),
    ...(hist
      ? {
          history: hist.map((h) => ({
            status: h.status,
            provider_status: h.provider_status,
            error: h.error_code || h.error_message ? { code: h.error_code, message: h.error_message } : null,
            applied: h.ignored === 0,
            occurred_at: iso(h.occurred_at),
            recorded_at: iso(h.created_at),
          })),
        }
      : {}),
  };
}
