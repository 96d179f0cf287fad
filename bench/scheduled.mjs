// Scheduled sends: a burst of BENCH_SCHEDULED messages (100,000 by default) all scheduled for the
// same second and dispatched to a 0 ms provider, beside the same number queued at once (the plain
// dispatch figure); GET /v1/messages?status=scheduled (read from its partial index) against
// ?status=queued (row-checked) over BENCH_SCHEDULED_LIST_MESSAGES messages; the send accept rate
// with and without send_at.
//
// The burst is stored through core in transactions, as the send bench preloads, each message
// 'scheduled' with its dispatch job due at send_at. send_at is BENCH_SCHEDULED_LEAD_MS after the
// store is written, so msgd has started when it comes (the run says if not); the figure runs
// from send_at to the last message's sent_at, and no message may be sent before send_at.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { fmt, freePort, load, peakRssMb, stop, tmp } from './lib.mjs';
import { dispatchRun, RECIPIENTS, recipient, setup, startMsgd, startProvider, writeConfig } from './send.mjs';
import { idAt, startMsgd as startMsgdV1 } from './v1.mjs';
import { seed } from './v1-messages.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));

/** Dispatch of `count` messages all due at one send_at, to a 0 ms provider, 256 in flight. */
export async function burstRun(count, leadMs) {
  const provider = await startProvider(0);
  const dir = tmp();
  // Stored with a far send_at, moved to the burst's second just before msgd starts.
  await setup(dir, provider.url, { preload: count, sendAt: Date.now() + 86_400_000 });
  const cfg = await writeConfig(dir, 256);
  const port = await freePort();
  const sendAt = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  {
    const db = new Database(join(dir, 'msgd.db'));
    db.transaction(() => {
      db.prepare(`UPDATE messages SET send_at = ? WHERE status = 'scheduled'`).run(sendAt);
      db.prepare(`UPDATE jobs SET run_at = ? WHERE kind = 'message.dispatch'`).run(sendAt);
    })();
    db.close();
  }
  const msgd = await startMsgd(dir, port, { MSGD_CONFIG: cfg });
  const readyLate = Date.now() - sendAt;
  // Pinned (src/db/pin.ts): a statement left to the collector aborts Node >= 24.19.
  const { pinConnection } = await dist('db/pin.js');
  const db = pinConnection(new Database(join(dir, 'msgd.db'), { readonly: true }));
  const sentCount = db.prepare(`SELECT COUNT(*) AS n FROM messages WHERE status = 'sent'`);
  const deadline = Date.now() + Math.max(120_000, count * 2);
  let sent = 0;
  while (sent < count && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    sent = sentCount.get().n;
  }
  const span = db
    .prepare(`SELECT MIN(sent_at) AS first, MAX(sent_at) AS last FROM messages WHERE status = 'sent'`)
    .get();
  const rss = peakRssMb(msgd.pid);
  db.close();
  await stop(msgd);
  await stop(provider.p);
  rmSync(dir, { recursive: true, force: true });
  rmSync(`${dir}.json`, { force: true });
  const seconds = (span.last - sendAt) / 1000;
  return {
    sent,
    seconds,
    rate: sent / seconds,
    early: span.first < sendAt,
    firstAfterMs: span.first - sendAt,
    readyLate,
    rss,
  };
}

/** The store of the list run: `count` settled messages and `scheduled` of them waiting, spread over the ids. */
async function listStore(dir, count, scheduled) {
  const customers = Math.max(10, Math.floor(count / 50));
  const { token, people, now, span } = await seed(dir, count, customers);
  const db = new Database(join(dir, 'msgd.db'));
  const partnerId = db.prepare('SELECT id FROM partners LIMIT 1').get().id;
  const msg = db.prepare(
    `INSERT INTO messages (id, partner_id, direction, channel_type, conversation_id, contact_id, "to", "from", content, status,
       provider_id_indexed, price, segments, send_at, created_at, updated_at)
     VALUES (?, ?, 'outbound', ?, ?, ?, ?, '+15550001111', ?, 'scheduled', 0, 7500, 1, ?, ?, ?)`,
  );
  db.transaction(() => {
    for (let i = 0; i < scheduled; i++) {
      const t = now - span + Math.floor(((i + 0.5) / scheduled) * span);
      const p = people[(i * 104729) % people.length];
      const text = `{"kind":"text","text":"Your appointment ${i} is tomorrow at 9:00."}`;
      msg.run(idAt('msg', t), partnerId, p.channel, p.cv, p.ct, p.address, text, now + 86_400_000, t, t);
    }
  })();
  db.close();
  return token;
}

