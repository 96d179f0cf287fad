// GET /v1/messages with 5,000,000 messages stored (BENCH_MESSAGES to change): p50/p99 at 10
// connections (target p99 <= 10 ms) for the first page, deep pages, each filter and the
// row-checked ones (channel alone, a rare status), and at 1 connection for the first page.
// The store is written with direct SQL in big transactions, indexes built after the rows (on
// PostgreSQL, BENCH_STORE=postgres: many-row INSERTs into a fresh database, then ANALYZE).
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { fmt, freePort, load, peakRssMb, stop, verdict } from './lib.mjs';
import { openCtx, pgRows, scenarioStore } from './store.mjs';
import { idAt, partnerWithToken, startMsgd } from './v1.mjs';

export const stores = ['sqlite', 'postgres'];

const CHANNELS = ['sms', 'sms', 'sms', 'sms', 'sms', 'sms', 'whatsapp', 'whatsapp', 'email', 'messenger'];
// Out of 100: what a settled store looks like, with failures rare.
const STATUS_AT = (r) =>
  r < 78 ? 'delivered' : r < 88 ? 'read' : r < 96 ? 'sent' : r < 98 ? 'received' : r < 99 ? 'failed' : 'queued';

/** A message row of the seed: the i-th of `count`, spread over `span` ms before `now`. */
function messageRow(i, count, now, span, people, customers, partnerId) {
  const t = now - span + Math.floor((i / count) * span);
  const p = people[(i * 7919) % customers];
  const status = STATUS_AT((i * 37) % 100);
  const inbound = status === 'received';
  const text = `{"kind":"text","text":"Your order ${i} has shipped and will arrive on Thursday."}`;
  return [
    idAt('msg', t),
    partnerId,
    inbound ? 'inbound' : 'outbound',
    p.channel,
    p.cv,
    p.ct,
    inbound ? '+15550001111' : p.address,
    inbound ? p.address : '+15550001111',
    text,
    status,
    `wamid.${i}`,
    t,
    t,
    t,
  ];
}

const MESSAGE_COLUMNS = [
  'id',
  'partner_id',
  'direction',
  'channel_type',
  'conversation_id',
  'contact_id',
  'to',
  'from',
  'content',
  'status',
  'provider_message_id',
  'sent_at',
  'created_at',
  'updated_at',
];

