import type { Database } from 'better-sqlite3';
import type { Queryable, Store } from './query.js';
import { sqliteConnection } from './query.js';
import type { Row } from './rows.js';
import type {
  contacts,
  conversations,
  idempotencyKeys,
  messages,
  partners,
  suppressions,
  whatsappTemplates,
} from './schema.js';
import { sql } from './sql.js';
import { stmt } from './stmt.js';

// The send accept's statements, per store. Core's acceptBatch (src/core/accept.ts) decides every
// send of a group-commit batch in plain TypeScript (the funds rule, idempotency, suppressions,
// the template check) over what `read` returns, then hands `write` the rows to write. What
// differs by store is only how those reads and writes reach the database:
//
// SQLite: one writer holds the database for the whole batch (the store's write lock), so the
// partners' funds are read as they are, and every statement runs synchronously inside the one
// transaction, as text statements prepared once (stmt()): the batch costs one await for its
// reads and one for its writes, whatever its size. The debit is one conditional UPDATE per
// partner, repeating the funds rule.
// PostgreSQL: the batch's partners are locked first, in id order (SELECT … ORDER BY id FOR
// UPDATE), so batches of several processes never deadlock and none overspends: a partner's
// balance does not move between its read and its debit. The debit is one UPDATE for the whole
// batch over unnest arrays, its WHERE repeating the funds rule; it must change exactly the
// partners planned, with exactly the balances planned, or the batch is rolled back.

export type ContactColumn = 'phone' | 'email' | 'psid' | 'igsid';
export type Funds = Pick<Row<typeof partners>, 'balance' | 'credit_limit'>;
export type StoredIdempotency = Pick<
  Row<typeof idempotencyKeys>,
  'request_hash' | 'outcome' | 'response_body' | 'created_at'
>;
export type SuppressionHitRow = Pick<Row<typeof suppressions>, 'reason' | 'scope' | 'group_id' | 'created_at'>;
export type TemplateRow = Row<typeof whatsappTemplates>;
export type OpenConversation = Pick<Row<typeof conversations>, 'id' | 'last_message_at' | 'last_inbound_at'>;
export type ContactRow = Row<typeof contacts>;
export type ConversationRow = Row<typeof conversations>;
/** A new message as the accept writes it (dispatch_in_flight keeps its default). */
export type NewMessage = Omit<Row<typeof messages>, 'dispatch_in_flight'>;

export interface AcceptReadRequest {
  /** The batch's partners, ascending, each once: read (and on PostgreSQL locked) first, in this order. */
  partnerIds: readonly string[];
  idempotency: readonly { partnerId: string; key: string }[];
  /** Suppression entries of an address on a channel, partner-wide or for the sender. */
  suppressions: readonly { partnerId: string; channel: string; address: string; sender: string }[];
  /** A WhatsApp catalogue's templates of a name. */
  templates: readonly { gatewayId: string; name: string }[];
  /** A contact by its address, and its open conversation on a channel type. */
  contacts: readonly { partnerId: string; column: ContactColumn; address: string; channelType: string }[];
}

/** The answers, one per request entry, in the request's order. */
export interface AcceptReads {
  funds: Map<string, Funds>;
  idempotency: (StoredIdempotency | undefined)[];
  suppressions: SuppressionHitRow[][];
  /** null: the gateway's catalogue was never synced (no check); else its templates of the name, by language. */
  templates: (TemplateRow[] | null)[];
  contacts: ({ id: string; open: OpenConversation | undefined } | undefined)[];
}

export interface AcceptPlan {
  now: number;
  /** One per partner with an accepted send, in id order: the sum of its prices, and its balance after. */
  debits: { partnerId: string; amount: number; balanceAfter: number }[];
  ledger: {
    partnerId: string;
    amount: number;
    balanceAfter: number;
    messageId: string;
    note: string | null;
    actor: string;
  }[];
  contacts: ContactRow[];
  conversations: ConversationRow[];
  /** Open conversations that existed before the batch, with their new activity times. */
  touched: { id: string; lastMessageAt: number; lastInboundAt: number | null }[];
  messages: NewMessage[];
  idempotency: { partnerId: string; key: string; hash: string; outcome: 'accepted'; body: string }[];
}

