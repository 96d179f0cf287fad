// Inbound provider webhooks: how many signed Meta status webhooks msgd accepts per second
// (signature check over the raw body + group-committed store and enqueue + 200), and how fast
// the job loop turns them into status changes (stored -> processed).
//
// msgd runs in this process from dist/ (build first); the load generator runs in a worker
// thread (an undici Pool, 50 keep-alive connections, for a fixed duration) so it gets the
// other core instead of the server's event loop. Three phases:
//   1. intake alone (processing paused): the accept rate the target is about;
//   2. processing the backlog phase 1 stored: the end-to-end processing rate;
//   3. both at once, as in production.
// A bare Fastify endpoint under the same generator is printed as the machine's ceiling, since
// the numbers move with whatever else runs on the box.
//
// On PostgreSQL (BENCH_STORE=postgres, bench/pg.mjs) msgd runs on a fresh database of the bench's
// server; phases 2 and 3 need msgd to process provider webhooks there, and say so when it does not
// yet (its SQLITE_ONLY_PARTS), leaving the intake figure.
//
// Usage: node bench/webhooks-in.mjs [seconds per phase]   (or import { run })

import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { scenarioStore } from './store.mjs';

export const stores = ['sqlite', 'postgres'];

const PHONE_ID = '106540352242922';
const SECRET = 'bench_app_secret';
const MESSAGES = 100_000;
const CONNECTIONS = 50;
const STATUSES = ['delivered', 'read', 'sent'];
const DIST = new URL('../dist/', import.meta.url);

function statusBody(k) {
  const i = k % MESSAGES;
  const status = STATUSES[Math.floor(k / MESSAGES) % STATUSES.length];
  const ts = String(Math.floor(Date.now() / 1000));
  return `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"${PHONE_ID}"},"statuses":[{"id":"wamid.BENCH${i}","status":"${status}","timestamp":"${ts}","recipient_id":"16505551234","conversation":{"id":"a75d17ad06104c51166f948319b03c6a","origin":{"type":"service"}},"pricing":{"billable":true,"pricing_model":"PMP","type":"regular","category":"utility"}}]},"field":"messages"}]}]}`;
}

/** Runs in the worker thread. `from` offsets the status sequence so phases do not repeat events. */
async function loadGenerator({ url, seconds, from, plain }) {
  const { Pool } = await import('undici');
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 30_000 });
  const path = `${u.pathname}${u.search}`;
  let k = from;
  let ok = 0;
  let failed = 0;
  const latencies = [];
  const end = Date.now() + seconds * 1000;
  async function lane() {
    while (Date.now() < end) {
      const body = statusBody(k++);
      const headers = { 'content-type': 'application/json' };
      if (!plain) headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
      const t0 = performance.now();
      const res = await pool.request({ method: 'POST', path, headers, body });
      await res.body.dump();
      if (res.statusCode === 200) ok++;
      else failed++;
      if (((ok + failed) & 31) === 0) latencies.push(performance.now() - t0);
    }
  }
  const started = Date.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, lane));
  const elapsed = (Date.now() - started) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const q = (x) => latencies[Math.min(latencies.length - 1, Math.floor(x * latencies.length))] ?? 0;
  return { ok, failed, elapsed, sent: k - from, p50: q(0.5), p99: q(0.99) };
}

function fire(url, seconds, from, plain = false) {
  return new Promise((resolve, reject) => {
    const w = new Worker(fileURLToPath(import.meta.url), { workerData: { url, seconds, from, plain } });
    w.once('message', resolve);
    w.once('error', reject);
  });
}