/** seed() on PostgreSQL: the same rows; `cursors` from every 4,999th message, as SQLite's rowid picks them. */
async function seedPg(scen, count, customers, partnerId, token) {
  const w = await pgRows(scen.url);
  const now = Date.now();
  const span = 180 * 86_400_000;
  const people = [];
  const cursors = [];
  try {
    for (let from = 0; from < customers; from += 20_000) {
      const contacts = [];
      const convs = [];
      for (let i = from; i < Math.min(customers, from + 20_000); i++) {
        const channel = CHANNELS[i % CHANNELS.length];
        const t = now - span;
        const ct = idAt('ct', t);
        const phone = channel === 'email' ? null : `+1415${String(1_000_000 + i).padStart(7, '0')}`;
        const email = channel === 'email' ? `c${i}@example.com` : null;
        contacts.push([ct, partnerId, phone, email, '{}', t, t]);
        const cv = idAt('conv', t);
        convs.push([cv, partnerId, ct, channel, 'open', now, now, t, now]);
        people.push({ ct, cv, channel, address: phone ?? email });
      }
      await w.insert(
        'contacts',
        ['id', 'partner_id', 'phone', 'email', 'attributes', 'created_at', 'updated_at'],
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
    const columns = [...MESSAGE_COLUMNS, 'provider_id_indexed', 'price', 'segments'];
    for (let from = 0; from < count; from += 20_000) {
      const rows = [];
      for (let i = from; i < Math.min(count, from + 20_000); i++) {
        const row = messageRow(i, count, now, span, people, customers, partnerId);
        rows.push([...row, 0, 7500, 1]);
        if ((i + 1) % 4999 === 0)
          cursors.push(Buffer.from(JSON.stringify({ o: 'm', id: row[0] })).toString('base64url'));
      }
      await w.insert('messages', columns, rows);
    }
    await w.client.query('ANALYZE contacts; ANALYZE conversations; ANALYZE messages');
  } finally {
    await w.close();
  }
  return { token, people, cursors, now, span };
}

/** `count` messages of `customers` customers into a scenario store (bench/store.mjs) or a SQLite data directory. */
export async function seed(target, count, customers) {
  const scen =
    typeof target === 'string' ? { kind: 'sqlite', dir: target, open: () => openCtx({ dataDir: target }) } : target;
  const opened = await scen.open();
  const { partnerId, token } = await partnerWithToken(opened.ctx);
  await opened.close();
  if (scen.kind === 'postgres') return seedPg(scen, count, customers, partnerId, token);
  const db = new Database(join(scen.dir, 'msgd.db'));
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -400000');
  const now = Date.now();
  const span = 180 * 86_400_000;
  const contact = db.prepare(
    `INSERT INTO contacts (id, partner_id, phone, email, attributes, created_at, updated_at) VALUES (?, ?, ?, ?, '{}', ?, ?)`,
  );
  const conv = db.prepare(
    `INSERT INTO conversations (id, partner_id, contact_id, channel_type, status, last_message_at, last_inbound_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?)`,
  );
  const people = [];
  db.transaction(() => {
    for (let i = 0; i < customers; i++) {
      const channel = CHANNELS[i % CHANNELS.length];
      const t = now - span;
      const ct = idAt('ct', t);
      const phone = channel === 'email' ? null : `+1415${String(1_000_000 + i).padStart(7, '0')}`;
      const email = channel === 'email' ? `c${i}@example.com` : null;
      contact.run(ct, partnerId, phone, email, t, t);
      const cv = idAt('conv', t);
      conv.run(cv, partnerId, ct, channel, now, now, t, now);
      people.push({ ct, cv, channel, address: phone ?? email });
    }
  })();
  // Rows first, indexes after: one sort per index instead of millions of random inserts.
  db.exec('DROP INDEX messages_partner; DROP INDEX messages_conversation;');
  const msg = db.prepare(
    `INSERT INTO messages (id, partner_id, direction, channel_type, conversation_id, contact_id, "to", "from", content, status,
       provider_message_id, provider_id_indexed, price, segments, sent_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 7500, 1, ?, ?, ?)`,
  );
  const batch = db.transaction((from, to) => {
    for (let i = from; i < to; i++) msg.run(...messageRow(i, count, now, span, people, customers, partnerId));
  });
  for (let i = 0; i < count; i += 100_000) batch(i, Math.min(count, i + 100_000));
  db.exec(
    'CREATE INDEX messages_partner ON messages (partner_id, id); CREATE INDEX messages_conversation ON messages (conversation_id, id); PRAGMA wal_checkpoint(TRUNCATE);',
  );
  const cursors = db
    .prepare('SELECT id FROM messages WHERE rowid % 4999 = 0')
    .all()
    .map((r) => Buffer.from(JSON.stringify({ o: 'm', id: r.id })).toString('base64url'));
  db.close();
  return { token, people, cursors, now, span };
}

export async function run({ print, seconds = 5, pg = null }) {
  const count = Number(process.env.BENCH_MESSAGES ?? 5_000_000);
  const customers = Math.max(10, Math.floor(count / 50));
  const scen = await scenarioStore(pg, 'messages');
  const t0 = performance.now();
  const { token, people, cursors, now, span } = await seed(scen, count, customers);
  print(`seeded ${fmt(count)} messages of ${fmt(customers)} customers in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  const port = await freePort();
  const msgd = await startMsgd(scen.dir, port, scen.msgdEnv);
  const headers = { authorization: `Bearer ${token}` };
  const url = `http://127.0.0.1:${port}`;
  const results = {};
  const someone = (i) => people[(i * 131) % people.length];
  const day = (i) => new Date(now - span + ((i * 86_400_000 * 7) % span)).toISOString();
  try {
    const probe = await fetch(`${url}/v1/messages?limit=50`, { headers });
    const body = await probe.json();
    if (probe.status !== 200 || body.data.length !== 50)
      throw new Error(`probe failed: ${probe.status} ${JSON.stringify(body).slice(0, 200)}`);
    const variants = [
      ['first page      ?limit=50', () => '/v1/messages?limit=50'],
      ['deep pages      ?cursor=<random depth>', (i) => `/v1/messages?limit=50&cursor=${cursors[i % cursors.length]}`],
      [
        'one customer    ?recipient=<phone|email>',
        (i) => `/v1/messages?limit=50&recipient=${encodeURIComponent(someone(i).address)}`,
      ],
      ['conversation    ?conversation=<conv>', (i) => `/v1/messages?limit=50&conversation=${someone(i).cv}`],
      [
        'one day         ?created_since&created_before',
        (i) => `/v1/messages?limit=50&created_since=${day(i)}&created_before=${day(i).replace(/T.*/, 'T23:59:59Z')}`,
      ],
      ['row-checked     ?channel=whatsapp', () => '/v1/messages?limit=50&channel=whatsapp'],
      [
        'row-checked     ?status=failed (1 %)',
        (i) => `/v1/messages?limit=50&status=failed&cursor=${cursors[i % cursors.length]}`,
      ],
    ];
    for (const connections of [10, 1]) {
      for (const [name, path] of connections === 1 ? variants.slice(0, 1) : variants) {
        const r = await load(url, (i) => ({ path: path(i), headers }), { seconds, method: 'GET', connections });
        const ok = r.statuses[200] ?? 0;
        results[`${name} (${connections})`] = r;
        print(
          `GET /v1/messages ${name.padEnd(46)} ${String(connections).padStart(2)} conn  ${fmt(r.rps)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  (${fmt(ok)} x 200 of ${fmt(r.requests)}) ${verdict(r.p99, 10, 'lower')}`,
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

if (import.meta.url === `file://${process.argv[1]}`) {
  await run({ print: (l) => process.stdout.write(l + '\n'), seconds: Number(process.env.BENCH_SECONDS ?? 5) });
}
