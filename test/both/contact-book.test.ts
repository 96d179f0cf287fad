import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getContact, listContacts, upsertContact } from '../../src/core/contact-book.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { allPages, contact, idAt, partner } from './read-fixtures.js';

// The partner's contacts (GET /v1/contacts) on both stores: newest first across pages, the
// exact-address filters, and the search, which ignores ASCII case and takes % and _ literally;
// the upsert (POST /v1/contacts) keyed by any of a contact's addresses.

const T0 = Date.UTC(2026, 0, 1);
const ct = (n: number) => idAt('ct', T0 + n * 1000);

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await partner(t, 'p1');
  await partner(t, 'p2');
  await contact(t, { id: ct(1), partner: 'p1', name: 'Ann Lee', phone: '+14155552671' });
  await contact(t, { id: ct(2), partner: 'p1', name: 'BOB 100%', email: 'bob@example.com' });
  await contact(t, { id: ct(3), partner: 'p1', name: 'carol_x', email: 'carol@example.org' });
  await contact(t, { id: ct(4), partner: 'p1', name: null, phone: '+14155552672' });
  await contact(t, { id: ct(5), partner: 'p2', name: 'Ann Other', phone: '+14155552671' });
});
afterEach(() => t.close());

async function ids(f: Parameters<typeof listContacts>[2], limit: number) {
  const { rows } = await allPages<string, string>(async (after) => {
    const page = await listContacts(t.ctx, 'p1', f, limit + 1, after);
    const shown = page.slice(0, limit).map((c) => c.id);
    return { rows: shown, next: page.length > limit ? shown[limit - 1] : null };
  });
  return rows;
}

describe('the contact book', () => {
  it('pages the partner’s contacts newest first', async () => {
    expect(await ids({}, 1)).toEqual([ct(4), ct(3), ct(2), ct(1)]);
    expect(await ids({}, 3)).toEqual([ct(4), ct(3), ct(2), ct(1)]);
  });

  it('finds one by its exact phone or email (the email in any case)', async () => {
    expect(await ids({ phone: '+14155552671' }, 5)).toEqual([ct(1)]);
    expect(await ids({ email: 'Bob@Example.COM' }, 5)).toEqual([ct(2)]);
    expect(await ids({ email: 'nobody@example.com' }, 5)).toEqual([]);
  });

  it('searches name, phone and email ignoring case, % and _ taken as themselves', async () => {
    expect(await ids({ q: 'ann' }, 5)).toEqual([ct(1)]);
    expect(await ids({ q: 'bob' }, 5)).toEqual([ct(2)]);
    expect(await ids({ q: 'EXAMPLE' }, 1)).toEqual([ct(3), ct(2)]);
    expect(await ids({ q: '5552672' }, 5)).toEqual([ct(4)]);
    expect(await ids({ q: '100%' }, 5)).toEqual([ct(2)]);
    expect(await ids({ q: '%' }, 5)).toEqual([ct(2)]);
    expect(await ids({ q: 'l_x' }, 5)).toEqual([ct(3)]);
    expect(await ids({ q: 'l_e' }, 5)).toEqual([]);
  });

  it('reads one contact, only the partner’s own', async () => {
    expect(await getContact(t.ctx, 'p1', ct(1))).toMatchObject({
      id: ct(1),
      partner_id: 'p1',
      name: 'Ann Lee',
      phone: '+14155552671',
      email: null,
      attributes: '{}',
      created_at: 0,
    });
    expect(await getContact(t.ctx, 'p2', ct(1))).toBeUndefined();
  });
});

describe('upserting a contact', () => {
  it('creates one, then updates the one its addresses point at, merging attributes', async () => {
    const a = await upsertContact(t.ctx, 'p1', {
      name: 'Dan',
      phone: '+14155550100',
      attributes: { tier: 'gold', region: 'eu' },
    });
    expect(a.created).toBe(true);
    const b = await upsertContact(t.ctx, 'p1', {
      phone: '+14155550100',
      email: 'Dan@Example.com',
      attributes: { region: null, plan: 2 },
    });
    expect(b).toMatchObject({ created: false, contact: { id: a.contact.id, name: 'Dan', email: 'dan@example.com' } });
    const stored = await getContact(t.ctx, 'p1', a.contact.id);
    expect(stored).toMatchObject({ phone: '+14155550100', email: 'dan@example.com', name: 'Dan' });
    expect(JSON.parse(stored!.attributes)).toEqual({ tier: 'gold', plan: 2 });
    // By its email alone, a name of null clears the name.
    await upsertContact(t.ctx, 'p1', { email: 'dan@example.com', name: null });
    expect((await getContact(t.ctx, 'p1', a.contact.id))?.name).toBeNull();
    // Another partner's same number is another contact.
    expect((await upsertContact(t.ctx, 'p2', { phone: '+14155550100' })).created).toBe(true);
  });

  it('refuses addresses of two different contacts, or attributes too large, changing nothing', async () => {
    await expect(upsertContact(t.ctx, 'p1', { phone: '+14155552671', email: 'bob@example.com' })).rejects.toMatchObject(
      {
        code: 'conflict',
        details: [
          { field: 'phone', message: `belongs to contact ${ct(1)}` },
          { field: 'email', message: `belongs to contact ${ct(2)}` },
        ],
      },
    );
    await expect(
      upsertContact(t.ctx, 'p1', { phone: '+14155552671', attributes: { big: 'x'.repeat(20_000) } }),
    ).rejects.toMatchObject({ code: 'invalid_request', details: [{ field: 'attributes' }] });
    expect(await getContact(t.ctx, 'p1', ct(1))).toMatchObject({ email: null, attributes: '{}' });
  });

  it('of upserts racing for a new address, one creates the contact and the others update it', async () => {
    const raced = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        upsertContact(t.ctx, 'p1', { phone: '+14155550199', attributes: { [`k${i}`]: i } }),
      ),
    );
    expect(raced.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(raced.map((r) => r.contact.id)).size).toBe(1);
    const rows = await listContacts(t.ctx, 'p1', { phone: '+14155550199' }, 10);
    expect(rows).toHaveLength(1);
    expect(Object.keys(JSON.parse(rows[0].attributes)).sort()).toEqual(['k0', 'k1', 'k2', 'k3', 'k4', 'k5']);
  });
});
