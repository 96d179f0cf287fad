import type { CoreCtx } from '../../src/core/context.js';
import { debitIn } from '../../src/core/ledger.js';
import type { MessageContent } from '../../src/core/message-content.js';
import type { Queryable } from '../../src/db/query.js';
import { sql } from '../../src/db/sql.js';
import { newId } from '../../src/lib/ids.js';

/**
 * What the accept transaction writes for an outbound SMS, in the caller's store transaction `tx`
 * on either store: the debit and the message, queued (the caller enqueues its dispatch job in
 * the same transaction). `raw` stores content as it is, JSON or not. The message's id.
 */
export async function storeOutboundSmsIn(
  tx: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  channel: { id: string; gateway_id: string; sender: string | null },
  opts: { to?: string; text?: string; content?: MessageContent; raw?: string; price?: number } = {},
): Promise<string> {
  const id = newId('msg');
  const price = opts.price ?? 1000;
  await debitIn(tx, ctx, partnerId, price, id, 'test');
  const content = opts.raw ?? JSON.stringify(opts.content ?? { kind: 'text', text: opts.text ?? 'hi' });
  const now = ctx.now();
  await tx.run(
    sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content,
          status, price, segments, created_at, updated_at)
        VALUES (${id}, ${partnerId}, 'outbound', 'sms', ${channel.id}, ${channel.gateway_id}, ${opts.to ?? '+14155550123'},
          ${channel.sender ?? ''}, ${content}, 'queued', ${price}, 1, ${now}, ${now})`,
  );
  return id;
}
