// msgctl tui on a busy appliance: the send API's accept rate with the console's overview and
// webhook tail open on the same data directory, beside the rate without them, in alternating
// pairs (the machine is noisy; target: within 5 %), and the console's CPU while it sits on the
// overview of a big store (target: under 5 % of a core).
//
// The store is built with direct SQL in large transactions: BENCH_TUI_MESSAGES messages
// (default 5,000,000) and BENCH_TUI_WEBHOOKS provider webhooks (default 1,000,000).
// BENCH_TUI_PAIRS sets the number of pairs (default 3).
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import pty from '@lydell/node-pty';
import { ROOT, fmt, freePort, load, MSGD_NODE_FLAGS, child, stop, tmp, verdict } from './lib.mjs';
import { setup, startProvider, writeConfig } from './send.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));
const MESSAGES = Number(process.env.BENCH_TUI_MESSAGES ?? 5_000_000);
const WEBHOOKS = Number(process.env.BENCH_TUI_WEBHOOKS ?? 1_000_000);
const PAIRS = Number(process.env.BENCH_TUI_PAIRS ?? 3);
const recipient = (i) => `+1415555${String(i % 10_000).padStart(4, '0')}`;

/** Messages and webhook log rows as msgd stores them, written straight into the file. */
async function fill(dir) {
  const { pinConnection } = await dist('db/pin.js');
  const db = pinConnection(new Database(`${dir}/msgd.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const partner = db.prepare('SELECT id FROM partners LIMIT 1').get().id;
  const gw = db.prepare('SELECT id FROM gateways LIMIT 1').get().id;
  const t0 = Date.now() - 86_400_000;
  const msg = db.prepare(
    `INSERT INTO messages (id, partner_id, direction, channel_type, gateway_id, "to", "from", content, status, price, created_at, updated_at)
     VALUES (?, ?, 'outbound', 'sms', ?, ?, '+15017250604', '{"kind":"text","text":"bench"}', 'delivered', 7500, ?, ?)`,
  );
  const hook = db.prepare(
    `INSERT INTO provider_webhooks (id, provider, gateway_id, method, path, headers, body, verification, processing, received_at, processed_at)
     VALUES (?, 'twilio', ?, 'POST', '/api/webhook.php', '{"content-type":"application/x-www-form-urlencoded"}', ?, 'ok', 'processed', ?, ?)`,
  );
  const body = Buffer.from('MessageSid=SM0&MessageStatus=delivered');
  const batch = (n, from, f) =>
    db.transaction(() => {
      for (let i = from; i < from + n; i++) f(i);
    })();
  const started = performance.now();
  for (let i = 0; i < MESSAGES; i += 100_000)
    batch(Math.min(100_000, MESSAGES - i), i, (k) => {
      const at = t0 + Math.floor((k / MESSAGES) * 86_000_000);
      msg.run(`msg_0bench${String(k).padStart(16, '0')}`, partner, gw, recipient(k), at, at);
    });
  for (let i = 0; i < WEBHOOKS; i += 100_000)
    batch(Math.min(100_000, WEBHOOKS - i), i, (k) => {
      const at = t0 + Math.floor((k / WEBHOOKS) * 86_000_000);
      hook.run(`pwh_0bench${String(k).padStart(16, '0')}`, gw, body, at, at);
    });
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return (performance.now() - started) / 1000;
}

/** msgctl tui in a pseudo-terminal at 80×24, on `screen` (a key). */
async function openTui(dir, key) {
  const term = pty.spawn(process.execPath, ['bin/msgctl', '--data-dir', dir, 'tui'], {
    name: 'xterm',
    cols: 80,
    rows: 24,
    cwd: ROOT,
    env: { ...process.env, MSGD_CONFIG: '' },
  });
  let out = '';
  term.onData((d) => (out = (out + d).slice(-20_000)));
  const deadline = Date.now() + 30_000;
  while (!/Overview/.test(out)) {
    if (Date.now() > deadline) throw new Error(`msgctl tui did not draw: ${out.slice(-500)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (key) term.write(key);
  await new Promise((r) => setTimeout(r, 1000));
  return term;
}

/** CPU seconds (user + system) a live process has used, from /proc. */
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

export async function run({ print, seconds = 5 }) {
  const provider = await startProvider(0);
  const dir = tmp();
  const token = await setup(dir, provider.url);
  const filled = await fill(dir);
  print(`store: ${fmt(MESSAGES)} messages, ${fmt(WEBHOOKS)} webhook log rows, written in ${fmt(filled, 1)} s`);
  const cfg = await writeConfig(dir, 256);
  const port = await freePort();
  const msgd = await child([...MSGD_NODE_FLAGS, 'bench/msgd-accept-only.mjs'], {
    env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: cfg, MSGD_DATA_DIR: dir, MSGD_PORT: String(port) },
    ready: /msgd listening/,
  });
  let n = 0;
  const accept = () =>
    load(
      `http://127.0.0.1:${port}`,
      () => ({
        path: '/api/send-sms.php',
        body: JSON.stringify({ to: recipient(n), text: `bench ${n++}` }),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      }),
      { seconds },
    );
  const without = [];
  const withTui = [];
  try {
    for (let i = 0; i < PAIRS; i++) {
      without.push((await accept()).rps);
      const overview = await openTui(dir, null);
      const tail = await openTui(dir, '4');
      withTui.push((await accept()).rps);
      overview.kill();
      tail.kill();
      print(
        `  pair ${i + 1}: accept ${fmt(without[i])} req/s without the console, ${fmt(withTui[i])} with overview and tail open`,
      );
    }
    const sum = (a) => a.reduce((x, y) => x + y, 0);
    const change = sum(withTui) / sum(without) - 1;
    print(
      `send accept with the console open        ${fmt(sum(withTui) / PAIRS)} req/s vs ${fmt(sum(without) / PAIRS)}: ${change >= 0 ? '+' : ''}${fmt(change * 100, 1)} %   ${verdict(Math.abs(change) * 100, 5, 'lower')}`,
    );

    // Idle: msgd beating, nothing sent; the console on its overview.
    const idle = await openTui(dir, null);
    const c0 = cpuSeconds(idle.pid);
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, Math.max(5, seconds * 2) * 1000));
    const share = (cpuSeconds(idle.pid) - c0) / ((performance.now() - w0) / 1000);
    idle.kill();
    print(
      `console idle on the overview              ${fmt(share * 100, 1)} % of a core   ${verdict(share * 100, 5, 'lower')}`,
    );
  } finally {
    await stop(msgd);
    await stop(provider.p);
  }
}
