// Inbound provider webhooks: how many signed Meta status webhooks msgd accepts per second
// (signature check over the raw body + group-committed store and enqueue + 200), and how fast
// the job loop then turns them into status changes (stored -> processed).
//
// msgd runs in this process from dist/ (build first); the load generator runs in a worker
// thread (an undici Pool, 50 keep-alive connections, for a fixed duration) so it takes the
// other core instead of the server's event loop. Usage: node bench/webhooks-in.mjs [seconds]

import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const PHONE_ID = '106540352242922';
const SECRET = 'bench_app_secret';
const MESSAGES = 60_000;
const CONNECTIONS = 50;
const STATUSES = ['delivered', 'read', 'sent'];
const DIST = new URL('../dist/', import.meta.url);

function statusBody(k) {
  const i = k % MESSAGES;
  const status = STATUSES[Math.floor(k / MESSAGES) % STATUSES.length];
  const ts = String(Math.floor(Date.now() / 1000));
  return `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"${PHONE_ID}"},"statuses":[{"id":"wamid.BENCH${i}","status":"${status}","timestamp":"${ts}","recipient_id":"16505551234","conversation":{"id":"a75d17ad06104c51166f948319b03c6a","origin":{"type":"service"}},"pricing":{"billable":true,"pricing_model":"PMP","type":"regular","category":"utility"}}]},"field":"messages"}]}]}`;
}

async function loadGenerator({ url, seconds }) {
  const { Pool } = await import('undici');
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 30_000 });
  const path = `${u.pathname}${u.search}`;
  let k = 0;
  let ok = 0;
  let failed = 0;
  const latencies = [];
  const end = Date.now() + seconds * 1000;
  async function lane() {
    while (Date.now() < end) {
      const body = statusBody(k++);
      const sig = createHmac('sha256', SECRET).update(body).digest('hex');
      const t0 = performance.now();
      const res = await pool.request({
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${sig}` },
        body,
      });
      await res.body.dump();
      if (res.statusCode === 200) ok++;
      else failed++;
      if ((ok & 63) === 0) latencies.push(performance.now() - t0);
    }
  }
  const started = Date.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, lane));
  const elapsed = (Date.now() - started) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { ok, failed, elapsed, p50: p(0.5), p99: p(0.99) };
}

function seed(rt, partnerId, channelId, gatewayId) {
  const db = rt.ctx.db.sqlite;
  const now = Date.now();
  const ins = db.prepare(`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
    provider_message_id, price, segments, dispatch_uncertain, refunded, sent_at, created_at, updated_at)
    VALUES (?, ?, 'outbound', 'whatsapp', ?, ?, '+16505551234', '+15550783881', '{"kind":"text","text":"bench"}', 'sent', ?, 0, 1, 0, 0, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < MESSAGES; i++) ins.run(`msg_bench${String(i).padStart(8, '0')}`, partnerId, channelId, gatewayId, `wamid.BENCH${i}`, now, now, now);
  })();
}

export async function run({ print = console.log, seconds = 5 } = {}) {
  const { loadConfig } = await import(new URL('config/load.js', DIST).href);
  const { startServer } = await import(new URL('server.js', DIST).href);
  const { createPartner } = await import(new URL('core/partners.js', DIST).href);
  const { addGateway } = await import(new URL('core/gateways.js', DIST).href);
  const { assignChannel } = await import(new URL('core/channels.js', DIST).href);

  const dataDir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'msgd-bench-webhooks-'));
  const config = loadConfig({ env: {}, dataDir, overrides: { 'server.port': 0, 'demo.enabled': false, 'log.level': 'warn' } });
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const server = await startServer({ config, env: {}, print: () => {}, logDestination: sink });
  try {
    const rt = server.rt;
    const partner = createPartner(rt.ctx, { slug: 'bench', name: 'bench' }, 'bench');
    const gw = addGateway(rt.ctx, { kind: 'whatsapp_cloud', name: 'wa-bench', settings: { phone_number_id: PHONE_ID }, secrets: { access_token: 't', app_secret: SECRET } }, 'bench');
    const ch = assignChannel(rt.ctx, { partner: partner.id, gateway: gw.id, type: 'whatsapp', sender: '+15550783881' }, 'bench');
    seed(rt, partner.id, ch.id, gw.id);

    const url = `${server.url}/api/webhook.php?gateway=${gw.id}`;
    const db = rt.ctx.db.sqlite;
    const count = (where) => db.prepare(`SELECT COUNT(*) AS n FROM provider_webhooks ${where}`).get().n;
    if (process.env.BENCH_PAUSE_WORKER) await rt.worker.stop();
    const t0 = Date.now();
    const load = await new Promise((resolve, reject) => {
      const w = new Worker(fileURLToPath(import.meta.url), { workerData: { url, seconds } });
      w.once('message', resolve);
      w.once('error', reject);
    });
    const stored = count('');
    const doneAtEnd = count(`WHERE processing != 'pending'`);
    if (process.env.BENCH_PAUSE_WORKER) rt.worker.start();
    // Then let the job loop finish what the burst left behind.
    const deadline = Date.now() + 120_000;
    while (count(`WHERE processing = 'pending'`) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const t1 = Date.now();
    const outcomes = db.prepare('SELECT processing, COUNT(*) AS n FROM provider_webhooks GROUP BY processing').all();
    const accepted = load.ok / load.elapsed;
    const processed = stored - count(`WHERE processing = 'pending'`);
    print(`webhooks-in: ${CONNECTIONS} connections, ${load.elapsed.toFixed(1)} s of signed WhatsApp status webhooks`);
    print(`  accepted            ${Math.round(accepted).toLocaleString('en-US')}/s (target >= 15,000/s)  p50 ${load.p50.toFixed(2)} ms  p99 ${load.p99.toFixed(2)} ms  non-200: ${load.failed}`);
    print(`  processed           ${Math.round(processed / ((t1 - t0) / 1000)).toLocaleString('en-US')}/s end to end (${processed.toLocaleString('en-US')} stored -> processed in ${((t1 - t0) / 1000).toFixed(1)} s; ${doneAtEnd.toLocaleString('en-US')} done when the load stopped)`);
    print(`  outcomes            ${outcomes.map((o) => `${o.processing} ${o.n}`).join(', ')}`);
    print(`  group commits       ${rt.committer.batches.toLocaleString('en-US')} batches for ${rt.committer.items.toLocaleString('en-US')} stores`);
    return { acceptedPerSecond: accepted, processedPerSecond: processed / ((t1 - t0) / 1000), p99Ms: load.p99 };
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (!isMainThread) {
  parentPort.postMessage(await loadGenerator(workerData));
} else if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run({ seconds: Number(process.argv[2] ?? 5) });
}