export interface AcceptStatements {
  /** Reads the batch needs, partners first; inside the batch's transaction `tx`. */
  read(tx: Queryable, req: AcceptReadRequest): Promise<AcceptReads>;
  /** Writes the plan in `tx`; throws DebitGuardError (the batch must roll back) when a debit does not match it. */
  write(tx: Queryable, plan: AcceptPlan): Promise<void>;
}

/** A batch's debit changed other partners, or left other balances, than its plan: nothing of it may commit. */
export class DebitGuardError extends Error {
  constructor(detail: string) {
    super(`the accept's debit does not match its plan (${detail}): the batch is rolled back`);
    this.name = 'DebitGuardError';
  }
}

const statements = new WeakMap<Database, AcceptStatements>();

/** The accept statements of a store. */
export function acceptStatements(store: Store): AcceptStatements {
  if (store.dialect === 'postgres') return pgAcceptStatements;
  const db = sqliteConnection(store);
  let s = statements.get(db);
  if (!s) {
    s = sqliteAcceptStatements(db);
    statements.set(db, s);
  }
  return s;
}

// ---- SQLite

const FUNDS_SQL = 'SELECT balance, credit_limit FROM partners WHERE id = ?';
const IDEMPOTENCY_SQL =
  'SELECT request_hash, outcome, response_body, created_at FROM idempotency_keys WHERE partner_id = ? AND key = ?';
// One seek on the leading columns of suppressions_address; the scope is checked on the rows found.
const SUPPRESSION_HITS_SQL = `SELECT reason, scope, group_id, created_at FROM suppressions INDEXED BY suppressions_address
   WHERE partner_id = ? AND channel = ? AND address = ? AND +scope IN ('', ?)`;
const TEMPLATE_SYNCED_SQL = 'SELECT synced_at FROM whatsapp_template_syncs WHERE gateway_id = ?';
const TEMPLATES_SQL = 'SELECT * FROM whatsapp_templates WHERE gateway_id = ? AND name = ? ORDER BY language';
const CONTACT_SQL: Record<ContactColumn, string> = {
  phone: 'SELECT id FROM contacts WHERE partner_id = ? AND phone = ?',
  email: 'SELECT id FROM contacts WHERE partner_id = ? AND email = ?',
  psid: 'SELECT id FROM contacts WHERE partner_id = ? AND psid = ?',
  igsid: 'SELECT id FROM contacts WHERE partner_id = ? AND igsid = ?',
};
// INDEXED BY: without ANALYZE statistics the planner may take conversations_partner and walk
// every conversation of the partner, newest first, until this contact's.
const OPEN_CONVERSATION_SQL = `SELECT id, last_message_at, last_inbound_at FROM conversations INDEXED BY conversations_contact
  WHERE contact_id = ? AND channel_type = ? AND status = 'open' AND partner_id = ?
  ORDER BY id DESC LIMIT 1`;
// The funds rule, as the ledger's debit states it: exhausted funds refuse even a free message.
const DEBIT_SQL = `UPDATE partners SET balance = balance - ?, updated_at = ?
  WHERE id = ? AND balance + credit_limit > 0 AND balance - ? >= -credit_limit RETURNING balance`;
const LEDGER_SQL = `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
  VALUES (?, 'debit', ?, ?, ?, ?, ?, ?)`;
