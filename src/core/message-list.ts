import { indexedBy } from '../db/dialect.js';
import type { Row } from '../db/rows.js';
import type { conversations } from '../db/schema.js';
import { type Sql, sql } from '../db/sql.js';
import { contactEmail } from '../lib/email.js';
import { idFloor } from '../lib/id-time.js';
import { normalizeE164 } from '../lib/phone.js';
import type { ChannelType, CoreCtx } from './context.js';
import type { MessageRow } from './messages.js';
import { FAILURE_STATUSES, isFailure, type MessageStatus } from './statuses.js';

// The partner's message list (GET /v1/messages and the web console). Pages are keyset reads,
// newest first, on indexes:
//   no conversation or recipient  → messages_partner (partner_id, id)
//   a failure status (failed, undelivered, bounced, dropped), no conversation or recipient
//                                 → messages_partner_failed (partner_id, id), partial: it holds
//                                   failed messages only, so a send or a delivery writes nothing
//                                   there; a message enters it when it fails and leaves it if a
//                                   later report proves delivery
//   status scheduled, no conversation or recipient
//                                 → messages_partner_scheduled (partner_id, id), partial: only
//                                   messages waiting for their send_at
//   conversation, or recipient    → messages_conversation (conversation_id, id), one range per
//                                   conversation of that customer, merged here
// Time bounds are id bounds (ids start with their creation time). channel, direction, the
// other statuses and a provider id are checked on the rows the range yields: no index for them,
// since every index costs each send WAL pages, and an index on every status would be rewritten
// at every status change. So that a rare value cannot turn a page into a walk over millions of
// rows, a page examines at most SCAN_LIMIT messages and then ends with a cursor, possibly short
// or empty: the cursor's id then says how far back the search has looked.

export const SCAN_LIMIT = 2_000;

export interface MessageFilter {
  channel?: ChannelType;
  status?: MessageStatus;
  direction?: 'outbound' | 'inbound';
  /** A conversation id (conv_…). */
  conversationId?: string;
  /** The customer's address (phone, email, PSID or IGSID): messages to and from them. */
  recipient?: string;
  /** Epoch ms, inclusive. */
  createdSince?: number;
  /** Epoch ms, exclusive. */
  createdBefore?: number;
  /** The provider's id for the message (checked row by row; see findMessages for the indexed lookup). */
  providerMessageId?: string;
}

export interface MessagePage {
  /** At most `limit` messages, newest first. */
  rows: MessageRow[];
  /** Pass back as `after` for the next page; null when the list is done. */
  next: string | null;
}

type ConversationRef = Pick<Row<typeof conversations>, 'id' | 'channel_type'>;

/** Where a page's rows come from: one index range. */
interface Lane {
  index: 'messages_partner' | 'messages_partner_failed' | 'messages_partner_scheduled' | 'messages_conversation';
  key: string;
}

