// Send API and dispatch benchmarks: hello-world baseline, durable accept rate and
// latency at 50 connections, dispatch throughput to a 0 ms and a 20 ms provider, peak RSS.
// Sends go to 10,000 different recipients (a partner's customers), so each one finds its
// contact and conversation among many, as in production, not one hot row.
//
// The accept rate is measured with the job loop stopped (bench/msgd-accept-only.mjs), as the
// webhooks-in bench pauses processing: it is what msgd takes in and stores durably, while
// dispatch is measured on its own below. The same load with dispatch running to a 0 ms
// provider is printed too: on two cores shared with the load generator and the fake provider,
// every message dispatched at full speed takes its CPU from accepting the next.
//
// BENCH_SUPPRESSIONS=1000000 adds alternating pairs of accept runs, without and with that many
// entries on the partner's suppression list (none of them a bench recipient): the check before
// the price is one index seek, so the two must agree within noise.
import Database from 'better-sqlite3';
import { child, fmt, freePort, load, MSGD_NODE_FLAGS, peakRssMb, rateUntil, stop, tmp, verdict } from './lib.mjs';

const dist = (p) => import(new URL(`../dist/${p}`, import.meta.url));

/**
 * A data directory with a partner, a Twilio gateway at `providerUrl`, an SMS channel, a token
 * and `suppressions` suppressed recipients; `preload` messages stored through core, queued, or
 * scheduled for `sendAt` (ms) with their dispatch jobs due then, as a send with send_at stores them.
 */
export async function setup(dataDir, providerUrl, { preload = 0, sendAt, suppressions = 0 } = {}) {
  const { openDataDir } = await dist('db/datadir.js');
  const { loadConfig } = await dist('config/load.js');
  const { gatewayKinds } = await dist('providers/kinds.js');
  const { createPartner, setPartnerLimits } = await dist('core/partners.js');
  const { topup } = await dist('core/ledger.js');
  const { addGateway } = await dist('core/gateways.js');
  const { assignChannel } = await dist('core/channels.js');
  const { setPrice } = await dist('core/prices.js');
  const { issueToken } = await dist('core/tokens.js');
  const { createOutbound } = await dist('core/messages.js');
  const { JobQueue } = await dist('queue/queue.js');
  const { store } = await dist('db/query.js');
  const config = loadConfig({ env: {}, dataDir });
  const dd = openDataDir(dataDir, { create: true, env: {} });
  const ctx = { db: dd.db, store: store(dd.db), masterKey: dd.masterKey, config, now: Date.now, gatewayKinds };
  const p = await createPartner(ctx, { slug: 'bench', name: 'Bench' }, 'bench');
  // The bench measures the send API, not the limiter refusing it.
  await setPartnerLimits(ctx, p.id, { rateLimitPerMinute: 1_000_000_000 }, 'bench');
  await topup(ctx, p.id, 1_000_000_000_000, 'bench funds', 'bench');
  const gw = await addGateway(
    ctx,
    {
      kind: 'twilio',
      name: 'bench-twilio',
      settings: { base_url: providerUrl, account_sid: 'AC00000000000000000000000000000000', rate_per_second: 100000 },
      secrets: { auth_token: 'bench-auth-token' },
    },
    'bench',
  );
  const ch = await assignChannel(ctx, { partner: p.id, gateway: gw.id, type: 'sms', sender: '+15017250604' }, 'bench');
  await setPrice(ctx, { channel: 'sms', amount: 7500 }, 'bench');
  const { secret } = await issueToken(ctx, { partner: p.id, name: 'bench', scopes: '*' }, 'bench');
  if (suppressions > 0) {
    // Straight into the table, as years of STOPs and bounces would leave it: half SMS numbers
    // (none a bench recipient), half email addresses.
    const { newId } = await dist('lib/ids.js');
    const ins = dd.db.sqlite.prepare(
      `INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, group_id, source, detail, created_at)
       VALUES (?, ?, ?, ?, ?, ?, '', 'bench', NULL, ?)`,
    );
    const batch = dd.db.sqlite.transaction((from, n) => {
      for (let i = from; i < from + n; i++) {
        if (i % 2) ins.run(newId('sup'), p.id, 'email', `c${i}@example.org`, '', 'hard_bounce', Date.now());
        else
          ins.run(
            newId('sup'),
            p.id,
            'sms',
            `+1646${String(i).padStart(7, '0')}`,
            ch.sender,
            'opt_out_keyword',
            Date.now(),
          );
      }
    });
    for (let done = 0; done < suppressions; done += 20_000) batch(done, Math.min(20_000, suppressions - done));
  }
  if (preload > 0) {
    const queue = new JobQueue(dd.db);
    const insert = dd.db.sqlite.transaction((n) => {
      for (let i = 0; i < n; i++) {
        const m = createOutbound(ctx, {
          partnerId: p.id,
          channel: { id: ch.id, type: 'sms', gatewayId: gw.id, sender: ch.sender },
          to: recipient(i),
          content: { kind: 'text', text: `bench message ${i}` },
          price: 7500,
          segments: 1,
          actor: 'bench',
          lowBalanceThreshold: null,
          sendAt,
        });
        queue.enqueue({ kind: 'message.dispatch', payload: { message_id: m.id }, runAt: sendAt });
      }
    });
    for (let done = 0; done < preload; done += 5000) insert(Math.min(5000, preload - done));
  }
  dd.close();
  return secret;
}

