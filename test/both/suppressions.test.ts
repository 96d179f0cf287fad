import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import {
  createSuppression,
  getSuppression,
  type ListFilter,
  listSuppressions,
  readOptOutScope,
  removeSuppression,
  setOptOutScope,
  suppressionJson,
} from '../../src/core/suppressions.js';
import { sql } from '../../src/db/sql.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { idAt, partner } from './read-fixtures.js';

// Reading a partner's suppressions (GET /v1/suppressions, the console, msgctl) on both stores:
// newest first paged on id, the filters, and the address search, which ignores ASCII case and
// takes % and _ literally. Adding and removing one (the partner's API, the console, msgctl):
// normalized addresses, refusals that change nothing, the event and audit entry each writes.

const T0 = Date.UTC(2026, 0, 1);
const sp = (n: number) => idAt('sup', T0 + n * 1000);

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
  await partner(t, 'p1');
  await partner(t, 'p2');
  const row = (n: number, p: string, channel: string, address: string, reason: string, scope = '') =>
    `('${sp(n)}', '${p}', '${channel}', '${address}', '${scope}', '${reason}', 'api', ${T0 + n * 1000})`;
  await t.exec(`INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, source, created_at) VALUES
    ${row(1, 'p1', 'sms', '+14155552671', 'opt_out_keyword', '+15550000001')},
    ${row(2, 'p1', 'email', 'ann_lee@example.com', 'hard_bounce')},
    ${row(3, 'p1', 'email', 'annxlee@example.com', 'manual')},
    ${row(4, 'p1', 'sms', '+14155552672', 'manual')},
    ${row(5, 'p2', 'sms', '+14155552671', 'manual')}`);
});
afterEach(() => t.close());

async function ids(f: Omit<ListFilter, 'limit' | 'before'>, limit: number) {
  const out: string[] = [];
  let before: string | undefined;
  for (;;) {
    const page = await listSuppressions(t.ctx, 'p1', { ...f, limit: limit + 1, before });
    out.push(...page.slice(0, limit).map((s) => s.id));
    if (page.length <= limit) return out;
    before = page[limit - 1].id;
  }
}

describe('suppressions', () => {
  it('pages the partner’s suppressions newest first, filtered by channel, reason and address', async () => {
    expect(await ids({}, 1)).toEqual([sp(4), sp(3), sp(2), sp(1)]);
    expect(await ids({ channel: 'sms' }, 1)).toEqual([sp(4), sp(1)]);
    expect(await ids({ reason: 'manual' }, 5)).toEqual([sp(4), sp(3)]);
    expect(await ids({ channel: 'email', reason: 'hard_bounce' }, 5)).toEqual([sp(2)]);
    expect(await ids({ address: '+14155552671' }, 5)).toEqual([sp(1)]);
    expect(await ids({ address: '' }, 5)).toEqual([sp(4), sp(3), sp(2), sp(1)]);
  });

  it('searches addresses ignoring case, % and _ taken as themselves', async () => {
    expect(await ids({ address: 'ANN', search: true }, 1)).toEqual([sp(3), sp(2)]);
    expect(await ids({ address: 'n_l', search: true }, 5)).toEqual([sp(2)]);
    expect(await ids({ address: '%', search: true }, 5)).toEqual([]);
    expect(await ids({ address: '555267', search: true }, 5)).toEqual([sp(4), sp(1)]);
  });

  it('reads one suppression, only the partner’s own', async () => {
    const s = await getSuppression(t.ctx, 'p1', sp(1));
    expect(suppressionJson(s!)).toEqual({
      id: sp(1),
      channel: 'sms',
      address: '+14155552671',
      reason: 'opt_out_keyword',
      sender: '+15550000001',
      group_id: null,
      source: 'api',
      detail: null,
      created_at: new Date(T0 + 1000).toISOString(),
    });
    expect(await getSuppression(t.ctx, 'p2', sp(1))).toBeUndefined();
  });
});

