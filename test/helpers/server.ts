import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config/load.js';
import { startServer, type Server } from '../../src/server.js';
import type { CoreCtx } from '../../src/core/context.js';
import { createOutbound, type CreateOutboundInput, insertMessageIn, type MessageRow } from '../../src/core/messages.js';
import { findOrCreateContactIn } from '../../src/core/contacts.js';
import { touchConversationIn } from '../../src/core/conversations.js';
import { debitIn } from '../../src/core/ledger.js';
import type { Queryable } from '../../src/db/query.js';
import { newId } from '../../src/lib/ids.js';
import { createPartner, setPartnerLimits } from '../../src/core/partners.js';
import { issueToken } from '../../src/core/tokens.js';
import { addGateway } from '../../src/core/gateways.js';
import { assignChannel } from '../../src/core/channels.js';
import { topup } from '../../src/core/ledger.js';
import { setPrice } from '../../src/core/prices.js';
import { parseMoney } from '../../src/lib/money.js';
import { postWebhook } from '../fakes/webhook-senders.js';
import { testClock, type TestClock } from './clock.js';

export function tmpDir(prefix = 'msgd-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface TestServer extends Server {
  dataDir: string;
  logs: string[];
  ctx: CoreCtx;
  /** msgd's clock: advance() it instead of sleeping until something expires. */
  clock: TestClock;
  /**
   * What a msgctl run needs besides --data-dir to reach this msgd's store: on PostgreSQL its
   * MSGD_DATABASE_URL and MSGD_MASTER_KEY, on SQLite nothing (`runCli(args, { dataDir, env })`).
   */
  storeEnv: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * The store startTestServer gives msgd: SQLite unless MSGD_TEST_STORE=postgres (set by
 * config/vitest.pg.config.ts), which gives each server a database of its own at msgd's current
 * schema in the run's PostgreSQL (empty: a copy of the migrated template, or one a stopped
 * server gave back, emptied), and a random master key.
 */
export const serverStore: 'sqlite' | 'postgres' = process.env.MSGD_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

/**
 * A real msgd (HTTP on 127.0.0.1:0, job loop, cron) over a fresh temp data dir, or on
 * PostgreSQL (serverStore) an empty database, given back by stop(). A test that brings its own
 * data directory (opts.dataDir) or database (env.MSGD_DATABASE_URL) keeps it.
 */
