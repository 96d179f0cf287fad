import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getSuppression, type ListFilter, listSuppressions, suppressionJson } from '../../src/core/suppressions.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { idAt, partner } from './read-fixtures.js';

// Reading a partner's suppressions (GET /v1/suppressions, the console, msgctl) on both stores:
// newest first paged on id, the filters, and the address search, which ignores ASCII case and
// takes % and _ literally.

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
