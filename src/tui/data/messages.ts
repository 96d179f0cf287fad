import type { CoreCtx } from '../../core/context.js';
import { getMessageRow, messageHistory, type HistoryRow, type MessageRow } from '../../core/messages.js';
import { getPartner } from '../../core/partners.js';
import { STATUS_RANK } from '../../core/statuses.js';
import { stmt } from '../../db/stmt.js';
import { invalid } from '../../lib/errors.js';

// Finding messages on a store of millions, each way through an index: by id (primary key), by
// partner (messages_partner), by recipient (the partner's contact, its conversations, their
// messages). A status alone is looked for among the newest messages only: no index serves it,
// and the send path gets none for the console.

export const FIND_LIMIT = 50;
/** How far back a search by status alone looks. */
export const STATUS_SCAN = 20_000;

export interface MessageQuery {
  id?: string;
  partner?: string;
  recipient?: string;
  status?: string;
}

type Summary = Pick<MessageRow, 'id' | 'partner_id' | 'direction' | 'channel_type' | 'to' | 'from' | 'status' | 'price' | 'error_code' | 'created_at'>;
const COLS = 'm.id, m.partner_id, m.direction, m.channel_type, m."to", m."from", m.status, m.price, m.error_code, m.created_at';

export function findMessages(ctx: CoreCtx, q: MessageQuery): Summary[] {
  const status = q.status?.trim() || null;
  if (status && !(status in STATUS_RANK))
    throw invalid(`unknown status "${status}"`, [{ field: 'status', message: `one of ${Object.keys(STATUS_RANK).join(', ')}` }]);
  if (q.id?.trim()) {
    const m = getMessageRow(ctx, q.id.trim());
    return m ? [m] : [];
  }
  const partnerId = q.partner?.trim() ? getPartner(ctx, q.partner.trim()).id : null;
  const recipient = q.recipient?.trim();
  if (recipient) {
    const partners = partnerId
      ? [partnerId]
      : stmt<[], { id: string }>(ctx.db.sqlite, 'SELECT id FROM partners').all().map((p) => p.id);
    const out: Summary[] = [];
    const contact = stmt<[{ p: string; r: string }], { id: string }>(
      ctx.db.sqlite,
      `SELECT id FROM contacts WHERE partner_id = @p AND phone = @r
       UNION SELECT id FROM contacts WHERE partner_id = @p AND email = lower(@r)
       UNION SELECT id FROM contacts WHERE partner_id = @p AND psid = @r
       UNION SELECT id FROM contacts WHERE partner_id = @p AND igsid = @r`,
    );
    const conversations = stmt<[string], { id: string }>(
      ctx.db.sqlite,
      'SELECT id FROM conversations INDEXED BY conversations_contact WHERE contact_id = ?',
    );
    // One conversation at a time, newest first off (conversation_id, id): no sort of a
    // contact's whole history.
    const inConversation = stmt<[{ c: string; s: string | null; n: number }], Summary>(
      ctx.db.sqlite,
      `SELECT ${COLS} FROM messages m INDEXED BY messages_conversation
        WHERE m.conversation_id = @c AND (@s IS NULL OR m.status = @s) ORDER BY m.id DESC LIMIT @n`,
    );
    for (const p of partners)
      for (const c of contact.all({ p, r: recipient }))
        for (const conv of conversations.all(c.id))
          out.push(...inConversation.all({ c: conv.id, s: status, n: FIND_LIMIT }));
    return out.sort((a, b) => (a.id < b.id ? 1 : -1)).slice(0, FIND_LIMIT);
  }
  if (partnerId)
    return stmt<[{ p: string; s: string | null; n: number; scan: number }], Summary>(
      ctx.db.sqlite,
      `SELECT ${COLS} FROM (SELECT * FROM messages INDEXED BY messages_partner WHERE partner_id = @p ORDER BY id DESC LIMIT @scan) m
        WHERE (@s IS NULL OR m.status = @s) ORDER BY m.id DESC LIMIT @n`,
    ).all({ p: partnerId, s: status, n: FIND_LIMIT, scan: status ? STATUS_SCAN : FIND_LIMIT });
  return stmt<[{ scan: number; s: string | null; n: number }], Summary>(
    ctx.db.sqlite,
    `SELECT ${COLS} FROM (SELECT * FROM messages ORDER BY id DESC LIMIT @scan) m WHERE (@s IS NULL OR m.status = @s)
      ORDER BY m.id DESC LIMIT @n`,
  ).all({ scan: STATUS_SCAN, s: status, n: FIND_LIMIT });
}

export function messageWithHistory(ctx: CoreCtx, id: string): { m: MessageRow; history: HistoryRow[] } | null {
  const m = getMessageRow(ctx, id);
  return m ? { m, history: messageHistory(ctx, id, m) } : null;
}
