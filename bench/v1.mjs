// Resource API and outbound webhook benchmarks:
//  1. GET /v1/conversations with 1,000,000 conversations stored: p50/p99 at 10, 50 and 1
//     connections for the first page, a filtered page, pages deep in the list and a sync page
//     (target p99 <= 10 ms).
//  2. Outbound deliveries per second to a local HTTPS receiver (target >= 5,000/s).
// msgd runs as a child (bin/msgd), so client and server share the 2 cores as in DESIGN.md.
// On PostgreSQL (BENCH_STORE=postgres) the conversations are seeded into a fresh database of the
// bench's server; the deliveries half writes its events into SQLite only and says so there.
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { child, fmt, freePort, load, MSGD_NODE_FLAGS, peakRssMb, rateUntil, stop, tmp, verdict } from './lib.mjs';
import { selfSignedCert } from './self-signed-cert.mjs';
import { pgRows, scenarioStore } from './store.mjs';

export const stores = ['sqlite', 'postgres'];

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** A ULID-shaped id for a past time (src/lib/ids.ts layout), so ids sort by creation. */
export function idAt(prefix, ms) {
  let t = ms;
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const r = randomBytes(16);
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[r[i] & 31];
  return `${prefix}_${time}${rand}`;
}

export async function openCtx(dataDir, overrides = {}) {
  const { openDataDir } = await dist('db/datadir.js');
  const { loadConfig } = await dist('config/load.js');
  const { gatewayKinds } = await dist('providers/kinds.js');
  const config = loadConfig({ env: {}, dataDir, overrides });
  const { store } = await dist('db/query.js');
  const dd = openDataDir(dataDir, { create: true, env: {} });
  return { dd, ctx: { db: dd.db, store: store(dd.db), masterKey: dd.masterKey, config, now: Date.now, gatewayKinds } };
}

export async function partnerWithToken(ctx) {
  const { createPartner, setPartnerLimits } = await dist('core/partners.js');
  const { issueToken } = await dist('core/tokens.js');
  const p = await createPartner(ctx, { slug: 'bench', name: 'Bench' }, 'bench');
  // The bench measures the API, not the limiter refusing it.
  await setPartnerLimits(ctx, p.id, { rateLimitPerMinute: 1_000_000_000 }, 'bench');
  const { secret } = await issueToken(ctx, { partner: p.id, name: 'bench', scopes: '*' }, 'bench');
  return { partnerId: p.id, token: secret };
}

const CHANNELS = ['sms', 'sms', 'sms', 'sms', 'sms', 'sms', 'whatsapp', 'whatsapp', 'email', 'messenger'];

/**
 * One partner with `count` contacts and conversations over the last 90 days: one transaction on
 * SQLite, many-row INSERTs on PostgreSQL.
 */
