import type { Command } from 'commander';
import { listGateways } from '../core/gateways.js';
import { listWebhookLog, webhookLogJson, type WebhookLogFilter, type WebhookLogRow } from '../core/webhook-log.js';
import { WEBHOOK_PROVIDERS } from '../providers/webhooks.js';
import { positiveInt } from './args.js';
import { globalsOf, openCli, withCli, type Cli } from './context.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { table, when, type Result } from './output.js';

// msgctl webhooks log: the operator's "tail the provider webhook log". Without --follow a
// command like any other (Result, text or --json); with --follow it streams, one line (or
// one JSON object per line) per webhook, until Ctrl-C.

export interface WebhookLogDeps {
  /** Where --follow streams (stdout by default). */
  out?: NodeJS.WritableStream;
  /** How often --follow looks for new rows. */
  pollMs?: number;
  /** Ends --follow; SIGINT by default. */
  signal?: AbortSignal;
}

interface LogOpts {
  follow?: boolean;
  provider?: string;
  gateway?: string;
  limit: number;
  failed?: boolean;
  body?: boolean;
}

const PROVIDERS = [...WEBHOOK_PROVIDERS, 'meta', 'unknown'];
/** A webhook still being processed is held back this long, so its line can show the outcome. */
const HOLD_PENDING_MS = 5000;

type Row = WebhookLogRow & { body_bytes?: number | null };

const isFailed = (r: Row) => r.verification === 'failed' || ['rejected', 'unroutable', 'error'].includes(r.processing);

function filterOf(cli: Cli, opts: LogOpts): Omit<WebhookLogFilter, 'limit'> {
  if (opts.provider && !PROVIDERS.includes(opts.provider)) {
    throw new UsageError(`--provider must be one of ${PROVIDERS.join(', ')}`);
  }
  let gatewayId: string | undefined;
  if (opts.gateway) {
    // By name or id; an id no longer in the gateways table still names its old rows.
    gatewayId = listGateways(cli.ctx).find((g) => g.id === opts.gateway || g.name === opts.gateway)?.id ?? opts.gateway;
  }
  return { provider: opts.provider, gatewayId, failed: opts.failed, withBody: opts.body };
}

function gatewayNames(cli: Cli): Map<string, string> {
  return new Map(listGateways(cli.ctx).map((g) => [g.id, g.name]));
}

const noteOf = (r: Row) => r.verification_reason ?? r.error;
const clip = (s: string | null, n: number) => (s && s.length > n ? `${s.slice(0, n - 1)}…` : s);

function line(r: Row, names: Map<string, string>): string {
  const gw = r.gateway_id ? (names.get(r.gateway_id) ?? r.gateway_id) : '-';
  const parts = [when(r.received_at), r.id, r.provider.padEnd(9), gw.padEnd(16), r.verification.padEnd(7), r.processing.padEnd(10), r.path];
  const note = noteOf(r);
  return parts.join('  ') + (note ? `  ${note}` : '');
}

function withBody(text: string, r: Row, on: boolean | undefined): string {
  return on && r.body ? `${text}\n${r.body.toString('utf8').replace(/^/gm, '    ')}` : text;
}

function list(cli: Cli, opts: LogOpts): Result {
  const rows = listWebhookLog(cli.ctx, { ...filterOf(cli, opts), limit: Math.min(opts.limit, 10_000), latest: true }) as Row[];
  const names = gatewayNames(cli);
  let text: string;
  if (rows.length === 0) text = opts.provider || opts.gateway || opts.failed ? 'No matching webhooks in the log.' : 'No provider webhooks logged yet.';
  else if (opts.body) text = rows.map((r) => withBody(line(r, names), r, true)).join('\n');
  else {
    text = table(
      ['time (utc)', 'id', 'provider', 'gateway', 'verified', 'processing', 'path', 'note'],
      rows.map((r) => [when(r.received_at), r.id, r.provider, r.gateway_id ? (names.get(r.gateway_id) ?? r.gateway_id) : null, r.verification, r.processing, r.path, clip(noteOf(r), 100)]),
    );
  }
  return { json: { data: rows.map(webhookLogJson) }, text };
}

async function follow(cli: Cli, opts: LogOpts, json: boolean, deps: WebhookLogDeps): Promise<void> {
  const out = deps.out ?? process.stdout;
  const pollMs = deps.pollMs ?? 500;
  const filter = filterOf(cli, opts);
  // --failed is decided after a row settles: a pending row may still end unroutable.
  const sqlFilter = { ...filter, failed: false };
  let names = gatewayNames(cli);
  const print = (r: Row) => {
    if (opts.failed && !isFailed(r)) return;
    out.write(json ? `${JSON.stringify(webhookLogJson(r))}\n` : `${withBody(line(r, names), r, opts.body)}\n`);
  };
  const initial = listWebhookLog(cli.ctx, { ...filter, limit: Math.min(opts.limit, 10_000), latest: true }) as Row[];
  for (const r of initial) print(r);
  const newest = cli.ctx.db.sqlite.prepare('SELECT MAX(id) AS id FROM provider_webhooks').get() as { id: string | null };
  let cursor = newest.id ?? '';

  const ctrl = new AbortController();
  const onSigint = () => ctrl.abort();
  if (!deps.signal) process.once('SIGINT', onSigint);
  const signal = deps.signal ?? ctrl.signal;
  try {
    while (!signal.aborted) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, pollMs);
        signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
      });
      if (signal.aborted) break;
      const rows = listWebhookLog(cli.ctx, { ...sqlFilter, afterId: cursor, limit: 1000 }) as Row[];
      if (rows.some((r) => r.gateway_id && !names.has(r.gateway_id))) names = gatewayNames(cli);
      const now = Date.now();
      for (const r of rows) {
        if (r.processing === 'pending' && now - r.received_at < HOLD_PENDING_MS) break;
        print(r);
        cursor = r.id;
      }
    }
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/** Adds `log` to `msgctl webhooks` (beside the outbound commands of src/cli/webhooks-out.ts). */
export function registerWebhookLogCommands(webhooks: Command, deps: WebhookLogDeps = {}): Command {
  webhooks
    .command('log')
    .description('the provider webhook log: every POST to /api/webhook*.php with its verification and processing outcome')
    .option('--follow', 'keep printing webhooks as they arrive, until Ctrl-C')
    .option('--provider <p>', `only one provider: ${PROVIDERS.join(', ')}`)
    .option('--gateway <g>', 'only one gateway (name or id)')
    .option('--limit <n>', 'how many of the latest to show first', positiveInt, 20)
    .option('--failed', 'only what went wrong: bad signature, rejected, unroutable, error')
    .option('--body', 'include the raw body of each webhook')
    .addHelpText(
      'after',
      examples(
        'msgctl webhooks log',
        'msgctl webhooks log --follow --provider whatsapp',
        'msgctl webhooks log --failed --limit 100 --json',
        'msgctl webhooks log --gateway twilio-main --body',
      ),
    )
    .action(async (opts: LogOpts, cmd: Command) => {
      if (!opts.follow) return withCli(list)(opts, cmd);
      const globals = globalsOf(cmd);
      const cli = openCli(globals);
      try {
        await follow(cli, opts, !!globals.json, deps);
      } finally {
        cli.dir.close();
      }
    });
  return webhooks;
}
