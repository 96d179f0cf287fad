// Backup of a large store under send load: how long `msgctl backup` takes, and how far the WAL
// grows meanwhile. The backup's read transaction pins the WAL: the checkpoint cannot copy past
// it, so every commit during the backup adds to the WAL file until the backup ends.
//
// BENCH_BACKUP_MESSAGES sets the store (default 1,000,000 settled messages); run alone with
//   node bench/backup.mjs            (or BENCH_ONLY=backup npm run bench)
import { spawn } from 'node:child_process';
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { child, fmt, freePort, MSGD_NODE_FLAGS, ROOT, stop, tmp } from './lib.mjs';
import { setup, startProvider } from './send.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));
const MB = 1_048_576;
const size = (f) => {
  try {
    return statSync(f).size;
  } catch {
    return 0;
  }
};

/** Settled messages as the send path writes them (debit, contact, conversation), no jobs. */
async function seed(dir, count) {
  const { openDataDir } = await dist('db/datadir.js');
  const { loadConfig } = await dist('config/load.js');
  const { gatewayKinds } = await dist('providers/kinds.js');
  const { createOutbound } = await dist('core/messages.js');
  const { store } = await dist('db/query.js');
  const dd = openDataDir(dir, { env: {} });
  const ctx = {
    db: dd.db,
    store: store(dd.db),
    masterKey: dd.masterKey,
    config: loadConfig({ env: {}, dataDir: dir }),
    now: Date.now,
    gatewayKinds,
  };
  const ch = dd.db.sqlite.prepare(`SELECT id, partner_id, gateway_id, sender FROM channels`).get();
  const settle = dd.db.sqlite.prepare(`UPDATE messages SET status = 'delivered' WHERE id = ?`);
  const batch = dd.db.sqlite.transaction((from, n) => {
    for (let i = from; i < from + n; i++) {
      const m = createOutbound(ctx, {
        partnerId: ch.partner_id,
        channel: { id: ch.id, type: 'sms', gatewayId: ch.gateway_id, sender: ch.sender },
        to: `+1415555${String(i % 10_000).padStart(4, '0')}`,
        content: { kind: 'text', text: `stored message ${i}: a text of an ordinary length for an SMS` },
        price: 7500,
        segments: 1,
        actor: 'bench',
        lowBalanceThreshold: null,
      });
      settle.run(m.id);
    }
  });
  for (let done = 0; done < count; done += 10_000) batch(done, Math.min(10_000, count - done));
  dd.db.sqlite.pragma('wal_checkpoint(TRUNCATE)');
  dd.close();
}

function msgctl(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(ROOT, 'bin', 'msgctl'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`msgctl ${args.join(' ')}: ${err}`))));
  });
}

export async function run({ print }) {
  const count = Number(process.env.BENCH_BACKUP_MESSAGES ?? 1_000_000);
  const provider = await startProvider(0);
  const dir = tmp();
  const token = await setup(dir, provider.url);
  const seeded = performance.now();
  await seed(dir, count);
  const db = join(dir, 'msgd.db');
  print(
    `store: ${fmt(count)} messages, ${fmt(size(db) / MB, 0)} MB (seeded in ${fmt((performance.now() - seeded) / 1000, 0)} s)`,
  );
  const port = await freePort();
  const msgd = await child([...MSGD_NODE_FLAGS, 'bin/msgd', '--data-dir', dir, '--port', String(port), '--no-demo'], {
    // info only for the start line; requests are logged at debug.
    env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: '' },
    ready: /msgd listening|msgd: /,
    timeoutMs: 120_000,
  });

  // 20 clients sending back to back from before the backup until after it.
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 20 });
  let stopLoad = false;
  let accepted = 0;
  let n = 0;
  const loadDone = Promise.all(
    Array.from({ length: 20 }, async () => {
      while (!stopLoad) {
        const r = await pool.request({
          path: '/api/send-sms.php',
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ to: `+1415556${String(n++ % 10_000).padStart(4, '0')}`, text: 'under backup' }),
        });
        await r.body.dump();
        if (r.statusCode === 200) accepted++;
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 1000));
  const warm = accepted;
  await new Promise((r) => setTimeout(r, 3000));
  const rateBefore = (accepted - warm) / 3;
  const wal = join(dir, 'msgd.db-wal');
  const walBefore = size(wal);
  let walMax = walBefore;
  const sampler = setInterval(() => (walMax = Math.max(walMax, size(wal))), 100);
  const acceptedBefore = accepted;
  const t0 = performance.now();
  const out = JSON.parse(await msgctl(['--data-dir', dir, '--json', 'backup', join(dir, 'bench-backup.db')]));
  const seconds = (performance.now() - t0) / 1000;
  const acceptedDuring = accepted - acceptedBefore;
  clearInterval(sampler);
  stopLoad = true;
  await loadDone;
  await pool.close();
  await stop(msgd);
  await stop(provider.p);
  const check = new Database(out.file, { readonly: true });
  const stored = check.prepare('SELECT COUNT(*) FROM messages').pluck().get();
  check.close();
  rmSync(dir, { recursive: true, force: true });
  print(
    `msgctl backup under send load           ${fmt(seconds, 1)} s for ${fmt(out.bytes / MB, 0)} MB (${fmt(stored)} messages in it)`,
  );
  print(
    `sends accepted during the backup         ${fmt(acceptedDuring)} (${fmt(acceptedDuring / seconds)} /s; ${fmt(rateBefore)} /s in the 3 s before)`,
  );
  print(
    `WAL file: ${fmt(walBefore / MB, 1)} MB before the backup, ${fmt(walMax / MB, 1)} MB at most during it (+${fmt((walMax - walBefore) / MB, 1)} MB)`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run({ print: (l) => process.stdout.write(l + '\n') });
  process.exit(0);
}
