import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openCli } from '../../src/cli/context.js';
import type { CoreCtx } from '../../src/core/context.js';
import { pinConnection } from '../../src/db/pin.js';
import * as schema from '../../src/db/schema.js';
import type { Db } from '../../src/db/open.js';
import { store } from '../../src/db/query.js';
import { deadJobs, pendingJobs } from '../../src/tui/data/jobs.js';
import { findMessages, messageWithHistory } from '../../src/tui/data/messages.js';
import { readOverview } from '../../src/tui/data/overview.js';
import { SpendToday, readPartnerDetail, readPartners } from '../../src/tui/data/partners.js';
import { TailState } from '../../src/tui/data/tail-state.js';
import { webhookDetail } from '../../src/tui/data/tail.js';
import { describeEvents } from '../../src/tui/data/webhook-events.js';
import { storeOutboundSms } from '../helpers/server.js';
import { cleanupDirs, newDataDir } from './helpers.js';
import { addGateway } from '../../src/core/gateways.js';
import { assignChannel } from '../../src/core/channels.js';
import { createPartner } from '../../src/core/partners.js';
import { topup } from '../../src/core/ledger.js';

// What the console costs the database msgd writes: every statement its screens run, as SQLite
// plans it. None may read a whole big table (messages, the webhook log, the ledger, jobs) or
// sort one: they must stay cheap with millions of rows, however the operator filters.

afterAll(cleanupDirs);

const BIG = ['messages', 'provider_webhooks', 'ledger_entries', 'jobs', 'message_status_history', 'webhook_attempts'];

describe("the console's reads", () => {
  it('seek through indexes; none walks or sorts a big table', async () => {
    const dir = await newDataDir();
    const setupCli = await openCli({ dataDir: dir });
    const c0 = setupCli.ctx;
    const gw = await addGateway(c0, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    const p = await createPartner(c0, { slug: 'acme', name: 'Acme' }, 'test');
    await topup(c0, p.id, 10_000_000, null, 'test');
    const ch = await assignChannel(c0, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15550001111' }, 'test');
    const m = storeOutboundSms(c0, p.id, { id: ch.id, gateway_id: gw.id, sender: ch.sender });
    await setupCli.close();

    // The console's connection, logging every statement it runs (with its values).
    const seen = new Set<string>();
    const sqlite = pinConnection(new Database(`${dir}/msgd.db`, { verbose: (s) => seen.add(String(s)) }));
    const db: Db = {
      sqlite,
      orm: drizzle({ client: sqlite, schema }) as Db['orm'],
      path: `${dir}/msgd.db`,
      close: () => {},
    };
    const ctx: CoreCtx = { ...c0, db, store: store(db) };
    await readOverview(ctx);
    await readPartners(ctx, new SpendToday(ctx));
    await readPartnerDetail(ctx, 'acme');
    const tail = new TailState(ctx);
    await tail.poll();
    await tail.pollOutbound();
    await tail.poll();
    await tail.pollOutbound();
    for (const q of [
      { id: m.id },
      { partner: 'acme' },
      { partner: 'acme', status: 'failed' },
      { recipient: '+14155550123' },
      { status: 'failed' },
    ])
      await findMessages(ctx, q);
    await messageWithHistory(ctx, m.id);
    await deadJobs(ctx);
    await pendingJobs(ctx);
    sqlite
      .prepare(
        `INSERT INTO provider_webhooks (id, provider, method, path, headers, body, verification, processing, received_at)
       VALUES ('pwh_x', 'sandbox', 'POST', '/api/webhook.php', '{}', '{"object":"msgd_sandbox","events":[]}', 'ok', 'pending', 0)`,
      )
      .run();
    await tail.poll();
    await describeEvents(ctx, (await webhookDetail(ctx, 'pwh_x'))!);

    const bad: string[] = [];
    for (const sql of seen) {
      if (!/^\s*(SELECT|WITH)/i.test(sql)) continue;
      const plan = (sqlite.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail);
      for (const step of plan) {
        const scan = /^SCAN (\w+)(?: AS \w+)?$/.exec(step);
        if (scan && BIG.includes(scan[1])) bad.push(`${step}: ${sql.replace(/\s+/g, ' ').slice(0, 160)}`);
        if (
          /TEMP B-TREE/.test(step) &&
          BIG.some((t) => new RegExp(`\\b${t}\\b`).test(sql)) &&
          !/GROUP BY partner_id|json_each/.test(sql)
        )
          bad.push(`${step}: ${sql.replace(/\s+/g, ' ').slice(0, 160)}`);
      }
    }
    expect(seen.size).toBeGreaterThan(15);
    expect(bad).toEqual([]);
  });
});
