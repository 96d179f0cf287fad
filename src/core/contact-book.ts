import { escapeLike, forUpdate, indexedBy, likeFold } from '../db/dialect.js';
import { type Sql, sql } from '../db/sql.js';
import type { Queryable } from '../db/query.js';
import { contactEmail } from '../lib/email.js';
import { AppError } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import type { CoreCtx } from './context.js';
import type { ContactRow } from './contacts.js';

// Contacts as partners manage them: an upsert keyed by any of the addresses a channel uses
// (the same keys the send and inbound paths look contacts up by), so a contact created here
// is the one a later message to that number joins.

export interface ContactInput {
  name?: string | null;
  phone?: string;
  email?: string;
  psid?: string;
  igsid?: string;
  /** Merged into the stored attributes; a null value removes that key. */
  attributes?: Record<string, unknown>;
}

const KEYS = ['phone', 'email', 'psid', 'igsid'] as const;
const API_NAME: Record<(typeof KEYS)[number], string> = {
  phone: 'phone',
  email: 'email',
  psid: 'messenger_psid',
  igsid: 'instagram_igsid',
};

export const MAX_ATTRIBUTES_BYTES = 16 * 1024;

/**
 * Create, or update the one contact the given addresses point at, in one transaction. A contact
 * another request created meanwhile with one of these addresses (PostgreSQL runs both at once)
 * is found by a second try, which updates it.
 */
export async function upsertContact(
  ctx: CoreCtx,
  partnerId: string,
  given: ContactInput,
): Promise<{ contact: ContactRow; created: boolean }> {
  const input: ContactInput = given.email === undefined ? given : { ...given, email: contactEmail(given.email) };
  for (let attempt = 1; ; attempt++) {
    const done = await ctx.store.transaction((tx) => upsertIn(tx, ctx, partnerId, input));
    if (done) return done;
    if (attempt === 3)
      throw new AppError(
        'conflict',
        'these addresses were being changed by other requests at the same time; try again',
      );
  }
}

/** The upsert in `tx`; null when a contact with one of the addresses appeared since they were looked up. */
async function upsertIn(
  tx: Queryable,
  ctx: CoreCtx,
  partnerId: string,
  input: ContactInput,
): Promise<{ contact: ContactRow; created: boolean } | null> {
  const matches = new Map<string, { row: ContactRow; keys: string[] }>();
  for (const k of KEYS) {
    const v = input[k];
    if (v === undefined) continue;
    const row = await tx.get<ContactRow>(
      // Locked on PostgreSQL: a racing upsert of the same contact waits, then merges into this one's attributes.
      sql`SELECT * FROM contacts WHERE partner_id = ${partnerId} AND ${sql.raw(k)} = ${v} ${forUpdate(ctx.store.dialect)}`,
    );
    if (!row) continue;
    const m = matches.get(row.id) ?? { row, keys: [] };
    m.keys.push(API_NAME[k]);
    matches.set(row.id, m);
  }
  if (matches.size > 1) {
    throw new AppError(
      'conflict',
      'these addresses belong to different contacts; update each contact separately',
      [...matches.values()].map((m) => ({ field: m.keys.join(', '), message: `belongs to contact ${m.row.id}` })),
    );
  }
  const now = ctx.now();
  const existing = [...matches.values()][0]?.row;
  const attributes = mergeAttributes(existing ? JSON.parse(existing.attributes) : {}, input.attributes);
  if (!existing) {
    const row: ContactRow = {
      id: newId('ct'),
      partner_id: partnerId,
      name: input.name ?? null,
      phone: input.phone ?? null,
      email: input.email ?? null,
      psid: input.psid ?? null,
      igsid: input.igsid ?? null,
      attributes,
      last_inbound_at: null,
      created_at: now,
      updated_at: now,
    };
    const inserted = await tx.get<{ id: string }>(
      sql`INSERT INTO contacts (id, partner_id, name, phone, email, psid, igsid, attributes, last_inbound_at, created_at, updated_at)
          VALUES (${row.id}, ${row.partner_id}, ${row.name}, ${row.phone}, ${row.email}, ${row.psid}, ${row.igsid},
            ${row.attributes}, NULL, ${now}, ${now})
          ON CONFLICT DO NOTHING RETURNING id`,
    );
    return inserted ? { contact: row, created: true } : null;
  }
  const row: ContactRow = {
    ...existing,
    name: input.name !== undefined ? input.name : existing.name,
    phone: input.phone ?? existing.phone,
    email: input.email ?? existing.email,
    psid: input.psid ?? existing.psid,
    igsid: input.igsid ?? existing.igsid,
    attributes,
    updated_at: now,
  };
  const updated = await tx.get<{ id: string }>(
    sql`UPDATE contacts SET name = ${row.name}, phone = ${row.phone}, email = ${row.email}, psid = ${row.psid},
          igsid = ${row.igsid}, attributes = ${row.attributes}, updated_at = ${now}
        WHERE id = ${row.id} AND NOT EXISTS (
          SELECT 1 FROM contacts o WHERE o.partner_id = ${partnerId} AND o.id <> ${row.id}
            AND (o.phone = ${row.phone} OR o.email = ${row.email} OR o.psid = ${row.psid} OR o.igsid = ${row.igsid}))
        RETURNING id`,
  );
  return updated ? { contact: row, created: false } : null;
}

function mergeAttributes(stored: Record<string, unknown>, patch: Record<string, unknown> | undefined): string {
  const next = { ...stored };
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v === null) delete next[k];
    else next[k] = v;
  }
  const json = JSON.stringify(next);
  if (Buffer.byteLength(json) > MAX_ATTRIBUTES_BYTES) {
    throw new AppError('invalid_request', `attributes must stay under ${MAX_ATTRIBUTES_BYTES} bytes of JSON`, [
      { field: 'attributes', message: 'too large' },
    ]);
  }
  return json;
}

export function getContact(ctx: CoreCtx, partnerId: string, id: string): Promise<ContactRow | undefined> {
  return ctx.store.get<ContactRow>(sql`SELECT * FROM contacts WHERE id = ${id} AND partner_id = ${partnerId}`);
}

export interface ContactFilter {
  /** Case-insensitive substring of name, phone or email. */
  q?: string;
  phone?: string;
  email?: string;
}

/** Newest first, keyset on contacts_partner (partner_id, id). */
export function listContacts(
  ctx: CoreCtx,
  partnerId: string,
  f: ContactFilter,
  limit: number,
  afterId?: string | null,
): Promise<ContactRow[]> {
  const d = ctx.store.dialect;
  const where: Sql[] = [sql`partner_id = ${partnerId}`];
  if (f.phone !== undefined) where.push(sql`phone = ${f.phone}`);
  if (f.email !== undefined) where.push(sql`email = ${contactEmail(f.email)}`);
  if (f.q) {
    const q = `%${escapeLike(f.q)}%`;
    where.push(sql`(${likeFold(d, 'name', q)} OR ${likeFold(d, 'phone', q)} OR ${likeFold(d, 'email', q)})`);
  }
  if (afterId) where.push(sql`id < ${afterId}`);
  // An exact address is one row through its unique index; otherwise walk newest first.
  const index =
    f.phone !== undefined ? 'contacts_phone' : f.email !== undefined ? 'contacts_email' : 'contacts_partner';
  return ctx.store.all<ContactRow>(
    sql`SELECT * FROM contacts ${indexedBy(d, index)} WHERE ${sql.join(where, ' AND ')} ORDER BY id DESC LIMIT ${limit}`,
  );
}