async function seed(scen, count) {
  const opened = await scen.open();
  const { partnerId, token } = await partnerWithToken(opened.ctx);
  if (scen.kind === 'postgres') {
    await opened.close();
    return seedPg(scen, count, partnerId, token);
  }
  const dd = opened;
  const db = opened.ctx.db.sqlite;
  const contact = db.prepare(
    `INSERT INTO contacts (id, partner_id, name, phone, email, attributes, created_at, updated_at) VALUES (?, ?, ?, ?, ?, '{}', ?, ?)`,
  );
  const conv = db.prepare(
    `INSERT INTO conversations (id, partner_id, contact_id, channel_type, status, last_message_at, last_inbound_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const now = Date.now();
  const span = 90 * 86_400_000;
  const cursorsAt = [];
  db.transaction(() => {
    for (let i = 0; i < count; i++) {
      const created = now - span + Math.floor((i / count) * span);
      const updated = Math.min(now, created + Math.floor(Math.random() * 7 * 86_400_000));
      const channel = CHANNELS[i % CHANNELS.length];
      const ct = idAt('ct', created);
      const phone = channel === 'email' ? null : `+1415${String(1_000_000 + i).padStart(7, '0')}`;
      contact.run(
        ct,
        partnerId,
        `Contact ${i}`,
        phone,
        channel === 'email' ? `c${i}@example.com` : null,
        created,
        created,
      );
      const id = idAt('conv', created);
      conv.run(id, partnerId, ct, channel, i % 10 === 0 ? 'closed' : 'open', updated, updated, created, updated);
      if (i % 997 === 0) cursorsAt.push(id);
    }
  })();
  await dd.close();
  // Cursors deep in the list, as a client paging through would send them.
  const cursors = cursorsAt.map((id) => Buffer.from(JSON.stringify({ o: 'c', id })).toString('base64url'));
  return { token, cursors };
}

/** seed() on PostgreSQL: the same rows, 20,000 at a time. */
async function seedPg(scen, count, partnerId, token) {
  const w = await pgRows(scen.url);
  const now = Date.now();
  const span = 90 * 86_400_000;
  const cursorsAt = [];
  try {
    for (let from = 0; from < count; from += 20_000) {
      const contacts = [];
      const convs = [];
      for (let i = from; i < Math.min(count, from + 20_000); i++) {
        const created = now - span + Math.floor((i / count) * span);
        const updated = Math.min(now, created + Math.floor(Math.random() * 7 * 86_400_000));
        const channel = CHANNELS[i % CHANNELS.length];
        const ct = idAt('ct', created);
        const phone = channel === 'email' ? null : `+1415${String(1_000_000 + i).padStart(7, '0')}`;
        contacts.push([
          ct,
          partnerId,
          `Contact ${i}`,
          phone,
          channel === 'email' ? `c${i}@example.com` : null,
          '{}',
          created,
          created,
        ]);
        const id = idAt('conv', created);
        convs.push([id, partnerId, ct, channel, i % 10 === 0 ? 'closed' : 'open', updated, updated, created, updated]);
        if (i % 997 === 0) cursorsAt.push(id);
      }
      await w.insert(
        'contacts',
        ['id', 'partner_id', 'name', 'phone', 'email', 'attributes', 'created_at', 'updated_at'],
        contacts,
      );
      await w.insert(
        'conversations',
        [
          'id',
          'partner_id',
          'contact_id',
          'channel_type',
          'status',
          'last_message_at',
          'last_inbound_at',
          'created_at',
          'updated_at',
        ],
        convs,
      );
    }
    await w.client.query('ANALYZE contacts; ANALYZE conversations');
  } finally {
    await w.close();
  }
  const cursors = cursorsAt.map((id) => Buffer.from(JSON.stringify({ o: 'c', id })).toString('base64url'));
  return { token, cursors };
}

export async function startMsgd(dataDir, port, env = {}) {
  return child([...MSGD_NODE_FLAGS, 'bin/msgd', '--data-dir', dataDir, '--port', String(port), '--no-demo'], {
    env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: '', ...env },
    ready: /msgd listening|msgd: /,
    timeoutMs: 60_000,
  });
}

async function conversationsBench({ print, seconds, pg }) {
  const count = Number(process.env.BENCH_CONVERSATIONS ?? 1_000_000);
  const scen = await scenarioStore(pg, 'conversations');
  const t0 = performance.now();
  const { token, cursors } = await seed(scen, count);
  print(`seeded ${fmt(count)} conversations (+ contacts) in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  const port = await freePort();
  const msgd = await startMsgd(scen.dir, port, scen.msgdEnv);
  const headers = { authorization: `Bearer ${token}` };
  const url = `http://127.0.0.1:${port}`;
  const results = {};
  try {
    const probe = await fetch(`${url}/v1/conversations?limit=50`, { headers });
    const body = await probe.json();
    if (probe.status !== 200 || body.data.length !== 50)
      throw new Error(`probe failed: ${probe.status} ${JSON.stringify(body).slice(0, 200)}`);
    const variants = [
      ['first page      ?limit=50', () => '/v1/conversations?limit=50'],
      ['filtered        ?channel=sms&status=open', () => '/v1/conversations?limit=50&channel=sms&status=open'],
      [
        'deep pages      ?cursor=<random depth>',
        (i) => `/v1/conversations?limit=50&cursor=${cursors[i % cursors.length]}`,
      ],
      [
        'sync            ?sort=updated_at&updated_since=-1d',
        () =>
          `/v1/conversations?limit=50&sort=updated_at&updated_since=${new Date(Date.now() - 86_400_000).toISOString()}`,
      ],
    ];
    // Closed loop: every connection sends its next request as soon as it has an answer, so the
    // server is busy at all three. 10 connections: ten clients paging back to back. 50: the same
    // throughput with five times the queue in front of one core (p99 grows with it, ~ n /
    // throughput). 1: what one request costs.
    for (const connections of [10, 50, 1]) {
      for (const [name, path] of connections === 1 ? variants.slice(0, 2) : variants) {
        const r = await load(url, (i) => ({ path: path(i), headers }), { seconds, method: 'GET', connections });
        const ok = r.statuses[200] ?? 0;
        results[`${name} (${connections})`] = r;
        print(
          `GET /v1/conversations ${name.padEnd(52)} ${String(connections).padStart(2)} conn  ${fmt(r.rps)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  (${fmt(ok)} x 200 of ${fmt(r.requests)}) ${verdict(r.p99, 10, 'lower')}`,
        );
      }
    }
    results.rss = peakRssMb(msgd.pid);
    print(`  peak RSS of msgd ${fmt(results.rss, 1)} MB`);
  } finally {
    await stop(msgd);
    await scen.close();
  }
  return results;
}

async function deliveriesBench({ print }) {
  const events = Number(process.env.BENCH_DELIVERIES ?? 40_000);
  const dir = tmp();
  const { key, cert } = selfSignedCert(dir);
  const rport = await freePort();
  const receiver = await child(['bench/https-receiver.mjs'], { env: { PORT: String(rport), KEY: key, CERT: cert } });
  const dataDir = join(dir, 'data');
  const cfgFile = join(dir, 'msgd.json');
  writeFileSync(
    cfgFile,
    JSON.stringify({ webhooksOut: { caFile: cert, allowPrivateTargets: true, concurrency: 128 } }),
  );
  const { dd, ctx } = await openCtx(dataDir);
  const { partnerId } = await partnerWithToken(ctx);
  const { createEndpoint } = await dist('core/endpoints.js');
  const { emitEvent } = await dist('core/events.js');
  await createEndpoint(ctx, partnerId, { url: `https://127.0.0.1:${rport}/hooks` });
  // A realistic body: what message.received carries.
  const write = dd.db.sqlite.transaction((n, base) => {
    for (let i = 0; i < n; i++) {
      emitEvent(ctx, partnerId, 'message.received', {
        channel: 'sms',
        from: '+14155550123',
        body: `bench message ${base + i}`,
        message_id: idAt('msg', Date.now()),
        conversation_id: idAt('conv', Date.now()),
        to: '+15017250604',
        media: [],
        contact: { id: idAt('ct', Date.now()), name: 'Bench', phone: '+14155550123', email: null },
        received_at: new Date().toISOString(),
      });
    }
  });
  for (let done = 0; done < events; done += 5000) write(Math.min(5000, events - done), done);
  dd.close();

  const port = await freePort();
  const t0 = performance.now();
  const msgd = await startMsgd(dataDir, port, { MSGD_CONFIG: cfgFile });
  // Pinned (src/db/pin.ts): a statement left to the collector aborts Node >= 24.19.
  const { pinConnection } = await dist('db/pin.js');
  const db = pinConnection(new Database(join(dataDir, 'msgd.db'), { readonly: true }));
  const succeeded = db.prepare(
    `SELECT COUNT(*) AS n FROM webhook_deliveries INDEXED BY webhook_deliveries_status WHERE status = 'succeeded'`,
  );
  const { done, rate, endedAt: t1 } = await rateUntil(() => succeeded.get().n, events, 180_000);
  const failed = db
    .prepare(`SELECT COUNT(*) AS n FROM webhook_attempts WHERE status_code IS NULL OR status_code >= 300`)
    .get().n;
  const rss = peakRssMb(msgd.pid);
  db.close();
  await stop(msgd);
  await stop(receiver);
  rmSync(dir, { recursive: true, force: true });
  print(
    `webhooks out to a local HTTPS receiver   ${fmt(rate)} deliveries/s  (${fmt(done)} of ${fmt(events)} events signed, sent, logged; ${fmt(failed)} failed attempts; ${fmt((t1 - t0) / 1000, 1)} s from start; target >= 5,000) ${verdict(rate, 5000)}`,
  );
  print(`  peak RSS of msgd ${fmt(rss, 1)} MB`);
  return { rate, done, failed, rss };
}

export async function run({ print, seconds = 5, pg = null, sqliteOnly = [] }) {
  // BENCH_V1_ONLY=conversations|deliveries runs one half.
  const only = process.env.BENCH_V1_ONLY;
  const conversations = only && only !== 'conversations' ? null : await conversationsBench({ print, seconds, pg });
  let deliveries = null;
  if (!only || only === 'deliveries') {
    if (!pg) deliveries = await deliveriesBench({ print });
    else {
      const { SQLITE_ONLY_PARTS } = await dist('runtime.js');
      const why = sqliteOnly.includes('webhooksOut')
        ? `msgd does not run ${SQLITE_ONLY_PARTS.webhooksOut} there yet`
        : 'the bench writes its events into SQLite only';
      print(`webhooks out to a local HTTPS receiver   skipped on PostgreSQL: ${why}`);
    }
  }
  return { conversations, deliveries };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run({ print: (l) => process.stdout.write(l + '\n'), seconds: Number(process.env.BENCH_SECONDS ?? 5) });
}
