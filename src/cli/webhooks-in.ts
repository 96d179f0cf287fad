import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { gatewayNames, listGatewaySummaries } from '../core/gateways.js';
import {
  listWebhookLog,
  newestWebhookLogId,
  pendingWebhookLogIds,
  settledWebhookLogs,
  webhookLogJson,
  type WebhookLogFilter,
  type WebhookLogRow,
} from '../core/webhook-log.js';
import { WEBHOOK_PROVIDERS } from '../providers/webhooks.js';
import { newestAttemptId, recentAttempts, type RecentAttempt } from '../webhooks-out/store.js';
import { positiveInt } from './args.js';
import { globalsOf, openCli, withCli, type Cli } from './context.js';
import { UsageError } from './errors.js';
import { reprocessWebhooks } from '../webhooks-in/reprocess.js';
import { examples } from './help.js';
import type { CliWritable } from './io.js';
import { table, terminalSafe, when, type Result } from './output.js';
import { safeLine } from '../lib/terminal-text.js';
import { iso } from '../lib/time.js';

// msgctl webhooks log: the operator's "tail the provider webhook log". Without --follow a
// command like any other (Result, text or --json); with --follow it streams, one line (or
// one JSON object per line) per webhook, until Ctrl-C.

export interface WebhookLogDeps {
  /** Where --follow streams (the run's stdout by default). */
  out?: CliWritable;
  /** How often --follow looks for new rows. */
  pollMs?: number;
  /** Ends --follow; the run's signal, else SIGINT, by default. */
  signal?: AbortSignal;
}

interface LogOpts {
  follow?: boolean;
  provider?: string;
  gateway?: string;
  limit: number;
  failed?: boolean;
  body?: boolean;
  outbound?: boolean;
}

const PROVIDERS = [...WEBHOOK_PROVIDERS, 'unknown'];
/** A webhook still being processed is held back this long, so its line can show the outcome. */
const HOLD_PENDING_MS = 5000;
/** How far back --follow looks, at start, for rows still pending (they settle within about a minute). */
const PENDING_LOOKBACK_MS = 15 * 60_000;

type Row = WebhookLogRow & { body_bytes?: number | null };

const isFailed = (r: Row) => r.verification === 'failed' || ['rejected', 'unroutable', 'error'].includes(r.processing);

async function filterOf(cli: Cli, opts: LogOpts): Promise<Omit<WebhookLogFilter, 'limit'>> {
  if (opts.provider && !PROVIDERS.includes(opts.provider)) {
    throw new UsageError(`--provider must be one of ${PROVIDERS.join(', ')}`);
  }
  let gatewayId: string | undefined;
  if (opts.gateway) {
    // By name or id; an id no longer in the gateways table still names its old rows.
    gatewayId =
      (await listGatewaySummaries(cli.ctx)).find((g) => g.id === opts.gateway || g.name === opts.gateway)?.id ??
      opts.gateway;
  }
  return { provider: opts.provider, gatewayId, failed: opts.failed, withBody: opts.body };
}

const noteOf = (r: Row) => r.verification_reason ?? r.error;
const clip = (s: string | null, n: number) => (s && s.length > n ? `${s.slice(0, n - 1)}…` : s);

function line(r: Row, names: Map<string, string>): string {
  const gw = r.gateway_id ? (names.get(r.gateway_id) ?? r.gateway_id) : '-';
  const parts = [
    when(r.received_at),
    r.id,
    r.provider.padEnd(9),
    gw.padEnd(16),
    r.verification.padEnd(7),
    r.processing.padEnd(10),
    r.path,
  ];
  const note = noteOf(r);
  // One webhook, one line: a provider's error text with a newline never starts a fake row.
  return safeLine(parts.join('  ') + (note ? `  ${note}` : ''));
}

function withBody(text: string, r: Row, on: boolean | undefined): string {
  return on && r.body ? `${text}\n${r.body.toString('utf8').replace(/^/gm, '    ')}` : text;
}

type Attempt = RecentAttempt;

function attemptJson(a: Attempt) {
  return {
    direction: 'out',
    id: a.id,
    time: iso(a.created_at),
    event_id: a.event_id,
    event_type: a.event_type,
    endpoint_id: a.endpoint_id,
    url: a.url,
    attempt: a.attempt_no,
    status_code: a.status_code,
    duration_ms: a.duration_ms,
    error: a.error,
  };
}

function attemptLine(a: Attempt): string {
  const outcome = a.status_code ? String(a.status_code) : 'no answer';
  return safeLine(
    [
      when(a.created_at),
      `out #${a.attempt_no}`.padEnd(9),
      (a.event_type ?? '-').padEnd(16),
      outcome.padEnd(9),
      `${a.duration_ms} ms`,
      a.url,
    ].join('  ') + (a.error ? `  ${a.error}` : ''),
  );
}