/** messages_partner_failed's WHERE, repeated in every query that reads it (SQLite uses a partial index only then). */
const FAILED_WHERE = `status IN (${FAILURE_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/** A column checked on the rows a lane yields, and the value it must have. */
type PostFilter = ['channel_type' | 'status' | 'direction' | 'provider_message_id', unknown];

export async function listMessages(
  ctx: CoreCtx,
  partnerId: string,
  f: MessageFilter,
  limit: number,
  after?: string | null,
): Promise<MessagePage> {
  const lanes = await lanesFor(ctx, partnerId, f);
  const upper = minId([
    after ?? undefined,
    f.createdBefore === undefined ? undefined : idFloor('msg', f.createdBefore),
  ]);
  const lower = f.createdSince === undefined ? 'msg_' : idFloor('msg', f.createdSince);
  if (upper !== undefined && upper <= lower) return { rows: [], next: null };
  const post: PostFilter[] = [];
  // The partner lanes hold every channel; a conversation lane is one channel (checked in lanesFor).
  if (f.channel && lanes.some((l) => l.index !== 'messages_conversation')) post.push(['channel_type', f.channel]);
  if (f.status) post.push(['status', f.status]);
  if (f.direction) post.push(['direction', f.direction]);
  if (f.providerMessageId !== undefined) post.push(['provider_message_id', f.providerMessageId]);

  let rows: MessageRow[] = [];
  // The lowest id each lane examined when it stopped at SCAN_LIMIT: below the highest of them
  // not every lane has been read, so the page ends there.
  let stop: string | null = null;
  for (const lane of lanes) {
    let floor = lower;
    if (post.length > 0) {
      const last = await scanFloor(ctx, lane, upper, lower);
      if (last !== undefined) {
        floor = last;
        if (stop === null || last > stop) stop = last;
      }
    }
    rows.push(...(await laneRows(ctx, lane, upper, floor, post, limit + 1)));
  }
  if (lanes.length > 1) rows.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  if (stop !== null) rows = rows.filter((r) => r.id >= stop!);
  if (rows.length > limit) return { rows: rows.slice(0, limit), next: rows[limit - 1].id };
  return { rows, next: stop };
}

function minId(ids: (string | undefined)[]): string | undefined {
  let m: string | undefined;
  for (const id of ids) if (id !== undefined && (m === undefined || id < m)) m = id;
  return m;
}

const laneKey = (lane: Lane) => sql.raw(lane.index === 'messages_conversation' ? 'conversation_id' : 'partner_id');
const laneWhere = (lane: Lane) =>
  sql.raw(
    lane.index === 'messages_partner_failed'
      ? ` AND ${FAILED_WHERE}`
      : lane.index === 'messages_partner_scheduled'
        ? ` AND status = 'scheduled'`
        : '',
  );

/** The lane's range: its key, its partial index's condition, `id < upper` when given, `id >= lower`. */
function laneRange(lane: Lane, upper: string | undefined, lower: string): Sql {
  return sql`${laneKey(lane)} = ${lane.key}${laneWhere(lane)}${upper ? sql` AND id < ${upper}` : sql``} AND id >= ${lower}`;
}

/** The SCAN_LIMIT-th id of the range, read off the index alone; undefined when the range is shorter. */
async function scanFloor(
  ctx: CoreCtx,
  lane: Lane,
  upper: string | undefined,
  lower: string,
): Promise<string | undefined> {
  const row = await ctx.store.get<{ id: string }>(
    sql`SELECT id FROM messages ${indexedBy(ctx.store.dialect, lane.index)} WHERE ${laneRange(lane, upper, lower)}
     ORDER BY id DESC LIMIT 1 OFFSET ${sql.raw(String(SCAN_LIMIT - 1))}`,
  );
  return row?.id;
}

// Rows as arrays (values()), made objects here: better-sqlite3 builds named rows property by
// property through the V8 API, which costs more than the query on a 50-row page (npm run bench: v1-messages).
const COLUMNS = [
  'id',
  'partner_id',
  'direction',
  'channel_type',
  'channel_id',
  'gateway_id',
  'conversation_id',
  'contact_id',
  'to',
  'from',
  'content',
  'status',
  'provider_message_id',
  'provider_id_indexed',
  'price',
  'segments',
  'error_code',
  'error_message',
  'dispatch_uncertain',
  'refunded',
  'sent_at',
  'created_at',
  'updated_at',
  'deleted_at',
  'send_at',
] as const satisfies readonly (keyof MessageRow)[];
const SELECT = sql.raw(COLUMNS.map((c) => `"${c}"`).join(', '));

function toRow(a: unknown[]): MessageRow {
  return {
    id: a[0],
    partner_id: a[1],
    direction: a[2],
    channel_type: a[3],
    channel_id: a[4],
    gateway_id: a[5],
    conversation_id: a[6],
    contact_id: a[7],
    to: a[8],
    from: a[9],
    content: a[10],
    status: a[11],
    provider_message_id: a[12],
    provider_id_indexed: a[13],
    price: a[14],
    segments: a[15],
    error_code: a[16],
    error_message: a[17],
    dispatch_uncertain: a[18],
    refunded: a[19],
    sent_at: a[20],
    created_at: a[21],
    updated_at: a[22],
    deleted_at: a[23],
    send_at: a[24],
  } as MessageRow;
}

/** The message rows of a query selecting SELECT. */
async function messageRows(ctx: CoreCtx, q: Sql): Promise<MessageRow[]> {
  return (await ctx.store.values(q)).map(toRow);
}

async function laneRows(
  ctx: CoreCtx,
  lane: Lane,
  upper: string | undefined,
  lower: string,
  post: PostFilter[],
  limit: number,
): Promise<MessageRow[]> {
  const checks = post.map(([col, v]) => sql` AND ${sql.raw(col)} = ${v}`);
  return messageRows(
    ctx,
    sql`SELECT ${SELECT} FROM messages ${indexedBy(ctx.store.dialect, lane.index)}
     WHERE ${laneRange(lane, upper, lower)}${sql.join(checks, '')} ORDER BY id DESC LIMIT ${limit}`,
  );
}

/** The index ranges a filter reads; none when the conversation or customer has no messages here. */
async function lanesFor(ctx: CoreCtx, partnerId: string, f: MessageFilter): Promise<Lane[]> {
  if (f.conversationId === undefined && f.recipient === undefined)
    return [
      {
        index:
          f.status === 'scheduled'
            ? 'messages_partner_scheduled'
            : f.status && isFailure(f.status)
              ? 'messages_partner_failed'
              : 'messages_partner',
        key: partnerId,
      },
    ];
  let convs: ConversationRef[];
  if (f.recipient !== undefined) {
    convs = await recipientConversations(ctx, partnerId, f.recipient);
    if (f.conversationId !== undefined) convs = convs.filter((c) => c.id === f.conversationId);
  } else {
    const c = await ctx.store.get<ConversationRef>(
      sql`SELECT id, channel_type FROM conversations WHERE id = ${f.conversationId} AND partner_id = ${partnerId}`,
    );
    convs = c ? [c] : [];
  }
  return convs
    .filter((c) => f.channel === undefined || c.channel_type === f.channel)
    .map((c) => ({ index: 'messages_conversation', key: c.id }));
}

/**
 * The conversations of the partner's contacts with this address. Every message, outbound or
 * inbound, joins its customer's contact and conversation when it is written, so these ranges
 * hold all messages with that customer.
 */
async function recipientConversations(ctx: CoreCtx, partnerId: string, address: string): Promise<ConversationRef[]> {
  const d = ctx.store.dialect;
  const a = address.trim();
  const clauses: Sql[] = [];
  const phone = normalizeE164(a);
  if (phone)
    clauses.push(
      sql`SELECT id FROM contacts ${indexedBy(d, 'contacts_phone')} WHERE partner_id = ${partnerId} AND phone = ${phone}`,
    );
  if (a.includes('@'))
    clauses.push(
      sql`SELECT id FROM contacts ${indexedBy(d, 'contacts_email')} WHERE partner_id = ${partnerId} AND email = ${contactEmail(a)}`,
    );
  if (/^\d{1,64}$/.test(a)) {
    clauses.push(
      sql`SELECT id FROM contacts ${indexedBy(d, 'contacts_psid')} WHERE partner_id = ${partnerId} AND psid = ${a}`,
    );
    clauses.push(
      sql`SELECT id FROM contacts ${indexedBy(d, 'contacts_igsid')} WHERE partner_id = ${partnerId} AND igsid = ${a}`,
    );
  }
  if (clauses.length === 0) return [];
  return ctx.store.all<ConversationRef>(
    sql`SELECT v.id, v.channel_type FROM conversations v ${indexedBy(d, 'conversations_contact')}
     WHERE v.contact_id IN (${sql.join(clauses, ' UNION ')}) AND v.partner_id = ${partnerId}`,
  );
}

/**
 * The partner's messages with this id: msgd's own (msg_…), or the provider's where reports
 * name messages by it (messages_provider). Empty when neither finds one; a provider id that
 * is not indexed (reports that carry msgd's id) is then searched with
 * listMessages({ providerMessageId }), row by row.
 */
export async function findMessages(ctx: CoreCtx, partnerId: string, ref: string): Promise<MessageRow[]> {
  const id = ref.trim();
  if (!id || id.length > 200) return [];
  if (/^msg_[0-9a-z]{26}$/.test(id))
    return ctx.store.all<MessageRow>(
      sql`SELECT ${SELECT} FROM messages WHERE id = ${id} AND partner_id = ${partnerId}`,
    );
  return ctx.store.all<MessageRow>(
    sql`SELECT ${SELECT} FROM messages ${indexedBy(ctx.store.dialect, 'messages_provider')}
     WHERE provider_message_id = ${id} AND provider_message_id IS NOT NULL AND provider_id_indexed = 1 AND partner_id = ${partnerId}
     ORDER BY id DESC LIMIT 20`,
  );
}