export const RECIPIENTS = 10_000;
export const recipient = (i) => `+1415555${String(i % RECIPIENTS).padStart(4, '0')}`;

export async function startMsgd(dataDir, port, extraEnv = {}, { acceptOnly = false } = {}) {
  // info level only for the start line; the request path logs at debug.
  if (acceptOnly) {
    return child([...MSGD_NODE_FLAGS, 'bench/msgd-accept-only.mjs'], {
      env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: '', MSGD_DATA_DIR: dataDir, MSGD_PORT: String(port), ...extraEnv },
      ready: /msgd listening/,
    });
  }
  return child([...MSGD_NODE_FLAGS, 'bin/msgd', '--data-dir', dataDir, '--port', String(port), '--no-demo'], {
    env: { MSGD_LOG_LEVEL: 'info', MSGD_CONFIG: '', ...extraEnv },
    ready: /msgd listening|msgd: /,
  });
}

export async function startProvider(latencyMs) {
  const port = await freePort();
  const p = await child(['bench/fake-provider.mjs'], { env: { PORT: String(port), LATENCY_MS: String(latencyMs) } });
  return { p, url: `http://127.0.0.1:${port}` };
}

export function writeConfig(dir, concurrency) {
  const file = `${dir}.json`;
  const cfg = { jobs: { concurrency }, dispatch: { connectionsPerOrigin: concurrency } };
  return import('node:fs').then((fs) => {
    fs.writeFileSync(file, JSON.stringify(cfg));
    return file;
  });
}

export async function dispatchRun(latencyMs, count, concurrency) {
  const provider = await startProvider(latencyMs);
  const dir = tmp();
  await setup(dir, provider.url, { preload: count });
  const cfg = await writeConfig(dir, concurrency);
  const port = await freePort();
  const t0 = performance.now();
  const msgd = await startMsgd(dir, port, { MSGD_CONFIG: cfg });
  // Pinned (src/db/pin.ts): a statement left to the collector aborts Node >= 24.19.
  const { pinConnection } = await dist('db/pin.js');
  const db = pinConnection(new Database(`${dir}/msgd.db`, { readonly: true }));
  const count1 = db.prepare(`SELECT COUNT(*) AS n FROM messages WHERE status = 'sent'`);
  const { done: sent, rate, endedAt } = await rateUntil(() => count1.get().n, count, 120_000);
  const rss = peakRssMb(msgd.pid);
  db.close();
  await stop(msgd);
  await stop(provider.p);
  return { sent, rate, totalSeconds: (endedAt - t0) / 1000, rss };
}

