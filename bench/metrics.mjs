// Metrics benchmarks: what /metrics costs the send path (the accept benchmark with metrics
// off and on, alternated), and how long a scrape takes with millions of messages stored.
// BENCH_SCRAPE_MESSAGES sets the store's size (default 5,000,000; seeding it takes minutes).
import Database from 'better-sqlite3';
import { child, fmt, freePort, load, MSGD_NODE_FLAGS, percentile, stop, tmp, verdict } from './lib.mjs';
import { setup, startProvider, writeConfig } from './send.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));
const RECIPIENTS = 10_000;
const recipient = (i) => `+1415555${String(i % RECIPIENTS).padStart(4, '0')}`;

function startAcceptOnly(dataDir, port, env) {
  return child([...MSGD_NODE_FLAGS, 'bench/msgd-accept-only.mjs'], {
    env: { MSGD_LOG_LEVEL: 'info', MSGD_DATA_DIR: dataDir, MSGD_PORT: String(port), ...env },
    ready: /msgd listening/,
  });
}

/** The accept benchmark (job loop stopped) against a fresh store, metrics on or off. */
async function acceptRun(metricsOn, seconds) {
  const provider = await startProvider(0);
  const dir = tmp();
  const token = await setup(dir, provider.url);
  const cfg = await writeConfig(dir, 256);
  const port = await freePort();
  const env = { MSGD_CONFIG: cfg };
  if (metricsOn) env.MSGD_METRICS_PORT = String(await freePort());
  const msgd = await startAcceptOnly(dir, port, env);
  let n = 0;
  let scrapes = 0;
  // With metrics on, Prometheus scrapes during the load (every second here; 15 s is usual).
  const scraper = metricsOn
    ? setInterval(() => {
        fetch(`http://127.0.0.1:${env.MSGD_METRICS_PORT}/metrics`)
          .then((r) => r.text())
          .then(
            () => scrapes++,
            () => {},
          );
      }, 1000)
    : null;
  const r = await load(
    `http://127.0.0.1:${port}`,
    () => ({
      path: '/api/send-sms.php',
      body: JSON.stringify({ to: recipient(n), text: `bench ${n++}` }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    }),
    { seconds },
  );
  if (scraper) clearInterval(scraper);
  await stop(msgd);
  await stop(provider.p);
  return { ...r, scrapes };
}

/** A store of `count` messages: one real send's rows, copied with new ids and final statuses. */
async function seedMessages(dir, providerUrl, count) {
  await setup(dir, providerUrl, { preload: 1 });
  const { pinConnection } = await dist('db/pin.js');
  const db = pinConnection(new Database(`${dir}/msgd.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const cols = db
    .prepare(`SELECT name FROM pragma_table_info('messages')`)
    .all()
    .map((c) => `"${c.name}"`);
  const template = db.prepare('SELECT id FROM messages LIMIT 1').get().id;
  const select = cols.map((c) =>
    c === '"id"'
      ? `printf('msg_seed%018d', s.i)`
      : c === '"status"'
        ? `CASE s.i % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'sent' WHEN 2 THEN 'read' ELSE 'delivered' END`
        : `m.${c}`,
  );
  const insert = db.prepare(
    `WITH RECURSIVE s(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?)
     INSERT INTO messages (${cols.join(', ')}) SELECT ${select.join(', ')} FROM s, messages m WHERE m.id = ?`,
  );
  for (let from = 0; from < count; from += 250_000) {
    db.transaction(() => insert.run(from, Math.min(count, from + 250_000), template))();
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

async function scrapeRun(count) {
  const provider = await startProvider(0);
  const dir = tmp();
  const t0 = performance.now();
  await seedMessages(dir, provider.url, count);
  const seeded = (performance.now() - t0) / 1000;
  const port = await freePort();
  const metricsPort = await freePort();
  const msgd = await child([...MSGD_NODE_FLAGS, 'bin/msgd', '--data-dir', dir, '--port', String(port), '--no-demo'], {
    env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: '', MSGD_METRICS_PORT: String(metricsPort) },
    ready: /msgd listening/,
  });
  const url = `http://127.0.0.1:${metricsPort}/metrics`;
  for (let i = 0; i < 3; i++) await (await fetch(url)).text();
  const times = [];
  let bytes = 0;
  for (let i = 0; i < 30; i++) {
    const s = performance.now();
    bytes = (await (await fetch(url)).text()).length;
    times.push(performance.now() - s);
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop(msgd);
  await stop(provider.p);
  times.sort((a, b) => a - b);
  return { seeded, median: percentile(times, 50), max: times.at(-1), bytes };
}

export async function run({ print, seconds = 5 }) {
  const results = {};
  // 1. The send path with metrics off and on, alternated so drift hits both alike.
  const off = [];
  const on = [];
  for (let round = 0; round < 2; round++) {
    off.push(await acceptRun(false, seconds));
    on.push(await acceptRun(true, seconds));
  }
  const mean = (rs) => rs.reduce((a, r) => a + r.rps, 0) / rs.length;
  const overhead = 1 - mean(on) / mean(off);
  results.send = { off: mean(off), on: mean(on), overhead };
  print(`send API, metrics off                   ${fmt(mean(off))} req/s  (${off.map((r) => fmt(r.rps)).join(', ')})`);
  print(`send API, metrics on, scraped every 1 s ${fmt(mean(on))} req/s  (${on.map((r) => fmt(r.rps)).join(', ')})`);
  print(
    `  metrics overhead                      ${fmt(overhead * 100, 1)} %  (target <= 3 %) ${verdict(overhead, 0.03, 'lower')}`,
  );

  // 2. One scrape with a large store.
  const count = Number(process.env.BENCH_SCRAPE_MESSAGES ?? 5_000_000);
  const s = (results.scrape = await scrapeRun(count));
  print(
    `scrape /metrics, ${fmt(count)} messages stored  median ${fmt(s.median, 2)} ms  max ${fmt(s.max, 2)} ms  (${fmt(s.bytes)} bytes; target <= 20 ms) ${verdict(s.max, 20, 'lower')}  (store seeded in ${fmt(s.seeded, 1)} s)`,
  );
  return results;
}