export async function startTestServer(
  overrides: Record<string, unknown> = {},
  opts: { dataDir?: string; env?: NodeJS.ProcessEnv; clock?: TestClock } = {},
): Promise<TestServer> {
  const clock = opts.clock ?? testClock();
  const dataDir = opts.dataDir ?? tmpDir();
  let env: NodeJS.ProcessEnv = opts.env ?? {};
  let dropDatabase: (() => Promise<void>) | undefined;
  if (serverStore === 'postgres' && !opts.dataDir && !env.MSGD_DATABASE_URL) {
    // Imported here: test/pg/ reads the run's cluster, which only the PostgreSQL run has. The
    // database is one a stopped server gave back, emptied, where there is one (test/pg/reuse.ts).
    const { takeEmptyDatabase } = await import('../pg/reuse.js');
    const db = await takeEmptyDatabase('server');
    dropDatabase = db.release;
    env = { MSGD_MASTER_KEY: randomBytes(32).toString('hex'), ...env, MSGD_DATABASE_URL: db.url };
  }
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const config = loadConfig({
    env,
    dataDir,
    overrides: { 'server.port': 0, 'demo.enabled': false, 'log.level': 'info', ...overrides },
  });
  const server = await startServer({
    config,
    logDestination: sink,
    env,
    print: () => {},
    now: clock.now,
  });
  return {
    ...server,
    dataDir,
    logs,
    ctx: server.rt.ctx,
    clock,
    storeEnv: storeEnvOf(env),
    async stop() {
      await server.close();
      await dropDatabase?.();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function storeEnvOf(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ['MSGD_DATABASE_URL', 'MSGD_MASTER_KEY'] as const) if (env[k]) out[k] = env[k];
  return out;
}

export interface KeptStore {
  /** Pass both to every startTestServer that is to find the same data: `{ dataDir, env }`. */
  dataDir: string;
  env: NodeJS.ProcessEnv;
  /** Removes the data directory, and on PostgreSQL gives the database back (test/pg/reuse.ts). */
  drop(): Promise<void>;
}

/**
 * A store that outlives one msgd, for a test that stops msgd and starts another on the same
 * data: a data directory, and on PostgreSQL (serverStore) a database at msgd's current schema
 * with a master key as well.
 */
export async function keptStore(): Promise<KeptStore> {
  const dataDir = tmpDir();
  const removeDir = async () => rmSync(dataDir, { recursive: true, force: true });
  if (serverStore !== 'postgres') return { dataDir, env: {}, drop: removeDir };
  const { takeEmptyDatabase } = await import('../pg/reuse.js');
  const db = await takeEmptyDatabase('kept');
  return {
    dataDir,
    env: { MSGD_MASTER_KEY: randomBytes(32).toString('hex'), MSGD_DATABASE_URL: db.url },
    async drop() {
      await db.release();
      await removeDir();
    },
  };
}

export interface PartnerSetup {
  partnerId: string;
  slug: string;
  token: string;
}

/** A partner with a token, optional funds and prices. */
export async function setupPartner(
  ctx: CoreCtx,
  opts: {
    slug?: string;
    scopes?: string;
    balance?: string;
    credit?: string;
    prices?: Record<string, string>;
    rateLimitPerMinute?: number;
  } = {},
): Promise<PartnerSetup> {
  const slug = opts.slug ?? `p${Math.random().toString(36).slice(2, 10)}`;
  const p = await createPartner(
    ctx,
    { slug, name: slug, creditLimit: opts.credit ? parseMoney(opts.credit) : 0 },
    'test',
  );
  if (opts.rateLimitPerMinute !== undefined)
    await setPartnerLimits(ctx, p.id, { rateLimitPerMinute: opts.rateLimitPerMinute }, 'test');
  if (opts.balance && parseMoney(opts.balance) > 0) await topup(ctx, p.id, parseMoney(opts.balance), null, 'test');
  for (const [channel, amount] of Object.entries(opts.prices ?? {})) {
    await setPrice(ctx, { channel, amount: parseMoney(amount), partner: p.id }, 'test');
  }
  const { secret } = await issueToken(ctx, { partner: p.id, name: 'test', scopes: opts.scopes ?? '*' }, 'test');
  return { partnerId: p.id, slug, token: secret };
}

/** Add a gateway and assign it to a partner for one channel type. */
export async function connect(
  ctx: CoreCtx,
  partnerId: string,
  gw: { kind: string; name?: string; settings?: Record<string, unknown>; secrets?: Record<string, string> },
  type: string,
  sender?: string,
) {
  const g = await addGateway(
    ctx,
    {
      kind: gw.kind,
      name: gw.name ?? `${gw.kind}-${Math.random().toString(36).slice(2, 8)}`,
      settings: gw.settings,
      secrets: gw.secrets,
    },
    'test',
  );
  const ch = await assignChannel(ctx, { partner: partnerId, gateway: g.id, type, sender }, 'test');
  return { gateway: g, channel: ch };
}

/** POST JSON with a bearer token; returns status, headers and parsed body. */
export async function postJson(url: string, body: unknown, token?: string, headers: Record<string, string> = {}) {
  const r = await postWebhook(url, typeof body === 'string' ? body : JSON.stringify(body), {
    'content-type': 'application/json',
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...headers,
  });
  return { status: r.status, headers: r.headers, body: r.json, text: r.text };
}

/**
 * An outbound SMS stored as the send path stores it (message, contact, conversation; no
 * debit, no job): for tests that set the scene in the database directly.
 */
export function storeOutboundSms(
  ctx: CoreCtx,
  partnerId: string,
  channel: { id: string; gateway_id: string; sender: string | null },
  opts: { to?: string; text?: string; price?: number } = {},
): MessageRow {
  return createOutbound(ctx, {
    partnerId,
    channel: { id: channel.id, type: 'sms', gatewayId: channel.gateway_id, sender: channel.sender ?? '' },
    to: opts.to ?? '+14155550123',
    content: { kind: 'text', text: opts.text ?? 'hi' },
    price: opts.price ?? 1000,
    segments: 1,
    actor: 'test',
    lowBalanceThreshold: null,
  });
}

/**
 * storeOutboundSms on either store (through ctx.store): the message queued (scheduled with
 * `sendAt`), debited, its contact and conversation, in one transaction; no job.
 */
export function outboundSms(
  ctx: CoreCtx,
  partnerId: string,
  channel: { id: string; gateway_id: string; sender: string | null },
  opts: { to?: string; text?: string; price?: number; sendAt?: number } = {},
): Promise<MessageRow> {
  return ctx.store.transaction((tx) =>
    storeOutboundIn(tx, ctx, {
      partnerId,
      channel: { id: channel.id, type: 'sms', gatewayId: channel.gateway_id, sender: channel.sender ?? '' },
      to: opts.to ?? '+14155550123',
      content: { kind: 'text', text: opts.text ?? 'hi' },
      price: opts.price ?? 1000,
      sendAt: opts.sendAt,
    }),
  );
}

/**
 * An outbound message as the send path stores it, in the caller's store transaction `tx`, on
 * either store: debited (a price of 0 writes no ledger entry), its contact and conversation,
 * queued (scheduled with `sendAt`); no job.
 */
export async function storeOutboundIn(
  tx: Queryable,
  ctx: CoreCtx,
  input: Pick<CreateOutboundInput, 'partnerId' | 'channel' | 'to' | 'content' | 'price' | 'sendAt'>,
): Promise<MessageRow> {
  const id = newId('msg');
  if (input.price > 0) await debitIn(tx, ctx, input.partnerId, input.price, id, 'test');
  const { contact } = await findOrCreateContactIn(tx, ctx, input.partnerId, input.channel.type, input.to);
  const conv = await touchConversationIn(tx, ctx, input.partnerId, contact.id, input.channel.type, input.channel.id);
  const now = ctx.now();
  const row: MessageRow = {
    id,
    partner_id: input.partnerId,
    direction: 'outbound',
    channel_type: input.channel.type,
    channel_id: input.channel.id,
    gateway_id: input.channel.gatewayId,
    conversation_id: conv.id,
    contact_id: contact.id,
    to: input.to,
    from: input.channel.sender,
    content: JSON.stringify(input.content),
    status: input.sendAt === undefined ? 'queued' : 'scheduled',
    provider_message_id: null,
    provider_id_indexed: 1,
    price: input.price,
    segments: 1,
    error_code: null,
    error_message: null,
    dispatch_uncertain: 0,
    dispatch_in_flight: 0,
    refunded: 0,
    sent_at: null,
    created_at: now,
    updated_at: now,
    deleted_at: null,
    send_at: input.sendAt ?? null,
  };
  await insertMessageIn(tx, row);
  return row;
}