const CONTACT_INSERT_SQL = `INSERT INTO contacts (id, partner_id, name, phone, email, psid, igsid, attributes, last_inbound_at, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const CONVERSATION_INSERT_SQL = `INSERT INTO conversations (id, partner_id, contact_id, channel_type, channel_id, status, last_message_at, last_inbound_at, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const CONVERSATION_TOUCH_SQL =
  'UPDATE conversations SET last_message_at = ?, last_inbound_at = ?, updated_at = ? WHERE id = ?';
const MESSAGE_INSERT_SQL = `INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id,
  contact_id, "to", "from", content, status, provider_message_id, provider_id_indexed, price, segments, error_code, error_message,
  dispatch_uncertain, refunded, sent_at, created_at, updated_at, deleted_at, send_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
const IDEMPOTENCY_INSERT_SQL = `INSERT OR REPLACE INTO idempotency_keys (partner_id, key, request_hash, outcome, response_body, created_at)
  VALUES (?, ?, ?, ?, ?, ?)`;

/** SQLite's: every statement synchronous on `db`, whose transaction (the batch's) is open. */
export function sqliteAcceptStatements(db: Database): AcceptStatements {
  const funds = stmt<[string], Funds>(db, FUNDS_SQL);
  const idempotency = stmt<[string, string], StoredIdempotency>(db, IDEMPOTENCY_SQL);
  const hits = stmt<[string, string, string, string], SuppressionHitRow>(db, SUPPRESSION_HITS_SQL);
  const synced = stmt<[string], { synced_at: number | null }>(db, TEMPLATE_SYNCED_SQL);
  const templates = stmt<[string, string], TemplateRow>(db, TEMPLATES_SQL);
  const contact = {
    phone: stmt<[string, string], { id: string }>(db, CONTACT_SQL.phone),
    email: stmt<[string, string], { id: string }>(db, CONTACT_SQL.email),
    psid: stmt<[string, string], { id: string }>(db, CONTACT_SQL.psid),
    igsid: stmt<[string, string], { id: string }>(db, CONTACT_SQL.igsid),
  };
  const open = stmt<[string, string, string], OpenConversation>(db, OPEN_CONVERSATION_SQL);
  const debit = stmt<[bigint, number, string, bigint], { balance: number }>(db, DEBIT_SQL);
  const ledger = stmt(db, LEDGER_SQL);
  const contactInsert = stmt(db, CONTACT_INSERT_SQL);
  const conversationInsert = stmt(db, CONVERSATION_INSERT_SQL);
  const touch = stmt(db, CONVERSATION_TOUCH_SQL);
  const message = stmt(db, MESSAGE_INSERT_SQL);
  const idempotencyInsert = stmt(db, IDEMPOTENCY_INSERT_SQL);
  return {
    async read(_tx, req) {
      const out: AcceptReads = {
        funds: new Map(),
        idempotency: new Array(req.idempotency.length),
        suppressions: new Array(req.suppressions.length),
        templates: new Array(req.templates.length),
        contacts: new Array(req.contacts.length),
      };
      for (const id of req.partnerIds) {
        const f = funds.get(id);
        if (f) out.funds.set(id, f);
      }
      for (let i = 0; i < req.idempotency.length; i++) {
        const k = req.idempotency[i];
        out.idempotency[i] = idempotency.get(k.partnerId, k.key);
      }
      for (let i = 0; i < req.suppressions.length; i++) {
        const s = req.suppressions[i];
        out.suppressions[i] = hits.all(s.partnerId, s.channel, s.address, s.sender);
      }
      for (let i = 0; i < req.templates.length; i++) {
        const t = req.templates[i];
        out.templates[i] = synced.get(t.gatewayId)?.synced_at ? templates.all(t.gatewayId, t.name) : null;
      }
      for (let i = 0; i < req.contacts.length; i++) {
        const c = req.contacts[i];
        const found = contact[c.column].get(c.partnerId, c.address);
        out.contacts[i] = found && { id: found.id, open: open.get(found.id, c.channelType, c.partnerId) };
      }
      return out;
    },
    async write(_tx, plan) {
      const { now } = plan;
      for (const d of plan.debits) {
        // Bound as integers (BigInt): a JS number binds as a REAL.
        const amount = BigInt(d.amount);
        const row = debit.get(amount, now, d.partnerId, amount);
        if (!row) throw new DebitGuardError(`partner ${d.partnerId} refused a debit of ${d.amount}`);
        if (row.balance !== d.balanceAfter)
          throw new DebitGuardError(`partner ${d.partnerId} at ${row.balance}, planned ${d.balanceAfter}`);
      }
      for (const e of plan.ledger)
        ledger.run(e.partnerId, BigInt(e.amount), e.balanceAfter, e.messageId, e.note, e.actor, now);
      for (const c of plan.contacts)
        contactInsert.run(
          c.id,
          c.partner_id,
          c.name,
          c.phone,
          c.email,
          c.psid,
          c.igsid,
          c.attributes,
          c.last_inbound_at,
          c.created_at,
          c.updated_at,
        );
      for (const v of plan.conversations)
        conversationInsert.run(
          v.id,
          v.partner_id,
          v.contact_id,
          v.channel_type,
          v.channel_id,
          v.status,
          v.last_message_at,
          v.last_inbound_at,
          v.created_at,
          v.updated_at,
        );
      for (const v of plan.touched) touch.run(v.lastMessageAt, v.lastInboundAt, now, v.id);
      for (const m of plan.messages)
        message.run(
          m.id,
          m.partner_id,
          m.direction,
          m.channel_type,
          m.channel_id,
          m.gateway_id,
          m.conversation_id,
          m.contact_id,
          m.to,
          m.from,
          m.content,
          m.status,
          m.provider_message_id,
          m.provider_id_indexed,
          m.price,
          m.segments,
          m.error_code,
          m.error_message,
          m.dispatch_uncertain,
          m.refunded,
          m.sent_at,
          m.created_at,
          m.updated_at,
          m.deleted_at,
          m.send_at,
        );
      for (const k of plan.idempotency) idempotencyInsert.run(k.partnerId, k.key, k.hash, k.outcome, k.body, now);
    },
  };
}

// ---- PostgreSQL

/** Numbers of the arrays' rows (WITH ORDINALITY, from 1) to a list in request order. */
function byOrdinal<R extends { n: number }>(rows: R[], length: number): (R | undefined)[] {
  const out: (R | undefined)[] = new Array(length).fill(undefined);
  for (const r of rows) out[Number(r.n) - 1] = r;
  return out;
}

const CONTACT_COLUMNS: readonly ContactColumn[] = ['phone', 'email', 'psid', 'igsid'];

/**
 * PostgreSQL's: partners locked in id order first; then each kind of read and write is one
 * statement for the whole batch, over unnest arrays (rows numbered WITH ORDINALITY).
 */
export const pgAcceptStatements: AcceptStatements = {
  async read(tx, req) {
    const out: AcceptReads = {
      funds: new Map(),
      idempotency: new Array(req.idempotency.length).fill(undefined),
      suppressions: req.suppressions.map(() => []),
      templates: [],
      contacts: new Array(req.contacts.length).fill(undefined),
    };
    const locked = await tx.all<Funds & { id: string }>(
      sql`SELECT id, balance, credit_limit FROM partners WHERE id = ANY(${req.partnerIds}::text[]) ORDER BY id FOR UPDATE`,
    );
    for (const f of locked) out.funds.set(f.id, { balance: f.balance, credit_limit: f.credit_limit });
    if (req.idempotency.length > 0) {
      const rows = await tx.all<StoredIdempotency & { n: number }>(
        sql`SELECT u.n, k.request_hash, k.outcome, k.response_body, k.created_at
              FROM unnest(${req.idempotency.map((k) => k.partnerId)}::text[], ${req.idempotency.map((k) => k.key)}::text[])
                   WITH ORDINALITY AS u(partner_id, key, n)
              JOIN idempotency_keys k ON k.partner_id = u.partner_id AND k.key = u.key`,
      );
      out.idempotency = byOrdinal(rows, req.idempotency.length).map(
        (r) =>
          r && {
            request_hash: r.request_hash,
            outcome: r.outcome,
            response_body: r.response_body,
            created_at: r.created_at,
          },
      );
    }
    if (req.suppressions.length > 0) {
      const q = req.suppressions;
      const rows = await tx.all<SuppressionHitRow & { n: number }>(
        sql`SELECT u.n, s.reason, s.scope, s.group_id, s.created_at
              FROM unnest(${q.map((x) => x.partnerId)}::text[], ${q.map((x) => x.channel)}::text[],
                          ${q.map((x) => x.address)}::text[], ${q.map((x) => x.sender)}::text[])
                   WITH ORDINALITY AS u(partner_id, channel, address, sender, n)
              JOIN suppressions s ON s.partner_id = u.partner_id AND s.channel = u.channel AND s.address = u.address
                   AND s.scope IN ('', u.sender)`,
      );
      for (const r of rows)
        out.suppressions[Number(r.n) - 1].push({
          reason: r.reason,
          scope: r.scope,
          group_id: r.group_id,
          created_at: r.created_at,
        });
    }
    for (const t of req.templates) {
      const synced = await tx.get<{ synced_at: number | null }>(
        sql`SELECT synced_at FROM whatsapp_template_syncs WHERE gateway_id = ${t.gatewayId}`,
      );
      out.templates.push(
        synced?.synced_at
          ? await tx.all<TemplateRow>(
              sql`SELECT * FROM whatsapp_templates WHERE gateway_id = ${t.gatewayId} AND name = ${t.name} ORDER BY language`,
            )
          : null,
      );
    }
    // One statement per contact column the batch uses (a channel type has one): the column is
    // the contacts index the lookup seeks.
    for (const column of CONTACT_COLUMNS) {
      const at: number[] = [];
      for (let i = 0; i < req.contacts.length; i++) if (req.contacts[i].column === column) at.push(i);
      if (at.length === 0) continue;
      const q = at.map((i) => req.contacts[i]);
      const rows = await tx.all<{
        n: number;
        id: string;
        conversation_id: string | null;
        last_message_at: number | null;
        last_inbound_at: number | null;
      }>(
        sql`SELECT u.n, ct.id, v.id AS conversation_id, v.last_message_at, v.last_inbound_at
              FROM unnest(${q.map((c) => c.partnerId)}::text[], ${q.map((c) => c.address)}::text[],
                          ${q.map((c) => c.channelType)}::text[]) WITH ORDINALITY AS u(partner_id, address, channel_type, n)
              JOIN contacts ct ON ct.partner_id = u.partner_id AND ct.${sql.raw(column)} = u.address
              LEFT JOIN LATERAL (
                SELECT id, last_message_at, last_inbound_at FROM conversations
                 WHERE contact_id = ct.id AND channel_type = u.channel_type AND status = 'open' AND partner_id = u.partner_id
                 ORDER BY id DESC LIMIT 1) v ON true`,
      );
      for (const r of rows) {
        out.contacts[at[Number(r.n) - 1]] = {
          id: r.id,
          open:
            r.conversation_id === null
              ? undefined
              : { id: r.conversation_id, last_message_at: r.last_message_at, last_inbound_at: r.last_inbound_at },
        };
      }
    }
    return out;
  },
  async write(tx, plan) {
    const { now } = plan;
    if (plan.debits.length > 0) {
      const debited = await tx.all<{ id: string; balance: number }>(
        sql`UPDATE partners p SET balance = p.balance - u.amount, updated_at = ${now}
              FROM unnest(${plan.debits.map((d) => d.partnerId)}::text[], ${plan.debits.map((d) => d.amount)}::bigint[])
                   AS u(id, amount)
             WHERE p.id = u.id AND p.balance + p.credit_limit > 0 AND p.balance - u.amount >= -p.credit_limit
         RETURNING p.id, p.balance`,
      );
      if (debited.length !== plan.debits.length)
        throw new DebitGuardError(`${debited.length} of ${plan.debits.length} partners debited`);
      const after = new Map(debited.map((r) => [r.id, r.balance]));
      for (const d of plan.debits) {
        if (after.get(d.partnerId) !== d.balanceAfter)
          throw new DebitGuardError(`partner ${d.partnerId} at ${after.get(d.partnerId)}, planned ${d.balanceAfter}`);
      }
    }
    if (plan.ledger.length > 0) {
      const l = plan.ledger;
      await tx.run(
        sql`INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
            SELECT partner_id, 'debit', amount, balance_after, message_id, note, actor, ${now}::bigint
              FROM unnest(${l.map((e) => e.partnerId)}::text[], ${l.map((e) => e.amount)}::bigint[],
                          ${l.map((e) => e.balanceAfter)}::bigint[], ${l.map((e) => e.messageId)}::text[],
                          ${l.map((e) => e.note)}::text[], ${l.map((e) => e.actor)}::text[])
                   WITH ORDINALITY AS u(partner_id, amount, balance_after, message_id, note, actor, n)
             ORDER BY n`,
      );
    }
    if (plan.contacts.length > 0) {
      const c = plan.contacts;
      const col = <K extends keyof ContactRow>(k: K) => c.map((r) => r[k]);
      await tx.run(
        sql`INSERT INTO contacts (id, partner_id, name, phone, email, psid, igsid, attributes, last_inbound_at, created_at, updated_at)
            SELECT * FROM unnest(${col('id')}::text[], ${col('partner_id')}::text[], ${col('name')}::text[],
              ${col('phone')}::text[], ${col('email')}::text[], ${col('psid')}::text[], ${col('igsid')}::text[],
              ${col('attributes')}::text[], ${col('last_inbound_at')}::bigint[], ${col('created_at')}::bigint[],
              ${col('updated_at')}::bigint[])`,
      );
    }
    if (plan.conversations.length > 0) {
      const v = plan.conversations;
      const col = <K extends keyof ConversationRow>(k: K) => v.map((r) => r[k]);
      await tx.run(
        sql`INSERT INTO conversations (id, partner_id, contact_id, channel_type, channel_id, status, last_message_at,
              last_inbound_at, created_at, updated_at)
            SELECT * FROM unnest(${col('id')}::text[], ${col('partner_id')}::text[], ${col('contact_id')}::text[],
              ${col('channel_type')}::text[], ${col('channel_id')}::text[], ${col('status')}::text[],
              ${col('last_message_at')}::bigint[], ${col('last_inbound_at')}::bigint[], ${col('created_at')}::bigint[],
              ${col('updated_at')}::bigint[])`,
      );
    }
    if (plan.touched.length > 0) {
      const v = plan.touched;
      await tx.run(
        sql`UPDATE conversations c SET last_message_at = u.last_message_at, last_inbound_at = u.last_inbound_at,
              updated_at = ${now}
              FROM unnest(${v.map((x) => x.id)}::text[], ${v.map((x) => x.lastMessageAt)}::bigint[],
                          ${v.map((x) => x.lastInboundAt)}::bigint[]) AS u(id, last_message_at, last_inbound_at)
             WHERE c.id = u.id`,
      );
    }
    if (plan.messages.length > 0) {
      const m = plan.messages;
      const col = <K extends keyof NewMessage>(k: K) => m.map((r) => r[k]);
      await tx.run(
        sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, conversation_id,
              contact_id, "to", "from", content, status, provider_message_id, provider_id_indexed, price, segments,
              error_code, error_message, dispatch_uncertain, refunded, sent_at, created_at, updated_at, deleted_at, send_at)
            SELECT * FROM unnest(${col('id')}::text[], ${col('partner_id')}::text[], ${col('direction')}::text[],
              ${col('channel_type')}::text[], ${col('channel_id')}::text[], ${col('gateway_id')}::text[],
              ${col('conversation_id')}::text[], ${col('contact_id')}::text[], ${col('to')}::text[], ${col('from')}::text[],
              ${col('content')}::text[], ${col('status')}::text[], ${col('provider_message_id')}::text[],
              ${col('provider_id_indexed')}::bigint[], ${col('price')}::bigint[], ${col('segments')}::bigint[],
              ${col('error_code')}::text[], ${col('error_message')}::text[], ${col('dispatch_uncertain')}::bigint[],
              ${col('refunded')}::bigint[], ${col('sent_at')}::bigint[], ${col('created_at')}::bigint[],
              ${col('updated_at')}::bigint[], ${col('deleted_at')}::bigint[], ${col('send_at')}::bigint[])`,
      );
    }
    if (plan.idempotency.length > 0) {
      const k = plan.idempotency;
      // The batch holds each (partner, key) once: the first send of a key decides it.
      await tx.run(
        sql`INSERT INTO idempotency_keys (partner_id, key, request_hash, outcome, response_body, created_at)
            SELECT partner_id, key, request_hash, outcome, response_body, ${now}::bigint
              FROM unnest(${k.map((x) => x.partnerId)}::text[], ${k.map((x) => x.key)}::text[],
                          ${k.map((x) => x.hash)}::text[], ${k.map((x) => x.outcome)}::text[], ${k.map((x) => x.body)}::text[])
                   AS u(partner_id, key, request_hash, outcome, response_body)
            ON CONFLICT (partner_id, key) DO UPDATE SET request_hash = excluded.request_hash, outcome = excluded.outcome,
              response_body = excluded.response_body, created_at = excluded.created_at`,
      );
    }
  },
};