describe('adding and removing suppressions', () => {
  beforeEach(async () => {
    await t.exec(`INSERT INTO gateways (id, kind, name, secrets, status, created_at, updated_at)
      VALUES ('gw_1', 'sandbox', 'one', '', 'active', 0, 0)`);
    await t.exec(`INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, position, created_at, updated_at)
      VALUES ('ch_1', 'p1', 'gw_1', 'sms', '+15550000001', 'active', 0, 0, 0)`);
    // An endpoint taking every event: the events are stored for the fan-out.
    await t.exec(`INSERT INTO webhook_endpoints (id, partner_id, url, secret, events, status, created_at, updated_at)
      VALUES ('we_1', 'p1', 'https://example.com/hook', 'sealed', NULL, 'enabled', 0, 0)`);
  });

  const events = () =>
    t.ctx.store.all<{ type: string; payload: string; fanned_out: number }>(
      sql`SELECT type, payload, fanned_out FROM events WHERE partner_id = ${'p1'} ORDER BY created_at, id`,
    );

  it('adds a normalized address once, with one event and one audit entry', async () => {
    const a = await createSuppression(
      t.ctx,
      'p1',
      { channel: 'email', address: ' Bob@Example.COM ', detail: ' asked by phone ' },
      'user:u1',
    );
    expect(a.created).toBe(true);
    expect(suppressionJson(a.row)).toMatchObject({
      channel: 'email',
      address: 'bob@example.com',
      reason: 'manual',
      sender: null,
      source: 'user:u1',
      detail: 'asked by phone',
    });
    const again = await createSuppression(t.ctx, 'p1', { channel: 'email', address: 'bob@example.com' }, 'op');
    expect(again).toEqual({ row: a.row, created: false });
    const ev = await events();
    expect(ev.map((e) => e.type)).toEqual(['suppression.created']);
    expect(ev[0].fanned_out).toBe(0);
    expect(JSON.parse(ev[0].payload)).toMatchObject({ event: 'suppression.created', suppression: { id: a.row.id } });
    const audit = (await listAudit(t.ctx)).filter((e) => e.action === 'suppression.add');
    expect(audit).toEqual([
      expect.objectContaining({
        actor: 'user:u1',
        target_id: a.row.id,
        details: { partner_id: 'p1', channel: 'email', address: 'bob@example.com', reason: 'manual' },
      }),
    ]);
  });

  it('adds one for a sender of the partner’s own, and refuses another’s or a bad address, changing nothing', async () => {
    const own = await createSuppression(
      t.ctx,
      'p1',
      { channel: 'sms', address: ' +14155552699 ', sender: '+15550000001', reason: 'unsubscribe' },
      'op',
    );
    expect(suppressionJson(own.row)).toMatchObject({ address: '+14155552699', sender: '+15550000001' });
    const before = await listSuppressions(t.ctx, 'p1', { limit: 100 });
    await expect(
      createSuppression(t.ctx, 'p1', { channel: 'sms', address: '+14155550101', sender: '+15559999999' }, 'op'),
    ).rejects.toMatchObject({ code: 'invalid_request', details: [{ field: 'sender' }] });
    await expect(
      createSuppression(t.ctx, 'p2', { channel: 'sms', address: '+14155550101', sender: '+15550000001' }, 'op'),
    ).rejects.toMatchObject({ code: 'invalid_request', details: [{ field: 'sender' }] });
    await expect(
      createSuppression(t.ctx, 'p1', { channel: 'sms', address: 'not a number' }, 'op'),
    ).rejects.toMatchObject({ code: 'invalid_request', details: [{ field: 'address' }] });
    expect(await listSuppressions(t.ctx, 'p1', { limit: 100 })).toEqual(before);
    expect(await listSuppressions(t.ctx, 'p2', { limit: 100 })).toHaveLength(1);
  });

  it('removes one once; a customer’s keyword opt-out only with their consent; another partner’s is not found', async () => {
    const manual = await removeSuppression(t.ctx, 'p1', sp(4), { actor: 'op' });
    expect(manual.id).toBe(sp(4));
    expect(await getSuppression(t.ctx, 'p1', sp(4))).toBeUndefined();
    await expect(removeSuppression(t.ctx, 'p1', sp(4), { actor: 'op' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(removeSuppression(t.ctx, 'p1', sp(5), { actor: 'op' })).rejects.toMatchObject({ code: 'not_found' });
    expect(await getSuppression(t.ctx, 'p2', sp(5))).toBeDefined();

    await expect(removeSuppression(t.ctx, 'p1', sp(1), { actor: 'op' })).rejects.toMatchObject({
      code: 'consent_required',
      details: [{ field: 'consent_confirmed' }],
    });
    expect(await getSuppression(t.ctx, 'p1', sp(1))).toBeDefined();
    await removeSuppression(t.ctx, 'p1', sp(1), { actor: 'user:u1', consentConfirmed: true });
    expect(await getSuppression(t.ctx, 'p1', sp(1))).toBeUndefined();

    const ev = (await events()).map((e) => JSON.parse(e.payload));
    expect(ev.map((e) => [e.event, e.suppression.id, e.deleted_by, e.consent_confirmed_by])).toEqual([
      ['suppression.deleted', sp(4), 'op', undefined],
      ['suppression.deleted', sp(1), 'user:u1', 'user:u1'],
    ]);
    const audit = (await listAudit(t.ctx)).filter((e) => e.action === 'suppression.remove');
    expect(audit.map((e) => [e.target_id, e.details.consent_confirmed])).toEqual([
      [sp(1), true],
      [sp(4), undefined],
    ]);
  });

  it('of removals racing, one removes it, the others are told it is gone: one event, one audit entry', async () => {
    const raced = await Promise.allSettled(
      Array.from({ length: 5 }, () => removeSuppression(t.ctx, 'p1', sp(3), { actor: 'op' })),
    );
    expect(raced.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of raced.filter((x) => x.status === 'rejected')) expect(r.reason).toMatchObject({ code: 'not_found' });
    expect((await events()).map((e) => e.type)).toEqual(['suppression.deleted']);
    expect((await listAudit(t.ctx)).filter((e) => e.action === 'suppression.remove')).toHaveLength(1);
  });

  it('sets the partner’s opt-out scope, refusing an unknown scope or partner', async () => {
    expect(await readOptOutScope(t.ctx, 'p1')).toBe('sender');
    await setOptOutScope(t.ctx, 'p1', 'partner', 'op');
    expect(await readOptOutScope(t.ctx, 'p1')).toBe('partner');
    expect(await readOptOutScope(t.ctx, 'p2')).toBe('sender');
    await expect(setOptOutScope(t.ctx, 'p1', 'everyone' as 'partner', 'op')).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(setOptOutScope(t.ctx, 'p9', 'partner', 'op')).rejects.toMatchObject({ code: 'not_found' });
    expect(await readOptOutScope(t.ctx, 'p1')).toBe('partner');
    const audit = (await listAudit(t.ctx)).filter((e) => e.action === 'partner.opt_out_scope');
    expect(audit).toEqual([expect.objectContaining({ target_id: 'p1', details: { scope: 'partner' } })]);
  });
});