async function ceiling(seconds) {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  app.post('/x', async () => ({ received: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const r = await fire(`http://127.0.0.1:${app.server.address().port}/x`, seconds, 0, true);
    return r.ok / r.elapsed;
  } finally {
    await app.close();
  }
}

/** The messages the status webhooks are about, sent ones with their provider ids. */
async function seed(store, partnerId, channelId, gatewayId) {
  const now = Date.now();
  if (store.pg) {
    await store.pg.query(
      `INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
         provider_message_id, price, segments, dispatch_uncertain, refunded, sent_at, created_at, updated_at)
       SELECT 'msg_bench' || lpad(i::text, 8, '0'), $1, 'outbound', 'whatsapp', $2, $3, '+16505551234', '+15550783881',
         '{"kind":"text","text":"bench"}', 'sent', 'wamid.BENCH' || i, 0, 1, 0, 0, $4, $4, $4
       FROM generate_series(0, $5 - 1) AS i`,
      [partnerId, channelId, gatewayId, now, MESSAGES],
    );
    await store.pg.query('ANALYZE messages');
    return;
  }
  const db = store.sqlite;
  const ins =
    db.prepare(`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
    provider_message_id, price, segments, dispatch_uncertain, refunded, sent_at, created_at, updated_at)
    VALUES (?, ?, 'outbound', 'whatsapp', ?, ?, '+16505551234', '+15550783881', '{"kind":"text","text":"bench"}', 'sent', ?, 0, 1, 0, 0, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < MESSAGES; i++)
      ins.run(
        `msg_bench${String(i).padStart(8, '0')}`,
        partnerId,
        channelId,
        gatewayId,
        `wamid.BENCH${i}`,
        now,
        now,
        now,
      );
  })();
}

const fmt = (n) => Math.round(n).toLocaleString('en-US');

export async function run({ print = console.log, seconds = 5, pg = null } = {}) {
  const { loadConfig } = await import(new URL('config/load.js', DIST).href);
  const { startServer } = await import(new URL('server.js', DIST).href);
  const { createPartner } = await import(new URL('core/partners.js', DIST).href);
  const { addGateway } = await import(new URL('core/gateways.js', DIST).href);
  const { assignChannel } = await import(new URL('core/channels.js', DIST).href);

  const scen = pg ? await scenarioStore(pg, 'webhooks_in') : null;
  const dataDir = scen?.dir ?? mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'msgd-bench-webhooks-'));
  const config = loadConfig({
    env: {},
    dataDir,
    databaseUrl: scen?.url ?? undefined,
    overrides: { 'server.port': 0, 'demo.enabled': false, 'log.level': 'warn' },
  });
  const server = await startServer({
    config,
    env: scen?.msgdEnv ?? {},
    print: () => {},
    logDestination: new Writable({ write: (_c, _e, cb) => cb() }),
  });
  const hold = setInterval(() => {}, 1000);
  let client = null;
  try {
    const { rt } = server;
    const store = {};
    if (scen) {
      const { default: pgLib } = await import('pg');
      client = new pgLib.Client({ connectionString: scen.url, application_name: 'msgd-bench' });
      client.on('error', () => {});
      await client.connect();
      store.pg = client;
    } else store.sqlite = rt.ctx.db.sqlite;
    /** Rows of a query on either store (the counts as numbers). */
    const rows = async (sql) => {
      const all = store.pg ? (await store.pg.query(sql)).rows : store.sqlite.prepare(sql).all();
      return all.map((r) => ({ ...r, n: Number(r.n) }));
    };
    const partner = await createPartner(rt.ctx, { slug: 'bench', name: 'bench' }, 'bench');
    const gw = await addGateway(
      rt.ctx,
      {
        kind: 'whatsapp_cloud',
        name: 'wa-bench',
        settings: { phone_number_id: PHONE_ID },
        secrets: { access_token: 't', app_secret: SECRET },
      },
      'bench',
    );
    const ch = await assignChannel(
      rt.ctx,
      { partner: partner.id, gateway: gw.id, type: 'whatsapp', sender: '+15550783881' },
      'bench',
    );
    await seed(store, partner.id, ch.id, gw.id);
    const url = `${server.url}/api/webhook.php`;
    const pending = async () =>
      (await rows(`SELECT COUNT(*) AS n FROM provider_webhooks WHERE processing = 'pending'`))[0].n;
    const drain = async () => {
      const deadline = Date.now() + 300_000;
      while ((await pending()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    };

    const roof = await ceiling(Math.min(seconds, 3));
    print(
      `webhooks-in: signed WhatsApp status webhooks, ${CONNECTIONS} connections, ${seconds} s per phase (machine ceiling: bare Fastify ${fmt(roof)}/s)`,
    );

    // 1. Intake alone.
    await rt.worker.stop();
    const commitsBefore = rt.webhookIntake.stats.batches;
    const intake = await fire(url, seconds, 0);
    const commits = rt.webhookIntake.stats.batches - commitsBefore;
    const backlog = await pending();
    const accepted = intake.ok / intake.elapsed;
    print(
      `  accepted            ${fmt(accepted)}/s (target >= 15,000/s: ${accepted >= 15_000 ? 'PASS' : 'MISS'}, ${Math.round((100 * accepted) / roof)}% of the ceiling)  p50 ${intake.p50.toFixed(2)} ms  p99 ${intake.p99.toFixed(2)} ms  non-200 ${intake.failed}`,
    );
    print(
      `  group commit        ${fmt(intake.ok)} webhooks stored in ${fmt(commits)} commits (${(intake.ok / Math.max(1, commits)).toFixed(1)} a commit, one fsync each)`,
    );

    if (rt.sqliteOnly.includes('webhooksIn')) {
      const { SQLITE_ONLY_PARTS } = await import(new URL('runtime.js', DIST).href);
      print(
        `  processed, mixed    skipped on PostgreSQL: msgd does not run ${SQLITE_ONLY_PARTS.webhooksIn} there yet (${fmt(backlog)} stored webhooks left pending)`,
      );
      return { ceilingPerSecond: roof, acceptedPerSecond: accepted };
    }

    // 2. The job loop works the backlog off.
    const t0 = Date.now();
    rt.worker.start();
    await drain();
    const drained = backlog / ((Date.now() - t0) / 1000);
    print(
      `  processed           ${fmt(drained)}/s end to end (${fmt(backlog)} stored webhooks -> statuses applied in ${((Date.now() - t0) / 1000).toFixed(1)} s)`,
    );

    // 3. Both at once.
    const t1 = Date.now();
    const before = (await rows(`SELECT COUNT(*) AS n FROM provider_webhooks`))[0].n;
    const mixed = await fire(url, seconds, intake.sent);
    await drain();
    const total = (await rows(`SELECT COUNT(*) AS n FROM provider_webhooks`))[0].n - before;
    print(
      `  mixed               ${fmt(mixed.ok / mixed.elapsed)}/s accepted while processing, p99 ${mixed.p99.toFixed(2)} ms; all ${fmt(total)} processed at ${fmt(total / ((Date.now() - t1) / 1000))}/s`,
    );
    const outcomes = await rows('SELECT processing, COUNT(*) AS n FROM provider_webhooks GROUP BY processing');
    print(`  outcomes            ${outcomes.map((o) => `${o.processing} ${fmt(o.n)}`).join(', ')}`);
    return {
      ceilingPerSecond: roof,
      acceptedPerSecond: accepted,
      processedPerSecond: drained,
      mixedAcceptedPerSecond: mixed.ok / mixed.elapsed,
    };
  } finally {
    await client?.end().catch(() => {});
    await server.close();
    clearInterval(hold);
    if (scen) await scen.close();
    else rmSync(dataDir, { recursive: true, force: true });
  }
}

if (!isMainThread) {
  parentPort.postMessage(await loadGenerator(workerData));
} else if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run({ seconds: Number(process.argv[2] ?? 5) });
}
