import { idFloor } from '../../src/lib/id-time.js';
import { insertPartner } from './fixtures.js';
import type { StoreCtx } from './helpers.js';

// Rows for the read models' tests on both stores (message and conversation lists, channels,
// contacts, suppressions), written as raw SQL both stores accept.

/** An id of `prefix` created at `ms`, `n` ordering ids of the same millisecond. */
export function idAt(prefix: string, ms: number, n = 0): string {
  return idFloor(prefix, ms).slice(0, -16) + String(n).padStart(16, '0');
}

const q = (v: string | number | null) => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : `'${v}'`);
const values = (...vs: (string | number | null)[]) => `(${vs.map(q).join(', ')})`;

/** A partner whose id is its slug and name, as fixtures.ts's insertPartner writes it. */
export function partner(t: StoreCtx, id: string): Promise<void> {
  return insertPartner(t, { id, slug: id });
}

export interface ContactFix {
  id: string;
  partner: string;
  name?: string | null;
  phone?: string | null;
  email?: string | null;
  psid?: string | null;
  at?: number;
}

export async function contact(t: StoreCtx, c: ContactFix): Promise<void> {
  const at = c.at ?? 0;
  await t.exec(
    `INSERT INTO contacts (id, partner_id, name, phone, email, psid, created_at, updated_at) VALUES ${values(
      c.id,
      c.partner,
      c.name ?? null,
      c.phone ?? null,
      c.email ?? null,
      c.psid ?? null,
      at,
      at,
    )}`,
  );
}

export interface ConversationFix {
  id: string;
  partner: string;
  contact: string;
  channel: string;
  status?: 'open' | 'closed';
  createdAt?: number;
  updatedAt: number;
  lastInboundAt?: number | null;
}

export async function conversation(t: StoreCtx, c: ConversationFix): Promise<void> {
  await t.exec(
    `INSERT INTO conversations (id, partner_id, contact_id, channel_type, status, last_message_at, last_inbound_at, created_at, updated_at)
     VALUES ${values(c.id, c.partner, c.contact, c.channel, c.status ?? 'open', c.updatedAt, c.lastInboundAt ?? null, c.createdAt ?? 0, c.updatedAt)}`,
  );
}

export interface MessageFix {
  id: string;
  partner: string;
  channel: string;
  conversation?: string | null;
  contact?: string | null;
  channelId?: string | null;
  direction?: 'outbound' | 'inbound';
  status?: string;
  providerId?: string | null;
  /** provider_id_indexed: reports name the message by the provider's id. */
  indexed?: boolean;
  errorCode?: string | null;
  /** dispatch_uncertain: may have reached the provider twice. */
  uncertain?: boolean;
  at: number;
}

export async function message(t: StoreCtx, m: MessageFix): Promise<void> {
  await t.exec(
    `INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, conversation_id, contact_id, "to", "from", content, status,
       provider_message_id, provider_id_indexed, error_code, dispatch_uncertain, price, segments, created_at, updated_at)
     VALUES ${values(
       m.id,
       m.partner,
       m.direction ?? 'outbound',
       m.channel,
       m.channelId ?? null,
       m.conversation ?? null,
       m.contact ?? null,
       '+15550001111',
       '+15550002222',
       '{"kind":"text","text":"hi"}',
       m.status ?? 'delivered',
       m.providerId ?? null,
       m.indexed ? 1 : 0,
       m.errorCode ?? null,
       m.uncertain ? 1 : 0,
       7500,
       1,
       m.at,
       m.at,
     )}`,
  );
}

/** Every page of `read`, following its cursor until it ends (at most 100 pages). */
export async function allPages<T, C>(
  read: (after: C | null) => Promise<{ rows: T[]; next: C | null }>,
): Promise<{ rows: T[]; pages: number }> {
  const rows: T[] = [];
  let after: C | null = null;
  for (let pages = 1; pages <= 100; pages++) {
    const page = await read(after);
    rows.push(...page.rows);
    if (page.next === null) return { rows, pages };
    after = page.next;
  }
  throw new Error('more than 100 pages: the cursor does not advance');
}