/** --outbound: provider webhooks in and deliveries to partner endpoints, one timeline. */
async function listBoth(cli: Cli, opts: LogOpts): Promise<Result> {
  const limit = Math.min(opts.limit, 10_000);
  const inbound = (await listWebhookLog(cli.ctx, { ...(await filterOf(cli, opts)), limit, latest: true })) as Row[];
  const outbound = await recentAttempts(cli.ctx, { limit });
  const names = await gatewayNames(cli.ctx);
  const merged = [
    ...inbound.map((r) => ({
      at: r.received_at,
      json: { direction: 'in', ...webhookLogJson(r) },
      text: `${when(r.received_at)}  in         ${line(r, names).slice(when(r.received_at).length + 2)}`,
    })),
    ...outbound.map((a) => ({ at: a.created_at, json: attemptJson(a), text: attemptLine(a) })),
  ]
    .sort((x, y) => x.at - y.at)
    .slice(-limit);
  return {
    json: { data: merged.map((m) => m.json) },
    text: merged.length ? merged.map((m) => m.text).join('\n') : 'No webhooks in or out yet.',
  };
}

async function list(cli: Cli, opts: LogOpts): Promise<Result> {
  if (opts.outbound) return listBoth(cli, opts);
  const rows = (await listWebhookLog(cli.ctx, {
    ...(await filterOf(cli, opts)),
    limit: Math.min(opts.limit, 10_000),
    latest: true,
  })) as Row[];
  const names = await gatewayNames(cli.ctx);
  let text: string;
  if (rows.length === 0)
    text =
      opts.provider || opts.gateway || opts.failed
        ? 'No matching webhooks in the log.'
        : 'No provider webhooks logged yet.';
  else if (opts.body) text = rows.map((r) => withBody(line(r, names), r, true)).join('\n');
  else {
    text = table(
      ['time (utc)', 'id', 'provider', 'gateway', 'verified', 'processing', 'path', 'note'],
      rows.map((r) => [
        when(r.received_at),
        r.id,
        r.provider,
        r.gateway_id ? (names.get(r.gateway_id) ?? r.gateway_id) : null,
        r.verification,
        r.processing,
        r.path,
        clip(noteOf(r), 100),
      ]),
    );
  }
  return { json: { data: rows.map(webhookLogJson) }, text };
}

