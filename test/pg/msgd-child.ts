import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openStore } from '../../src/db/open-store.js';
import { sql } from '../../src/db/sql.js';
import { gatewayKinds } from '../../src/providers/kinds.js';
import type { TwilioFake } from '../fakes/twilio.js';
import { twilioGateway } from '../helpers/gateways.js';
import { type PartnerSetup, setupPartner } from '../helpers/server.js';
import { freePort, waitFor, waitForExit } from '../helpers/wait.js';

// msgd on PostgreSQL as the operator runs it, for the crash and fault tests: `node bin/msgd`
// (the compiled dist/) in its own process with MSGD_DATABASE_URL, a master key and a config
// file; the database prepared beforehand through core's functions, as msgctl would; and the
// rows the tests assert on, read with plain SQL on a connection of the test's own.

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'msgd');

export interface PgPrepared {
  url: string;
  key: string;
  configFile: string;
  partner: PartnerSetup;
  /** A core context on the same database (the test's own pool): setup and reads. */
  ctx: CoreCtx;
  close(): Promise<void>;
}

/**
 * Migrates the database at `url` and gives it one partner (funds, an SMS price, a rate limit a
 * load cannot reach) whose SMS goes to the Twilio fake; writes msgd's config file.
 */
export async function preparePg(
  url: string,
  fake: TwilioFake,
  config: Record<string, unknown>,
  partner: { balance: string; price: string; credit?: string },
): Promise<PgPrepared> {
  const key = randomBytes(32).toString('hex');
  const env = { MSGD_DATABASE_URL: url, MSGD_MASTER_KEY: key };
  const cfg = loadConfig({ env });
  const opened = await openStore(cfg, { env });
  const ctx: CoreCtx = {
    db: opened.db,
    store: opened.store,
    masterKey: opened.masterKey,
    config: cfg,
    now: Date.now,
    gatewayKinds,
  };
  const dir = mkdtempSync(join(tmpdir(), 'msgd-pg-child-'));
  try {
    const p = await addPartner(ctx, fake, partner);
    const configFile = join(dir, 'msgd.json');
    writeFileSync(configFile, JSON.stringify(config));
    return {
      url,
      key,
      configFile,
      partner: p,
      ctx,
      close: async () => {
        rmSync(dir, { recursive: true, force: true });
        await opened.close();
      },
    };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    await opened.close();
    throw e;
  }
}

/** One more partner like preparePg's: its funds, an SMS price, its SMS through the Twilio fake. */
export async function addPartner(
  ctx: CoreCtx,
  fake: TwilioFake,
  partner: { balance: string; price: string; credit?: string },
): Promise<PartnerSetup> {
  const p = await setupPartner(ctx, {
    balance: partner.balance,
    credit: partner.credit,
    prices: { sms: partner.price },
    rateLimitPerMinute: 1_000_000,
  });
  await twilioGateway(ctx, p.partnerId, fake);
  return p;
}

export interface PgMsgd {
  child: ChildProcess;
  url: string;
  output(): string;
}

/** msgd started on the prepared database; resolves once /healthz answers. */
export async function startPgMsgd(prep: PgPrepared, env: Record<string, string> = {}): Promise<PgMsgd> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return await startOnce(prep, port, env);
    } catch (e) {
      // The port was free when asked; a test beside this one may have bound it since.
      if (attempt >= 3 || !String((e as Error).message).includes('already in use')) throw e;
    }
  }
}

async function startOnce(prep: PgPrepared, port: number, env: Record<string, string>): Promise<PgMsgd> {
  const child = spawn(process.execPath, [BIN], {
    env: {
      PATH: process.env.PATH,
      MSGD_DATABASE_URL: prep.url,
      MSGD_MASTER_KEY: prep.key,
      MSGD_PORT: String(port),
      MSGD_DEMO: 'false',
      MSGD_CONFIG: prep.configFile,
      MSGD_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const url = `http://127.0.0.1:${port}`;
  const exited = waitForExit(child, 60_000).then(
    ({ code }) => Promise.reject(new Error(`msgd exited with ${code} before it answered: ${out}`)),
    () => new Promise<never>(() => {}),
  );
  try {
    await Promise.race([
      waitFor(async () => (await fetch(`${url}/healthz`)).ok, 'msgd to answer /healthz', 30_000, 25),
      exited,
    ]);
  } catch (e) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw e;
  }
  exited.catch(() => {});
  return { child, url, output: () => out };
}

/** What a test registers is undone after it, newest first: msgd children killed, preparations closed, fakes closed. */
export function cleanupAfterEach() {
  const undo: (() => unknown)[] = [];
  afterEach(async () => {
    for (const f of undo.splice(0).reverse()) await f();
  });
  return {
    add<T>(v: T, f: (v: T) => unknown): T {
      undo.push(() => f(v));
      return v;
    },
    child(m: PgMsgd): PgMsgd {
      undo.push(async () => {
        if (m.child.exitCode !== null || m.child.signalCode !== null) return;
        m.child.kill('SIGKILL');
        await waitForExit(m.child, 5_000).catch(() => {});
      });
      return m;
    },
  };
}

export interface SendOutcome {
  status: number;
  body: any;
  retryAfter: string | null;
  ms: number;
}

/** One SMS through msgd's PHP-style API, with an Idempotency-Key; a request still open after `boundMs` fails. */
export async function sendSms(
  base: string,
  token: string,
  text: string,
  key: string,
  boundMs = 30_000,
): Promise<SendOutcome> {
  const t0 = Date.now();
  const res = await fetch(`${base}/api/send-sms.php`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'idempotency-key': key },
    body: JSON.stringify({ to: '+14155550123', text }),
    signal: AbortSignal.timeout(boundMs),
  });
  const body = await res.json();
  return { status: res.status, body, retryAfter: res.headers.get('retry-after'), ms: Date.now() - t0 };
}

