import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getContact, listContacts } from '../../src/core/contact-book.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { allPages, contact, idAt, partner } from './read-fixtures.js';

// The partner's contacts (GET /v1/contacts) on both stores: newest first across pages, the
// exact-address filters, and the search, which ignores ASCII case and takes % and _ literally.

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