export async function run({ print, seconds = 5 }) {
  const results = {};
  const count = Number(process.env.BENCH_SCHEDULED ?? 100_000);
  const leadMs = Number(process.env.BENCH_SCHEDULED_LEAD_MS ?? 10_000);

  // 1. The same-second burst, then the same count queued at once.
  {
    const b = (results.burst = await burstRun(count, leadMs));
    print(
      `dispatch, ${fmt(count)} scheduled for one second, 0 ms provider  ${fmt(b.rate)} msg/s  (${fmt(b.sent)} sent, last ${fmt(b.seconds, 1)} s after send_at; first ${fmt(b.firstAfterMs)} ms after; ${b.early ? 'SOME SENT EARLY' : 'none early'}${b.readyLate > 0 ? `; msgd ready ${fmt(b.readyLate)} ms after send_at: raise BENCH_SCHEDULED_LEAD_MS` : ''})  peak RSS ${fmt(b.rss, 1)} MB`,
    );
    const q = (results.queued = await dispatchRun(0, count, 256));
    print(
      `dispatch, ${fmt(count)} queued at once, 0 ms provider          ${fmt(q.rate)} msg/s  (${fmt(q.sent)} sent)  peak RSS ${fmt(q.rss, 1)} MB;  scheduled / queued ${fmt((b.rate / q.rate) * 100, 1)} %`,
    );
  }

  // 2. The scheduled list from its partial index, beside a status the list checks row by row.
  {
    const total = Number(process.env.BENCH_SCHEDULED_LIST_MESSAGES ?? 200_000);
    const waiting = Number(process.env.BENCH_SCHEDULED_WAITING ?? 1000);
    const dir = tmp();
    const token = await listStore(dir, total, waiting);
    const port = await freePort();
    const msgd = await startMsgdV1(dir, port);
    const headers = { authorization: `Bearer ${token}` };
    const url = `http://127.0.0.1:${port}`;
    try {
      for (const status of ['scheduled', 'queued']) {
        const probe = await fetch(`${url}/v1/messages?limit=50&status=${status}`, { headers });
        const page = await probe.json();
        if (probe.status !== 200)
          throw new Error(`probe failed: ${probe.status} ${JSON.stringify(page).slice(0, 200)}`);
        const r = await load(url, () => ({ path: `/v1/messages?limit=50&status=${status}`, headers }), {
          seconds,
          method: 'GET',
          connections: 10,
        });
        results[`list ${status}`] = { ...r, page: page.data.length };
        print(
          `GET /v1/messages?status=${status.padEnd(9)} 10 conn  ${fmt(r.rps)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  (${fmt(r.statuses[200] ?? 0)} x 200 of ${fmt(r.requests)}; first page holds ${page.data.length} of 50; ${fmt(total + waiting)} messages, ${fmt(waiting)} scheduled)`,
        );
      }
    } finally {
      await stop(msgd);
      rmSync(dir, { recursive: true, force: true });
    }
  }

  // 3. The send accept rate with and without send_at (job loop stopped, as the send bench).
  {
    const provider = await startProvider(0);
    for (const scheduled of [false, true]) {
      const dir = tmp();
      const token = await setup(dir, provider.url);
      const cfg = await writeConfig(dir, 256);
      const port = await freePort();
      const msgd = await startMsgd(dir, port, { MSGD_CONFIG: cfg }, { acceptOnly: true });
      const sendAt = new Date(Date.now() + 3_600_000).toISOString();
      let n = 0;
      const r = await load(
        `http://127.0.0.1:${port}`,
        () => ({
          path: '/api/send-sms.php',
          body: JSON.stringify({ to: recipient(n), text: `bench ${n++}`, ...(scheduled ? { send_at: sendAt } : {}) }),
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        }),
        { seconds },
      );
      const rss = peakRssMb(msgd.pid);
      await stop(msgd);
      rmSync(dir, { recursive: true, force: true });
      rmSync(`${dir}.json`, { force: true });
      results[scheduled ? 'acceptScheduled' : 'accept'] = { ...r, rss };
      print(
        `send API /api/send-sms.php ${scheduled ? 'with send_at   ' : 'without send_at'} (50 conn)  ${fmt(r.rps)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  (${fmt(r.statuses[200] ?? 0)} x 200 of ${fmt(r.requests)}; ${fmt(RECIPIENTS)} recipients; accepting only)  peak RSS ${fmt(rss, 1)} MB`,
      );
    }
    await stop(provider.p);
    const a = results.accept;
    const s = results.acceptScheduled;
    print(
      `  with send_at / without                ${fmt((s.rps / a.rps) * 100, 1)} % of the rate, p99 ${fmt(s.p99 / a.p99, 2)}x`,
    );
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run({ print: (l) => process.stdout.write(l + '\n'), seconds: Number(process.env.BENCH_SECONDS ?? 5) });
}