export interface PgMessage {
  id: string;
  status: string;
  text: string;
  price: number;
  refunded: number;
  dispatch_uncertain: number;
  dispatch_in_flight: number;
}

/** The partner's outbound messages, their text read from the content. */
export async function messagesOf(ctx: CoreCtx, partnerId: string): Promise<PgMessage[]> {
  const rows = await ctx.store.all<Omit<PgMessage, 'text'> & { content: string }>(
    sql`SELECT id, status, content, CAST(price AS BIGINT) AS price, refunded, dispatch_uncertain, dispatch_in_flight
          FROM messages WHERE partner_id = ${partnerId} AND direction = 'outbound' ORDER BY id`,
  );
  return rows.map(({ content, ...m }) => ({
    ...m,
    price: Number(m.price),
    text: (JSON.parse(content) as { text: string }).text,
  }));
}

/**
 * Nothing half-written: every outbound message has exactly one debit of its price (and a
 * refund only when refunded), every debit and refund has its message, and the partner's
 * balance is the sum of its ledger. Returns the messages.
 */
export async function moneyProblems(ctx: CoreCtx, partnerId: string): Promise<string[]> {
  const problems: string[] = [];
  const rows = await ctx.store.all<{ id: string; price: number; refunded: number; debits: number; refunds: number }>(
    sql`SELECT m.id, CAST(m.price AS BIGINT) AS price, m.refunded,
               CAST((SELECT count(*) FROM ledger_entries l WHERE l.message_id = m.id AND l.kind = 'debit') AS BIGINT) AS debits,
               CAST((SELECT count(*) FROM ledger_entries l WHERE l.message_id = m.id AND l.kind = 'refund') AS BIGINT) AS refunds
          FROM messages m WHERE m.partner_id = ${partnerId} AND m.direction = 'outbound'`,
  );
  for (const r of rows) {
    const paidBack = Number(r.refunded) === 1 ? 1 : 0;
    if (Number(r.debits) - Number(r.refunds) !== 1 - paidBack || Number(r.debits) < 1)
      problems.push(`${r.id}: ${r.debits} debits, ${r.refunds} refunds, refunded=${r.refunded}`);
  }
  const orphans = await ctx.store.all<{ id: number; kind: string }>(
    sql`SELECT l.id, l.kind FROM ledger_entries l
         WHERE l.partner_id = ${partnerId} AND l.kind IN ('debit', 'refund')
           AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = l.message_id)`,
  );
  for (const o of orphans) problems.push(`ledger entry ${o.id} (${o.kind}) has no message`);
  const sums = await ctx.store.get<{ balance: string; total: string }>(
    sql`SELECT CAST(p.balance AS TEXT) AS balance,
               CAST(COALESCE((SELECT SUM(amount) FROM ledger_entries l WHERE l.partner_id = p.id), 0) AS TEXT) AS total
          FROM partners p WHERE p.id = ${partnerId}`,
  );
  if (sums!.balance !== sums!.total) problems.push(`balance ${sums!.balance} is not the ledger's sum ${sums!.total}`);
  return problems;
}

/** Queued or sending messages without a dispatch job: accepted, but nothing will ever send them. */
export async function strandedMessages(ctx: CoreCtx, partnerId: string): Promise<string[]> {
  const rows = await ctx.store.all<{ id: string }>(
    sql`SELECT m.id FROM messages m
         WHERE m.partner_id = ${partnerId} AND m.status IN ('queued', 'sending')
           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = 'message.dispatch' AND j.payload LIKE '%' || m.id || '%')`,
  );
  return rows.map((r) => r.id);
}