async function follow(cli: Cli, opts: LogOpts, json: boolean, deps: WebhookLogDeps): Promise<void> {
  const out = deps.out ?? cli.io.stdout;
  const pollMs = deps.pollMs ?? 500;
  const filter = await filterOf(cli, opts);
  // --failed is decided after a row settles: a pending row may still end unroutable.
  const sqlFilter = { ...filter, failed: false };
  let names = await gatewayNames(cli.ctx);
  const print = (r: Row) => {
    if (opts.failed && !isFailed(r)) return;
    out.write(
      json ? `${JSON.stringify(webhookLogJson(r))}\n` : `${terminalSafe(withBody(line(r, names), r, opts.body))}\n`,
    );
  };
  const initial = (await listWebhookLog(cli.ctx, {
    ...filter,
    limit: Math.min(opts.limit, 10_000),
    latest: true,
  })) as Row[];
  for (const r of initial) print(r);
  let cursor = (await newestWebhookLogId(cli.ctx)) ?? '';
  let attemptCursor = (await newestAttemptId(cli.ctx)) ?? 0;

  const ctrl = new AbortController();
  const onSigint = () => ctrl.abort();
  const given = deps.signal ?? cli.io.signal;
  if (!given) process.once('SIGINT', onSigint);
  const signal = given ?? ctrl.signal;
  // Rows passed while still pending (a status waiting for its message can take half a
  // minute): looked at again each poll, and printed once more when they settle.
  const watching = new Set<string>();
  // Rows already pending when we started are behind the cursor: watch them too, or a status
  // waiting for its message would never be shown settled (and never at all with --failed).
  // Pending rows are recent (processing waits at most about a minute), so only those are read.
  for (const id of await pendingWebhookLogIds(cli.ctx, Date.now() - PENDING_LOOKBACK_MS, cursor)) watching.add(id);
  try {
    while (!signal.aborted) {
      await sleep(pollMs, undefined, { signal }).catch(() => {});
      if (signal.aborted) break;
      const rows = (await listWebhookLog(cli.ctx, { ...sqlFilter, afterId: cursor, limit: 1000 })) as Row[];
      if (rows.some((r) => r.gateway_id && !names.has(r.gateway_id))) names = await gatewayNames(cli.ctx);
      if (watching.size) {
        for (const r of await settledWebhookLogs(cli.ctx, [...watching].slice(0, 500))) {
          watching.delete(r.id);
          print(r);
        }
      }
      const now = Date.now();
      for (const r of rows) {
        if (r.processing === 'pending' && now - r.received_at < HOLD_PENDING_MS) break;
        if (r.processing === 'pending' && watching.size < 10_000) watching.add(r.id);
        if (!(opts.failed && r.processing === 'pending')) print(r);
        cursor = r.id;
      }
      if (opts.outbound && ((await newestAttemptId(cli.ctx)) ?? 0) > attemptCursor) {
        const fresh = (await recentAttempts(cli.ctx, { limit: 1000 })).filter((a) => a.id > attemptCursor).reverse();
        for (const a of fresh)
          out.write(json ? `${JSON.stringify(attemptJson(a))}\n` : `${terminalSafe(attemptLine(a))}\n`);
        if (fresh.length) attemptCursor = fresh[fresh.length - 1].id;
      }
    }
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/**
 * Process stored webhooks again (src/webhooks-in/reprocess.ts), after the operator fixed what
 * made them unroutable: the provider got its 200 and will not resend.
 */
export async function reprocess(
  cli: Cli,
  ids: string[],
  opts: { unroutable?: boolean; since?: string },
): Promise<Result> {
  if (ids.length === 0 && !opts.unroutable)
    throw new UsageError('give webhook ids (pwh_…), or --unroutable to take every unroutable one (with --since)');
  if (ids.length > 0 && opts.unroutable) throw new UsageError('give webhook ids or --unroutable, not both');
  let since = 0;
  if (opts.since !== undefined) {
    since = Date.parse(opts.since);
    if (!Number.isFinite(since))
      throw new UsageError('--since must be a date or time, e.g. 2026-11-20 or 2026-11-20T10:00:00Z');
  }
  const queued = await reprocessWebhooks(cli.ctx, opts.unroutable ? { unroutableSince: since } : { ids });
  return {
    json: { queued },
    text: queued.length
      ? `${queued.length} webhook(s) queued to be processed again; a running msgd does so within a second (see msgctl webhooks log).`
      : 'No unroutable webhooks to process again.',
  };
}

/** Adds `log` to `msgctl webhooks` (beside the outbound commands of src/cli/webhooks-out.ts). */
export function registerWebhookLogCommands(webhooks: Command, deps: WebhookLogDeps = {}): Command {
  webhooks
    .command('log')
    .description(
      'the provider webhook log: every POST to /api/webhook*.php with its verification and processing outcome',
    )
    .option('--follow', 'keep printing webhooks as they arrive, until Ctrl-C')
    .option('--provider <p>', `only one provider: ${PROVIDERS.join(', ')}`)
    .option('--gateway <g>', 'only one gateway (name or id)')
    .option('--limit <n>', 'how many of the latest to show first', positiveInt, 20)
    .option('--failed', 'only what went wrong: bad signature, rejected, unroutable, error')
    .option('--body', 'include the raw body of each webhook')
    .option('--outbound', 'also show delivery attempts to partner endpoints, in the same timeline')
    .addHelpText(
      'after',
      examples(
        'msgctl webhooks log',
        'msgctl webhooks log --follow --provider whatsapp',
        'msgctl webhooks log --failed --limit 100 --json',
        'msgctl webhooks log --gateway twilio-main --body',
        'msgctl webhooks log --outbound --follow',
      ),
    )
    .action(async (opts: LogOpts, cmd: Command) => {
      if (!opts.follow) return withCli(list)(opts, cmd);
      const globals = globalsOf(cmd);
      const cli = await openCli(globals);
      try {
        await follow(cli, opts, !!globals.json, deps);
      } finally {
        await cli.close();
      }
    });
  webhooks
    .command('reprocess')
    .description(
      'process stored provider webhooks again (unroutable or errored ones), after fixing a channel or gateway',
    )
    .argument('[ids...]', 'webhook ids (pwh_…, as in X-Msgd-Webhook-Id and the log)')
    .option('--unroutable', 'every verified webhook that ended unroutable (at most 10,000 a run)')
    .option('--since <time>', 'with --unroutable: only those received since then')
    .addHelpText(
      'after',
      examples('msgctl webhooks reprocess pwh_01k…', 'msgctl webhooks reprocess --unroutable --since 2026-11-20'),
    )
    .action(withCli(reprocess));
  return webhooks;
}
