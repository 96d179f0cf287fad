import {
  type AcceptPlan,
  type AcceptReadRequest,
  acceptStatements,
  type ContactColumn,
  type Funds,
  type OpenConversation,
} from '../db/accept-statements.js';
import type { BatchResult, Queryable } from '../db/query.js';
import { contactEmail } from '../lib/email.js';
import { AppError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { moneyJson } from '../lib/money.js';
import { contactKeyFor } from './contacts.js';
import type { CoreCtx } from './context.js';
import { emitEventIn } from './events.js';
import { fundsRefusal } from './ledger.js';
import type { MessageRow } from './messages.js';
import type { CheckedSend, IdempotencyInput, SendOutcome } from './send.js';
import { normalizeAddress, suppressionRefusal } from './suppressions.js';
import { templateVerdict } from './whatsapp-templates.js';
import type { MessageContent } from './message-content.js';

// The send accept in batch form: every send of a group-commit batch (src/db/batch.ts) is decided
// here, in arrival order, in plain TypeScript, then written with a fixed number of store
// operations per batch (src/db/accept-statements.ts, one set of statements per store).
//
//   1. read: the batch's partners' funds (locked in id order on PostgreSQL), the stored
//      Idempotency-Keys, the suppression entries of each recipient, a template's catalogue
//      rows, each recipient's contact and open conversation.
//   2. decide each send as the accept always has, one after the other: a stored key replays
//      (the same key twice in one batch: the first decides, the others replay it or conflict),
//      a template PAUSED since the check refuses (400), a suppression refuses (400, after
//      exhausted funds' 402), then the funds rule against the balance the sends before it left.
//   3. write what was accepted: the debit per partner (repeating the funds rule in SQL: a
//      debit that does not match the plan rolls the batch back), ledger entries, contacts,
//      conversations, messages, idempotency rows; then the dispatch jobs and events.
// A refused send writes nothing. A send whose answer cannot be built (render throws) fails the
// batch as a whole, which the batcher then runs again send by send, so it fails alone.

/** A checked send handed to the accept, with how its answer is built. */
export interface AcceptItem {
  send: CheckedSend;
  idempotency?: IdempotencyInput;
  render: (m: MessageRow) => unknown;
}

/** What the accept needs beyond the send. */
export interface AcceptBatchDeps {
  ctx: CoreCtx;
  /** Writes the message's dispatch job in `tx`, due now or at a scheduled send's time. */
  enqueueDispatch: (tx: Queryable, messageId: string, runAt?: number) => Promise<unknown>;
  /** config.billing low-balance default when the partner has none (micro-units). */
  defaultLowBalance: number | null;
  /** How long an Idempotency-Key answers with its first response (config.idempotency.ttlHours). */
  idempotencyTtlMs: number;
}

export function idempotencyKeyReused(): AppError {
  return new AppError(
    'idempotency_key_reused',
    'this Idempotency-Key was already used with a different request body; use a new key for a new message',
  );
}

/**
 * The content the rules judge: a template the catalogue knows with the catalogue's category, not
 * the one the request names (an AUTHENTICATION template passes a marketing opt-out).
 */
export function ruledContent(send: Pick<CheckedSend, 'preflight' | 'content'>): MessageContent {
  const { preflight, content } = send;
  return preflight.template && content.kind === 'template'
    ? { ...content, template: { ...content.template, category: preflight.template.category } }
    : content;
}

/** Index of a request entry, shared by the sends that ask the same. */
function indexer<T>(list: T[]): (key: string, entry: () => T) => number {
  const at = new Map<string, number>();
  return (key, entry) => {
    let i = at.get(key);
    if (i === undefined) {
      i = list.push(entry()) - 1;
      at.set(key, i);
    }
    return i;
  };
}

interface Slots {
  idem: number;
  suppression: number;
  template: number;
  contact: number;
  column: ContactColumn;
  address: string;
}

/** The accept of a batch of checked sends, in `tx`: one result per send, in order. */
export async function acceptBatch(
  deps: AcceptBatchDeps,
  tx: Queryable,
  items: readonly AcceptItem[],
): Promise<BatchResult<SendOutcome>[]> {
  const { ctx } = deps;
  const st = acceptStatements(ctx.store);
  const now = ctx.now();

  // 1. What the batch reads, each distinct question once.
  const partners = new Set<string>();
  const idemReq: AcceptReadRequest['idempotency'][number][] = [];
  const suppressionReq: AcceptReadRequest['suppressions'][number][] = [];
  const templateReq: AcceptReadRequest['templates'][number][] = [];
  const contactReq: AcceptReadRequest['contacts'][number][] = [];
  const idemAt = indexer(idemReq);
  const suppressionAt = indexer(suppressionReq);
  const templateAt = indexer(templateReq);
  const contactAt = indexer(contactReq);
  const slots: Slots[] = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    const { send, idempotency } = items[i];
    const partnerId = send.principal.partnerId;
    const channel = send.preflight.channel;
    partners.add(partnerId);
    const idem = idempotency
      ? idemAt(`${partnerId}\0${idempotency.key}`, () => ({ partnerId, key: idempotency.key }))
      : -1;
    const address = normalizeAddress(channel.type, send.to);
    const suppression =
      address === null
        ? -1
        : suppressionAt(`${partnerId}\0${channel.type}\0${address}\0${channel.sender}`, () => ({
            partnerId,
            channel: channel.type,
            address,
            sender: channel.sender,
          }));
    const tpl = send.preflight.template;
    const template = tpl
      ? templateAt(`${channel.gatewayId}\0${tpl.check.name}`, () => ({
          gatewayId: channel.gatewayId,
          name: tpl.check.name,
        }))
      : -1;
    const column = contactKeyFor(channel.type);
    const contactAddress = column === 'email' ? contactEmail(send.to) : send.to;
    const contact = contactAt(`${partnerId}\0${column}\0${contactAddress}\0${channel.type}`, () => ({
      partnerId,
      column,
      address: contactAddress,
      channelType: channel.type,
    }));
    slots[i] = { idem, suppression, template, contact, column, address: contactAddress };
  }
  const reads = await st.read(tx, {
    partnerIds: [...partners].sort(),
    idempotency: idemReq,
    suppressions: suppressionReq,
    templates: templateReq,
    contacts: contactReq,
  });

  // 2. Each send in arrival order, against the balance the sends before it left.
  const funds = new Map<string, Funds>();
  for (const [id, f] of reads.funds) funds.set(id, { balance: f.balance, credit_limit: f.credit_limit });
  const plan: AcceptPlan = {
    now,
    debits: [],
    ledger: [],
    contacts: [],
    conversations: [],
    touched: [],
    messages: [],
    idempotency: [],
  };
  const debited = new Map<string, number>();
  const contactIds = new Map<string, string>();
  const openConversations = new Map<string, OpenConversation & { isNew: boolean }>();
  const firstOfKey = new Map<string, { hash: string; body: string }>();
  const jobs: { messageId: string; runAt?: number }[] = [];
  const events: { partnerId: string; data: Record<string, unknown> }[] = [];
  const results: BatchResult<SendOutcome>[] = new Array(items.length);

  for (let i = 0; i < items.length; i++) {
    const { send, idempotency: idem, render } = items[i];
    const s = slots[i];
    const partnerId = send.principal.partnerId;
    const channel = send.preflight.channel;
    const f = funds.get(partnerId);
    const keyId = idem ? `${partnerId}\0${idem.key}` : '';
    try {
      if (idem) {
        const first = firstOfKey.get(keyId);
        if (first) {
          if (first.hash !== idem.hash) throw idempotencyKeyReused();
          results[i] = { ok: true, value: { kind: 'replay', outcome: 'accepted', answer: JSON.parse(first.body) } };
          continue;
        }
        const row = reads.idempotency[s.idem];
        if (row && row.created_at >= now - deps.idempotencyTtlMs) {
          if (row.request_hash !== idem.hash) throw idempotencyKeyReused();
          results[i] = {
            ok: true,
            value: { kind: 'replay', outcome: row.outcome, answer: JSON.parse(row.response_body) },
          };
          continue;
        }
      }
      // A status webhook (PAUSED, DISABLED) committed since the check refuses the send here.
      const tpl = send.preflight.template;
      if (tpl) {
        const rows = reads.templates[s.template];
        if (rows) templateVerdict(tpl.check, rows);
      }
      // The suppression list, read in this transaction: a STOP, bounce or opt-out committed
      // since the check refuses the send too. Exhausted funds (402) still come first.
      if (s.suppression >= 0) {
        const refusal = suppressionRefusal(
          reads.suppressions[s.suppression],
          channel.type,
          send.to,
          ruledContent(send),
        );
        if (refusal) {
          const exhausted = fundsRefusal(f, 0);
          throw exhausted && f ? exhausted : refusal;
        }
      }
      const price = send.quote.total;
      // A price past 2^53 (a maximal SMS price times its segments) is an integer still, and
      // fundsRefusal refuses it with a 402 as more than msgd handles.
      if (!Number.isInteger(price) || price < 0)
        throw new Error(`debit amount must be a non-negative integer: ${price}`);
      const short = fundsRefusal(f, price);
      if (short) throw short;
    } catch (e) {
      results[i] = { ok: false, error: e };
      continue;
    }

    // Accepted: the debit, the contact and conversation, the message, its job.
    const fu = f!;
    const price = send.quote.total;
    const before = fu.balance;
    fu.balance -= price;
    const after = fu.balance;
    debited.set(partnerId, (debited.get(partnerId) ?? 0) + price);
    const messageId = newId('msg');
    plan.ledger.push({
      partnerId,
      amount: -price,
      balanceAfter: after,
      messageId,
      note: send.preflight.template?.note ?? null,
      actor: `token:${send.principal.tokenId}`,
    });
    const contactKey = `${partnerId}\0${s.column}\0${s.address}`;
    let contactId = contactIds.get(contactKey);
    const found = reads.contacts[s.contact];
    if (contactId === undefined) {
      if (found) contactId = found.id;
      else {
        contactId = newId('ct');
        plan.contacts.push({
          id: contactId,
          partner_id: partnerId,
          name: null,
          phone: null,
          email: null,
          psid: null,
          igsid: null,
          attributes: '{}',
          last_inbound_at: null,
          created_at: now,
          updated_at: now,
          [s.column]: s.address,
        });
      }
      contactIds.set(contactKey, contactId);
    }
    const convKey = `${contactId}\0${channel.type}`;
    let conv = openConversations.get(convKey);
    if (!conv) {
      const open = found?.id === contactId ? found.open : undefined;
      if (open) {
        conv = { ...open, isNew: false };
      } else {
        conv = { id: newId('conv'), last_message_at: now, last_inbound_at: null, isNew: true };
        plan.conversations.push({
          id: conv.id,
          partner_id: partnerId,
          contact_id: contactId,
          channel_type: channel.type,
          channel_id: channel.id,
          status: 'open',
          last_message_at: now,
          last_inbound_at: null,
          created_at: now,
          updated_at: now,
        });
      }
      openConversations.set(convKey, conv);
    }
    conv.last_message_at = Math.max(now, conv.last_message_at ?? 0);
    const message: MessageRow = {
      id: messageId,
      partner_id: partnerId,
      direction: 'outbound',
      channel_type: channel.type,
      channel_id: channel.id,
      gateway_id: channel.gatewayId,
      conversation_id: conv.id,
      contact_id: contactId,
      to: send.to,
      from: channel.sender,
      content: JSON.stringify(send.content),
      status: send.sendAt === undefined ? 'queued' : 'scheduled',
      provider_message_id: null,
      provider_id_indexed: 1,
      price,
      segments: send.quote.segments,
      error_code: null,
      error_message: null,
      dispatch_uncertain: 0,
      dispatch_in_flight: 0,
      refunded: 0,
      sent_at: null,
      created_at: now,
      updated_at: now,
      deleted_at: null,
      send_at: send.sendAt ?? null,
    };
    // No 'queued' history row: messageHistory derives it from created_at (one write fewer per send).
    plan.messages.push(message);
    jobs.push({ messageId, runAt: send.sendAt });
    const threshold = send.preflight.partner.lowBalanceThreshold ?? deps.defaultLowBalance;
    if (threshold !== null && before >= threshold && after < threshold) {
      events.push({
        partnerId,
        data: { partner_id: partnerId, balance: moneyJson(after), threshold: moneyJson(threshold) },
      });
    }
    // A render that throws fails the whole batch: the batcher runs the sends again one by one.
    const answer = render(message);
    if (idem) {
      const body = JSON.stringify(answer);
      firstOfKey.set(keyId, { hash: idem.hash, body });
      plan.idempotency.push({ partnerId, key: idem.key, hash: idem.hash, outcome: 'accepted', body });
    }
    results[i] = { ok: true, value: { kind: 'accepted', message, quote: send.quote, answer } };
  }
  if (plan.messages.length === 0) return results;

  // 3. Write.
  for (const id of [...debited.keys()].sort())
    plan.debits.push({ partnerId: id, amount: debited.get(id)!, balanceAfter: funds.get(id)!.balance });
  for (const conv of openConversations.values()) {
    if (conv.isNew) continue;
    plan.touched.push({ id: conv.id, lastMessageAt: conv.last_message_at!, lastInboundAt: conv.last_inbound_at });
  }
  await st.write(tx, plan);
  // One statement at a time: a PostgreSQL connection takes the next once the last has answered.
  for (const j of jobs) await deps.enqueueDispatch(tx, j.messageId, j.runAt);
  for (const e of events) await emitEventIn(tx, ctx, e.partnerId, 'partner.balance_low', e.data);
  return results;
}
