import type { contacts } from '../db/schema.js';
import { forUpdate } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import type { Row } from '../db/rows.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { contactEmail } from '../lib/email.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import type { ChannelType, CoreCtx } from './context.js';

// A contact is identified per partner by the address its channel uses: phone (SMS,
// WhatsApp), email, Messenger page-scoped id, or Instagram-scoped id.

export type ContactKey = 'phone' | 'email' | 'psid' | 'igsid';

export function contactKeyFor(channel: ChannelType): ContactKey {
  switch (channel) {
    case 'sms':
    case 'whatsapp':
      return 'phone';
    case 'email':
      return 'email';
    case 'messenger':
      return 'psid';
    case 'instagram':
      return 'igsid';
  }
}

export type ContactRow = Row<typeof contacts>;

/**
 * Find the partner's contact for an address, creating it if absent. A profile name from
 * the provider fills in a missing name; it never overwrites one the partner set.
 * Runs inside the caller's transaction.
 */
export function findOrCreateContact(
  ctx: CoreCtx,
  partnerId: string,
  channel: ChannelType,
  address: string,
  opts: { name?: string | null; inboundAt?: number } = {},
): { contact: ContactRow; created: boolean } {
  const key = contactKeyFor(channel);
  if (key === 'email') address = contactEmail(address);
  const db = ctx.db.sqlite;
  const found = stmt<[string, string], ContactRow>(
    db,
    `SELECT * FROM contacts WHERE partner_id = ? AND ${key} = ?`,
  ).get(partnerId, address);
  const now = ctx.now();
  if (found) {
    if ((opts.name && !found.name) || opts.inboundAt) {
      const name = found.name ?? opts.name ?? null;
      const lastInbound = opts.inboundAt ? Math.max(opts.inboundAt, found.last_inbound_at ?? 0) : found.last_inbound_at;
      stmt(db, `UPDATE contacts SET name = ?, last_inbound_at = ?, updated_at = ? WHERE id = ?`).run(
        name,
        lastInbound,
        now,
        found.id,
      );
      return { contact: { ...found, name, last_inbound_at: lastInbound, updated_at: now }, created: false };
    }
    return { contact: found, created: false };
  }
  return { contact: createContact(ctx, partnerId, key, address, opts, now), created: true };
}

/**
 * findOrCreateContact inside the caller's store transaction `q`, on either store. The row is
 * read for update, and a contact created at the same time by another transaction is found
 * rather than inserted twice.
 */
export async function findOrCreateContactIn(
  q: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  channel: ChannelType,
  address: string,
  opts: { name?: string | null; inboundAt?: number } = {},
): Promise<{ contact: ContactRow; created: boolean }> {
  const key = contactKeyFor(channel);
  address = addressFor(channel, address);
  const col = sql.raw(key);
  const read = () =>
    q.get<ContactRow>(
      sql`SELECT * FROM contacts WHERE partner_id = ${partnerId} AND ${col} = ${address} ${forUpdate(ctx.store.dialect)}`,
    );
  const now = ctx.now();
  let found = await read();
  if (!found) {
    const row = newContact(partnerId, key, address, opts, now);
    const inserted = await q.get<{ id: string }>(
      sql`INSERT INTO contacts (id, partner_id, name, phone, email, psid, igsid, attributes, last_inbound_at, created_at, updated_at)
          VALUES (${row.id}, ${row.partner_id}, ${row.name}, ${row.phone}, ${row.email}, ${row.psid}, ${row.igsid},
            ${row.attributes}, ${row.last_inbound_at}, ${row.created_at}, ${row.updated_at})
          ON CONFLICT DO NOTHING RETURNING id`,
    );
    if (inserted) return { contact: row, created: true };
    found = (await read())!;
  }
  if ((opts.name && !found.name) || opts.inboundAt) {
    const name = found.name ?? opts.name ?? null;
    const lastInbound = opts.inboundAt ? Math.max(opts.inboundAt, found.last_inbound_at ?? 0) : found.last_inbound_at;
    await q.run(
      sql`UPDATE contacts SET name = ${name}, last_inbound_at = ${lastInbound}, updated_at = ${now} WHERE id = ${found.id}`,
    );
    return { contact: { ...found, name, last_inbound_at: lastInbound, updated_at: now }, created: false };
  }
  return { contact: found, created: false };
}

/**
 * The id of the partner's contact for an address, created if absent: all an outbound send
 * needs. In the caller's transaction.
 */
export function contactIdFor(ctx: CoreCtx, partnerId: string, channel: ChannelType, address: string): string {
  return (
    findContactId(ctx, partnerId, channel, address) ??
    createContact(ctx, partnerId, contactKeyFor(channel), addressFor(channel, address), {}, ctx.now()).id
  );
}

/** The id of the partner's contact for an address on a channel, if there is one. */
export function findContactId(
  ctx: CoreCtx,
  partnerId: string,
  channel: ChannelType,
  address: string,
): string | undefined {
  const key = contactKeyFor(channel);
  return stmt<[string, string], Pick<ContactRow, 'id'>>(
    ctx.db.sqlite,
    `SELECT id FROM contacts WHERE partner_id = ? AND ${key} = ?`,
  ).get(partnerId, addressFor(channel, address))?.id;
}

/** findContactId through `q` (the store, or a transaction's Tx), on either store. */
export async function findContactIdIn(
  q: Queryable,
  partnerId: string,
  channel: ChannelType,
  address: string,
): Promise<string | undefined> {
  const col = sql.raw(contactKeyFor(channel));
  const r = await q.get<Pick<ContactRow, 'id'>>(
    sql`SELECT id FROM contacts WHERE partner_id = ${partnerId} AND ${col} = ${addressFor(channel, address)}`,
  );
  return r?.id;
}

/** An address as contacts keep it: emails in their normal form. */
function addressFor(channel: ChannelType, address: string): string {
  return contactKeyFor(channel) === 'email' ? contactEmail(address) : address;
}

function createContact(
  ctx: CoreCtx,
  partnerId: string,
  key: ContactKey,
  address: string,
  opts: { name?: string | null; inboundAt?: number },
  now: number,
): ContactRow {
  const row = newContact(partnerId, key, address, opts, now);
  insertContact(ctx, row);
  return row;
}

function newContact(
  partnerId: string,
  key: ContactKey,
  address: string,
  opts: { name?: string | null; inboundAt?: number },
  now: number,
): ContactRow {
  const row: ContactRow = {
    id: newId('ct'),
    partner_id: partnerId,
    name: opts.name ?? null,
    phone: null,
    email: null,
    psid: null,
    igsid: null,
    attributes: '{}',
    last_inbound_at: opts.inboundAt ?? null,
    created_at: now,
    updated_at: now,
  };
  row[key] = address;
  return row;
}

/** Write a new contact row (inside the caller's transaction). */
export function insertContact(ctx: CoreCtx, row: ContactRow) {
  stmt(
    ctx.db.sqlite,
    `INSERT INTO contacts (id, partner_id, name, phone, email, psid, igsid, attributes, last_inbound_at, created_at, updated_at)
     VALUES (@id, @partner_id, @name, @phone, @email, @psid, @igsid, @attributes, @last_inbound_at, @created_at, @updated_at)`,
  ).run(row);
}

export function contactJson(c: ContactRow) {
  return {
    id: c.id,
    name: c.name,
    phone: c.phone,
    email: c.email,
    messenger_psid: c.psid,
    instagram_igsid: c.igsid,
    attributes: JSON.parse(c.attributes),
    last_inbound_at: iso(c.last_inbound_at),
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}
