import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropLines, keepPlaces } from '../../src/db/pg/gateway-lines.js';
import { openPg, type PgStore } from '../../src/db/pg/store.js';
import { sql } from '../../src/db/sql.js';
import { SharedGatewayLines } from '../../src/jobs/shared-lines.js';
import { migratedDatabase } from './helpers.js';

// The gateways' lines kept in PostgreSQL (src/jobs/shared-lines.ts), claim by claim: a line that
// fell behind (its places due together, after a stall or a restart) goes in the order its places
// were given, one slot apart, however the claims that find them due are cut.

const db = migratedDatabase();
let store: PgStore;
beforeAll(() => {
  store = openPg(db.url, { logger: { warn: () => {} }, poolSize: 2 });
});
afterAll(async () => {
  await store?.close();
});

const RATE = 5; // one slot every 200 ms
const dbNow = async () =>
  Number(
    (await store.get<{ now: number }>(sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now`))!.now,
  );

/** One claim of `jobIds` (in claim order) on `gatewayId`: each job's turn. */
function claim(lines: SharedGatewayLines, gatewayId: string, jobIds: number[], rate = RATE) {
  return store.transaction(async (tx) =>
    lines.turns(
      tx,
      jobIds.map((jobId) => ({ jobId, gatewayId, rate })),
      await lines.leave(tx, jobIds),
    ),
  );
}

/** The slot a job's place in line holds now. */
async function placeOf(jobId: number): Promise<number> {
  const row = await store.get<{ at: number }>(sql`SELECT at FROM gateway_places WHERE job_id = ${jobId}`);
  if (!row) throw new Error(`job ${jobId} holds no place`);
  return Number(row.at);
}

describe('shared gateway lines', () => {
  it('places found due by a later claim go after those a claim before them pushed back', async () => {
    const lines = new SharedGatewayLines();
    const gatewayId = 'gw_fell_behind';
    // Six places given 200 ms apart, the first five of them already past (msgd came back late).
    const start = (await dbNow()) - 1_000;
    await store.transaction((tx) =>
      keepPlaces(
        tx,
        [1, 2, 3, 4, 5, 6].map((n) => ({
          job_id: 900_000 + n,
          gateway_id: gatewayId,
          line: 0,
          at: start + (n - 1) * 200,
          respaced: 0,
        })),
      ),
    );
    // The first claim finds four of them due: two go, two are pushed back one slot apart.
    const first = await claim(lines, gatewayId, [900_001, 900_002, 900_003, 900_004]);
    expect(first.map((t) => t.go)).toEqual([true, true, false, false]);
    const third = await placeOf(900_003);
    const fourth = await placeOf(900_004);
    expect(fourth - third).toBe(200);
    // The next claim finds the fifth due: it waits one slot behind the fourth, not beside the third.
    const [fifth] = await claim(lines, gatewayId, [900_005]);
    expect(fifth!.go).toBe(false);
    expect(await placeOf(900_005)).toBe(fourth + 200);
    // A pushed-back place claimed again keeps its slot: it does not go behind the fifth.
    await claim(lines, gatewayId, [900_003]);
    const again = await placeOf(900_003).catch(() => null);
    // It goes now (within the inline wait), or waits at its own slot.
    expect([null, third]).toContain(again);
  });

  it('pushes places back to whole ms at a rate whose slot is not (3 a second)', async () => {
    const lines = new SharedGatewayLines();
    const gatewayId = 'gw_thirds';
    // Four places 334 ms apart, all past: the line fell behind.
    const start = (await dbNow()) - 2_000;
    await store.transaction((tx) =>
      keepPlaces(
        tx,
        [1, 2, 3, 4].map((n) => ({
          job_id: 910_000 + n,
          gateway_id: gatewayId,
          line: 0,
          at: start + (n - 1) * 334,
          respaced: 0,
        })),
      ),
    );
    // The first goes; the others take places a third of a second apart, kept in whole ms.
    const turns = await claim(lines, gatewayId, [910_001, 910_002, 910_003, 910_004], 3);
    expect(turns.map((t) => t.go)).toEqual([true, false, false, false]);
    const at = [await placeOf(910_002), await placeOf(910_003), await placeOf(910_004)];
    for (let i = 1; i < at.length; i++) expect([333, 334]).toContain(at[i]! - at[i - 1]!);
  });

  it('drops the line of a removed gateway, not of one made after the list it was given', async () => {
    const now = await dbNow();
    await store.run(sql`DELETE FROM gateway_lines`); // the other tests' lines
    await store.run(
      sql`INSERT INTO gateways (id, kind, name, secrets, created_at, updated_at)
          VALUES ('gw_made_since', 'sandbox', 'made since', '{}', ${now}, ${now})`,
    );
    for (const id of ['gw_made_since', 'gw_removed', 'gw_known'])
      await store.run(
        sql`INSERT INTO gateway_lines (gateway_id, interval_us, active, updated_at) VALUES (${id}, 200000, 1, ${now})`,
      );
    // This instance's book was read before gw_made_since was made (by another instance, which
    // made its line): only gw_removed, in neither the book nor the store, is gone.
    expect(await store.transaction((tx) => dropLines(tx, ['gw_known']))).toEqual(['gw_removed']);
    const left = await store.all<{ gateway_id: string }>(sql`SELECT gateway_id FROM gateway_lines ORDER BY gateway_id`);
    expect(left.map((r) => r.gateway_id)).toEqual(['gw_known', 'gw_made_since']);
  });
});
