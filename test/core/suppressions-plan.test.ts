import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refuseSuppressed, SUPPRESSION_HITS_SQL } from '../../src/core/suppressions.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';
import { setupPartner } from '../helpers/server.js';

// The check before the price is one seek on suppressions_address, however long the list:
// SQLite's plan says so, and 20,000 checks against 200,000 entries take no longer than against none.
// SQLite's own: SQLite's plan, and the synchronous check its send transaction runs on its connection.

let t: TestCtx;
let partnerId: string;

beforeAll(async () => {
  t = openTestCtx();
  partnerId = (await setupPartner(t.ctx, { slug: 'acme' })).partnerId;
});
afterAll(() => t.close());

const channel = { type: 'sms' as const, sender: '+15550001111' };
const content = { kind: 'text' as const, text: 'hi' };

function checks(n: number): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++)
    refuseSuppressed(t.ctx, partnerId, channel, `+1415555${String(i % 10_000).padStart(4, '0')}`, content);
  return performance.now() - t0;
}

describe('the suppression check', () => {
  it('is one search on the unique index', () => {
    const plan = t.ctx.db.sqlite.prepare(`EXPLAIN QUERY PLAN ${SUPPRESSION_HITS_SQL}`).all('p', 'sms', '+1', '+2') as {
      detail: string;
    }[];
    expect(plan.map((r) => r.detail)).toEqual([
      expect.stringMatching(
        /^SEARCH suppressions USING INDEX suppressions_address \(partner_id=\? AND channel=\? AND address=\?\)$/,
      ),
    ]);
  });

  it('costs the same with 200,000 entries as with none', () => {
    checks(2000); // warm the statement cache and the pages
    const empty = Math.min(checks(20_000), checks(20_000));
    const ins = t.ctx.db.sqlite.prepare(
      `INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, group_id, source, created_at)
       VALUES (?, ?, 'sms', ?, '', 'manual', '', 'test', 0)`,
    );
    t.ctx.db.sqlite.transaction(() => {
      for (let i = 0; i < 200_000; i++)
        ins.run(`sup_${String(i).padStart(26, '0')}`, partnerId, `+1646${String(i).padStart(7, '0')}`);
    })();
    checks(2000);
    const full = Math.min(checks(20_000), checks(20_000));
    // Generous: a shared test machine is noisy; a scan of 200,000 rows would be ~1000x slower.
    expect(full).toBeLessThan(empty * 3 + 50);
  });
});