/**
 * The floor of the 20 ms figure: a bare undici client (no database, no queue) keeping
 * `concurrency` requests in flight against the same fake provider, from this process. Node's
 * 20 ms timers fire late and loopback HTTP costs something, so even this stays under the bound.
 */
export async function bareClientRun(latencyMs, concurrency, seconds) {
  const { Agent, request } = await import('undici');
  const provider = await startProvider(latencyMs);
  const agent = new Agent({ connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
  const url = `${provider.url}/2010-04-01/Accounts/AC00000000000000000000000000000000/Messages.json`;
  const body = 'To=%2B14155550123&From=%2B15017250604&Body=bench';
  let done = 0;
  const end = Date.now() + seconds * 1000;
  const lane = async () => {
    while (Date.now() < end) {
      const r = await request(url, {
        method: 'POST',
        dispatcher: agent,
        body,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      await r.body.json();
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, lane));
  const rate = done / ((performance.now() - t0) / 1000);
  await agent.close();
  await stop(provider.p);
  return rate;
}

export async function run({ print, seconds = 5 }) {
  const results = {};

  // 1. Baseline
  {
    const port = await freePort();
    const hello = await child(['bench/hello.mjs'], { env: { PORT: String(port) } });
    const body = JSON.stringify({ to: '+14155550123', text: 'Hello from the benchmark' });
    results.hello = await load(
      `http://127.0.0.1:${port}`,
      () => ({ path: '/hello', body, headers: { 'content-type': 'application/json' } }),
      { seconds },
    );
    await stop(hello);
    print(
      `fastify hello-world POST (50 conn)      ${fmt(results.hello.rps)} req/s   p50 ${fmt(results.hello.p50, 2)} ms  p99 ${fmt(results.hello.p99, 2)} ms`,
    );
  }

  // 2. Send API, durable (synchronous=FULL commit before every 200): accepting alone, then with
  //    dispatch running to a 0 ms provider.
  async function sendRun(acceptOnly, prepared) {
    const provider = await startProvider(0);
    const dir = prepared?.dir ?? tmp();
    const token = prepared?.token ?? (await setup(dir, provider.url));
    const cfg = await writeConfig(dir, 256);
    const port = await freePort();
    const msgd = await startMsgd(dir, port, { MSGD_CONFIG: cfg }, { acceptOnly });
    let n = 0;
    const r = await load(
      `http://127.0.0.1:${port}`,
      () => ({
        path: '/api/send-sms.php',
        body: JSON.stringify({ to: recipient(n), text: `bench ${n++}` }),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      }),
      { seconds },
    );
    const rss = peakRssMb(msgd.pid);
    await stop(msgd);
    await stop(provider.p);
    return { ...r, rss, ratio: r.rps / results.hello.rps };
  }
  {
    const r = (results.send = await sendRun(true));
    const ok = r.statuses[200] ?? 0;
    print(
      `send API /api/send-sms.php (50 conn)    ${fmt(r.rps)} req/s   p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  p99.9 ${fmt(r.p999, 2)} ms  (${fmt(ok)} x 200 of ${fmt(r.requests)}; ${fmt(RECIPIENTS)} recipients; accepting only)`,
    );
    print(
      `  ratio to baseline                     ${fmt(r.ratio * 100, 1)} %  (target >= 40 %) ${verdict(r.ratio, 0.4)}`,
    );
    print(
      `  p99                                   ${fmt(r.p99, 2)} ms (target <= 10 ms) ${verdict(r.p99, 10, 'lower')}`,
    );
    const d = (results.sendWithDispatch = await sendRun(false));
    print(
      `  same with dispatch running (0 ms)     ${fmt(d.rps)} req/s   p50 ${fmt(d.p50, 2)} ms  p99 ${fmt(d.p99, 2)} ms  (${fmt(d.ratio * 100, 1)} % of baseline; ${fmt(d.statuses[200] ?? 0)} x 200)`,
    );
  }

  // 2b. The suppression check on a long list: alternating pairs on the same two stores.
  const suppressions = Number(process.env.BENCH_SUPPRESSIONS ?? 0);
  if (suppressions > 0) {
    const none = { dir: tmp() };
    none.token = await setup(none.dir, 'http://127.0.0.1:9');
    const many = { dir: tmp() };
    const t0 = performance.now();
    many.token = await setup(many.dir, 'http://127.0.0.1:9', { suppressions });
    print(`suppression list of ${fmt(suppressions)} entries written in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    const pairs = [];
    for (let i = 0; i < 3; i++) {
      const a = await sendRun(true, none);
      const b = await sendRun(true, many);
      pairs.push([a, b]);
      print(
        `  pair ${i + 1}: no list ${fmt(a.rps)} req/s p99 ${fmt(a.p99, 2)} ms | ${fmt(suppressions)} entries ${fmt(b.rps)} req/s p99 ${fmt(b.p99, 2)} ms  (${fmt((b.rps / a.rps) * 100, 1)} %)`,
      );
    }
    const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    const ratio = median(pairs.map(([a, b]) => b.rps / a.rps));
    results.suppressions = { entries: suppressions, pairs, ratio };
    print(
      `  median ratio with the list            ${fmt(ratio * 100, 1)} %  (target: within noise, >= 95 %) ${verdict(ratio, 0.95)}`,
    );
  }

  // 3. Dispatch throughput. At 20 ms the bound is concurrency / latency: at the default 256 in
  //    flight it is above what the CPU can dispatch here, so 64 in flight (a bound within it)
  //    is run too, which shows whether the loop keeps its slots full.
  {
    const d0 = await dispatchRun(0, 40_000, 256);
    results.dispatch0 = d0;
    print(
      `dispatch, 0 ms provider                 ${fmt(d0.rate)} msg/s  (${fmt(d0.sent)} messages; target >= 10,000) ${verdict(d0.rate, 10_000)}`,
    );
    results.dispatch20 = [];
    for (const [conc, count] of [
      [256, 40_000],
      [64, 20_000],
    ]) {
      const d20 = await dispatchRun(20, count, conc);
      const bound = conc / 0.02;
      results.dispatch20.push({ ...d20, conc, bound });
      print(
        `dispatch, 20 ms provider, ${String(conc).padEnd(3)} in flight  ${fmt(d20.rate)} msg/s  (bound ${fmt(bound)} = ${conc} / 20 ms: ${fmt((d20.rate / bound) * 100, 1)} %; target >= 85 %) ${verdict(d20.rate / bound, 0.85)}`,
      );
    }
    const bareConc = 64;
    const bare = (results.bareClient20 = await bareClientRun(20, bareConc, seconds));
    print(
      `  bare undici client, ${bareConc} in flight      ${fmt(bare)} msg/s  (${fmt((bare / (bareConc / 0.02)) * 100, 1)} % of the same bound: the floor this machine and fake allow)`,
    );
    const rss = Math.max(
      results.send.rss,
      results.sendWithDispatch.rss,
      d0.rss,
      ...results.dispatch20.map((d) => d.rss),
    );
    results.rss = rss;
    const each = [
      `send ${fmt(results.send.rss, 1)}`,
      `send + dispatch ${fmt(results.sendWithDispatch.rss, 1)}`,
      `dispatch 0 ms ${fmt(d0.rss, 1)}`,
      ...results.dispatch20.map((d) => `20 ms @${d.conc} ${fmt(d.rss, 1)}`),
    ];
    print(
      `peak RSS of msgd                        ${fmt(rss, 1)} MB (target <= 150 MB) ${verdict(rss, 150, 'lower')}  (${each.join(', ')})`,
    );
  }
  return results;
}
