import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoreCtx } from '../../src/core/context.js';
import { type HeartbeatRow, storeNow, writeHeartbeat } from '../../src/core/counter-store.js';
import { sql } from '../../src/db/sql.js';
import { type CliStore, cliStore, cliStoreKind, runCli, runJson } from '../helpers/cli.js';

// msgctl instances against a real store: the instances' heartbeat rows as a table and as
// --json, the leader and the dead marked. (Several rows on one SQLite file do not happen in
// service, where one process holds the data directory; the rows are what PostgreSQL's instances write.)

let s: CliStore;
/** The store's clock when the scene was set (on PostgreSQL the database server's, as msgd's beats). */
let now: number;
/**
 * How far a time msgctl shows may be from the one stored: none on SQLite; on PostgreSQL msgctl
 * shifts the database's times onto its own clock by a difference read in one statement, which
 * the statement's own round trip blurs by a few ms.
 */
const slackMs = cliStoreKind === 'postgres' ? 250 : 0;
const expectTime = (iso: string, ms: number) =>
  expect(Math.abs(Date.parse(iso) - ms), `${iso} vs ${new Date(ms).toISOString()}`).toBeLessThanOrEqual(slackMs);

beforeAll(async () => {
  s = await cliStore();
  await s.withCtx(async (ctx) => {
    now = await storeNow(ctx);
    await beats(ctx);
  });
});
afterAll(() => s.drop());

/** A beat as msgd writes it, then at the scene's time (on PostgreSQL a beat takes the database's clock). */
async function beat(ctx: CoreCtx, hb: HeartbeatRow) {
  await writeHeartbeat(ctx, hb);
  await ctx.store.run(sql`UPDATE heartbeat SET beat_at = ${hb.beatAt} WHERE id = ${hb.id}`);
}

async function beats(ctx: CoreCtx) {
  const row = { version: '1.2.3', pid: 4100, gauges: {}, running: true };
  await beat(ctx, {
    ...row,
    id: 'ins_lead',
    host: 'web-1',
    startedAt: now - 3_600_000,
    beatAt: now,
    leader: true,
    counters: { sent: 120, failed: 2, retried: 1, webhooks_in: 30, deliveries_ok: 40, deliveries_failed: 1 },
  });
  await beat(ctx, {
    ...row,
    id: 'ins_gone',
    host: 'web-2',
    pid: 4200,
    startedAt: now - 7_200_000,
    beatAt: now - 65_000,
    counters: { sent: 7 },
  });
  await beat(ctx, {
    ...row,
    id: 'ins_done',
    host: 'web-3',
    pid: 4300,
    startedAt: now - 9_000_000,
    beatAt: now - 600_000,
    running: false,
  });
}

describe('msgctl instances', () => {
  it('lists each instance with its state, the leader and the dead marked, and a summary', async () => {
    const r = await runCli(['instances'], s.opts());
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^ID\s+HOST\s+PID\s+VERSION\s+STATE\s+STARTED \(UTC\)\s+LAST BEAT\s+SENT\s+FAILED\s+WEBHOOKS IN\s+DELIVERIES$/,
    );
    // Oldest start first.
    expect(lines[1]).toMatch(/^ins_done\s+web-3\s+4300\s+1\.2\.3\s+stopped\s+/);
    expect(lines[2]).toMatch(
      /^ins_gone\s+web-2\s+4200\s+1\.2\.3\s+dead \(no beat for 1m \d+s\)\s+.*1m \d+s ago\s+7\s+0\s+0\s+0$/,
    );
    expect(lines[3]).toMatch(
      /^ins_lead\s+web-1\s+4100\s+1\.2\.3\s+running, leader\s+.*\s+\d+s ago\s+120\s+2\s+30\s+41$/,
    );
    expect(lines.at(-1)).toBe(
      '1 instance running, 1 dead. Counters are since each instance started; an instance is dead after 10 s without a beat.',
    );
  });

  it('--json gives every field in snake_case with ISO times', async () => {
    const j = await runJson(['instances'], s.opts());
    expect(j).toMatchObject({ alive: 1, dead: 1 });
    expect(j.data.map((i: { id: string }) => i.id)).toEqual(['ins_done', 'ins_gone', 'ins_lead']);
    const lead = j.data[2];
    expect(lead).toMatchObject({
      id: 'ins_lead',
      host: 'web-1',
      pid: 4100,
      version: '1.2.3',
      state: 'running',
      leader: true,
      dead_at: null,
      counters: { sent: 120, failed: 2, webhooks_in: 30 },
    });
    expectTime(lead.started_at, now - 3_600_000);
    expectTime(lead.last_beat_at, now);
    expect(lead.beat_age_ms).toBeGreaterThanOrEqual(0);
    expect(j.data[1]).toMatchObject({ id: 'ins_gone', state: 'dead', leader: false });
    expect(j.data[0]).toMatchObject({ id: 'ins_done', state: 'stopped' });
  });

  it('says so when no msgd has run on the store', async () => {
    const empty = await cliStore();
    try {
      const r = await runCli(['instances'], empty.opts());
      expect(r.stdout.trim()).toBe('No msgd has run on this store yet (or its last one stopped over a day ago).');
      expect(await runJson(['instances'], empty.opts())).toEqual({ data: [], alive: 0, dead: 0 });
    } finally {
      await empty.drop();
    }
  });
});
