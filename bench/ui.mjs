// Web console page latency (docs/ui.md): a partner with 1,000,000 messages (and their ledger
// debits), a signed-in admin, and GET of each list page, a filtered page, a deep page and a
// message's page, p50/p99 at 10 connections and at 1 (target p99 <= 50 ms).
// BENCH_UI_MESSAGES changes the store's size. msgd runs as a child (bin/msgd).
import { randomBytes } from 'node:crypto';
import { child, fmt, freePort, load, MSGD_NODE_FLAGS, stop, tmp, verdict } from './lib.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const STATUSES = [
  'delivered',
  'delivered',
  'delivered',
  'delivered',
  'read',
  'delivered',
  'sent',
  'delivered',
  'read',
  'failed',
];
const CHANNELS = ['sms', 'sms', 'sms', 'sms', 'sms', 'whatsapp', 'whatsapp', 'email', 'sms', 'messenger'];

function idAt(prefix, ms) {
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

async function seed(dataDir, count) {
  const { openDataDir } = await dist('db/datadir.js');
  const { loadConfig } = await dist('config/load.js');
  const { gatewayKinds } = await dist('providers/kinds.js');
  const { createPartner } = await dist('core/partners.js');
  const { topup } = await dist('core/ledger.js');
  const { inviteUser } = await dist('core/users.js');
  const { createSession } = await dist('core/ui-sessions.js');
  const { rollUpSpend } = await dist('core/spend.js');
  const { store } = await dist('db/query.js');
  const config = loadConfig({ env: {}, dataDir });
  const dd = openDataDir(dataDir, { create: true, env: {} });
  const ctx = { db: dd.db, store: store(dd.db), masterKey: dd.masterKey, config, now: Date.now, gatewayKinds };
  const db = dd.db.sqlite;
  const p = await createPartner(ctx, { slug: 'bench', name: 'Bench' }, 'bench');
  await topup(ctx, p.id, 1_000_000_000_000, null, 'bench');
  const { member: user } = await inviteUser(ctx, { partner: p.id, email: 'bench@example.com', role: 'admin' }, 'bench');
  db.prepare('UPDATE users SET password_hash = ? WHERE id = ?').run('scrypt$bench', user.user_id);
  db.prepare(`UPDATE memberships SET status = 'active', accepted_at = ? WHERE user_id = ?`).run(
    Date.now(),
    user.user_id,
  );
  const msg = db.prepare(
    `INSERT INTO messages (id, partner_id, direction, channel_type, "to", "from", content, status, price, segments, conversation_id, created_at, updated_at)
     VALUES (?, ?, 'outbound', ?, ?, '+15550000001', ?, ?, 7500, 1, ?, ?, ?)`,
  );
  const conv = db.prepare(
    `INSERT INTO conversations (id, partner_id, contact_id, channel_type, status, last_message_at, created_at, updated_at) VALUES (?, ?, ?, 'sms', 'open', ?, ?, ?)`,
  );
  const contact = db.prepare(
    `INSERT INTO contacts (id, partner_id, phone, attributes, created_at, updated_at) VALUES (?, ?, ?, '{}', ?, ?)`,
  );
  const ledger = db.prepare(
    `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, actor, created_at) VALUES (?, 'debit', -7500, ?, ?, 'bench', ?)`,
  );
  const now = Date.now();
  const span = 90 * 86_400_000;
  const convs = [];
  const deep = [];
  let sample = null;
  let balance = 1_000_000_000_000;
  db.transaction(() => {
    for (let i = 0; i < 10_000; i++) {
      const at = now - span + Math.floor((i / 10_000) * span);
      const ct = idAt('ct', at);
      contact.run(ct, p.id, `+1415${String(1_000_000 + i).padStart(7, '0')}`, at, at);
      const id = idAt('conv', at);
      conv.run(id, p.id, ct, at, at, at);
      convs.push(id);
    }
    for (let i = 0; i < count; i++) {
      const at = now - span + Math.floor((i / count) * span);
      const id = idAt('msg', at);
      const text = JSON.stringify({ kind: 'text', text: `Your code is ${100000 + (i % 900000)}` });
      // A thousand recipients, each message in its recipient's conversation (as a send writes it).
      const r = i % 1000;
      msg.run(
        id,
        p.id,
        CHANNELS[i % 10],
        `+1415${String(1_000_000 + r).padStart(7, '0')}`,
        text,
        STATUSES[i % 10],
        convs[r],
        at,
        at,
      );
      balance -= 7500;
      ledger.run(p.id, balance, id, at);
      if (i % 9973 === 0) deep.push(id);
      if (i === Math.floor(count / 2)) sample = id;
    }
    db.prepare('UPDATE partners SET balance = ? WHERE id = ?').run(balance, p.id);
  })();
  // What the minute's maintenance task has done by the time anyone looks.
  await rollUpSpend(ctx);
  db.exec('ANALYZE');
  const { secret } = await createSession(ctx, user.user_id, { ip: '127.0.0.1' });
  dd.close();
  const cursors = deep.map((id) => Buffer.from(JSON.stringify({ o: 'm', id })).toString('base64url'));
  return { cookie: `msgd_session=${secret}`, sample, cursors, conversation: convs[convs.length - 1] };
}

export async function run({ print, seconds }) {
  const count = Number(process.env.BENCH_UI_MESSAGES ?? 1_000_000);
  const dir = tmp();
  const t0 = performance.now();
  const s = await seed(dir, count);
  print(`seeded ${fmt(count)} messages and ledger debits in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  const port = await freePort();
  const msgd = await child([...MSGD_NODE_FLAGS, 'bin/msgd', '--data-dir', dir, '--port', String(port), '--no-demo'], {
    env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: '' },
    ready: /msgd listening|msgd: /,
    timeoutMs: 60_000,
  });
  const url = `http://127.0.0.1:${port}`;
  const headers = { cookie: s.cookie };
  try {
    const probe = await fetch(`${url}/ui/messages`, { headers, redirect: 'manual' });
    if (probe.status !== 200) throw new Error(`probe failed: ${probe.status}`);
    const pages = [
      ['overview', () => '/ui/overview'],
      ['messages, first page', () => '/ui/messages'],
      ['messages ?status=failed', () => '/ui/messages?status=failed'],
      ['messages ?channel=whatsapp', () => '/ui/messages?channel=whatsapp'],
      ['messages ?recipient=<one of 1,000>', (i) => `/ui/messages?recipient=%2B1415${1_000_000 + (i % 1000)}`],
      ['messages ?from=&to= (one day)', () => `/ui/messages?from=${day(-45)}&to=${day(-45)}`],
      ['messages, deep pages', (i) => `/ui/messages?cursor=${s.cursors[i % s.cursors.length]}`],
      ['a message', () => `/ui/messages/${s.sample}`],
      ['conversations', () => '/ui/conversations'],
      ['a conversation', () => `/ui/conversations/${s.conversation}`],
      ['ledger', () => '/ui/ledger'],
    ];
    for (const connections of [10, 1]) {
      for (const [name, path] of pages) {
        const r = await load(url, (i) => ({ path: path(i), headers }), { seconds, method: 'GET', connections });
        const ok = r.statuses[200] ?? 0;
        print(
          `GET ${name.padEnd(36)} ${String(connections).padStart(2)} conn  ${fmt(r.rps)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  (${fmt(ok)} x 200 of ${fmt(r.requests)}) ${verdict(r.p99, 50, 'lower')}`,
        );
      }
    }
  } finally {
    await stop(msgd);
  }
}

const day = (offset) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
