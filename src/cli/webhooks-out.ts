import type { Command } from 'commander';
import { enableEndpoint, findEndpointRef, listAllEndpoints, type EndpointRow } from '../core/endpoints.js';
import { getPartner } from '../core/partners.js';
import { AppError } from '../lib/errors.js';
import { iso, parseSince } from '../lib/time.js';
import { queueOf } from '../queue/of-ctx.js';
import { replayEvent, replaySince, type ReplayReport } from '../webhooks-out/replay.js';
import { type AttemptRow, listAttempts, listDeliveries, type DeliveryListRow } from '../webhooks-out/store.js';
import { positiveInt } from './args.js';
import { withCli, type Cli } from './context.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

// msgctl webhooks deliveries | replay | enable | endpoints: the operator's side of outbound
// webhooks. Replays are jobs written to the database; the running msgd sends them (within a
// second), so these commands work while msgd runs, and wait for it when it does not.

const clip = (s: string | null, n: number) => (s && s.length > n ? `${s.slice(0, n - 1)}…` : s);

function deliveryJson(d: DeliveryListRow, attempts?: AttemptRow[]) {
  return {
    id: d.id,
    event_id: d.event_id,
    event_type: d.event_type,
    endpoint_id: d.endpoint_id,
    url: d.url,
    partner: d.partner_slug,
    status: d.status,
    attempts: d.attempts,
    last_status_code: d.last_status_code,
    last_error: d.last_error,
    next_attempt_at: iso(d.next_attempt_at),
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
    ...(attempts
      ? {
          attempt_log: attempts.map((a) => ({
            attempt: a.attempt_no,
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error,
            response_snippet: a.response_snippet,
            at: iso(a.created_at),
          })),
        }
      : {}),
  };
}

async function endpointRef(cli: Cli, ref: string): Promise<string> {
  const id = await findEndpointRef(cli.ctx, ref);
  if (!id) throw new AppError('not_found', `webhook endpoint "${ref}" not found (give its id whe_… or its URL)`);
  return id;
}

async function deliveries(
  cli: Cli,
  opts: { endpoint?: string; failed?: boolean; limit: number; attempts?: boolean },
): Promise<Result> {
  const rows = await listDeliveries(cli.ctx, {
    endpointId: opts.endpoint ? await endpointRef(cli, opts.endpoint) : undefined,
    failed: opts.failed,
    limit: opts.limit,
  });
  let logs: Map<string, AttemptRow[]> | null = null;
  if (opts.attempts) {
    logs = new Map();
    for (const d of rows) logs.set(d.id, await listAttempts(cli.ctx, d.id));
  }
  const json = { data: rows.map((d) => deliveryJson(d, logs?.get(d.id))) };
  if (rows.length === 0) return { json, text: opts.failed ? 'No failed deliveries.' : 'No deliveries yet.' };
  const main = table(
    ['created (utc)', 'delivery', 'event', 'type', 'partner', 'url', 'status', 'tries', 'last', 'next (utc)', 'error'],
    rows.map((d) => [
      when(d.created_at),
      d.id,
      d.event_id,
      d.event_type,
      d.partner_slug,
      clip(d.url, 40),
      d.status,
      d.attempts,
      d.last_status_code,
      d.status === 'pending' ? when(d.next_attempt_at) : null,
      clip(d.last_error, 60),
    ]),
  );
  if (!logs) return { json, text: main };
  const detail = rows
    .filter((d) => logs.get(d.id)!.length)
    .map((d) =>
      lines(
        `${d.id} (${d.event_type} → ${d.url})`,
        table(
          ['attempt', 'at (utc)', 'status', 'ms', 'error', 'response'],
          logs
            .get(d.id)!
            .map((a) => [
              a.attempt_no,
              when(a.created_at),
              a.status_code,
              a.duration_ms,
              clip(a.error, 50),
              clip(a.response_snippet?.replace(/\s+/g, ' ') ?? null, 50),
            ]),
        ),
      ),
    );
  return { json, text: [main, ...detail].join('\n\n') };
}

function replayResult(report: ReplayReport, what: string): Result {
  const queued = report.queued.length;
  const text = lines(
    `Replaying ${what}: ${queued} deliver${queued === 1 ? 'y' : 'ies'} queued over ${report.events} event(s); the running msgd sends them now.`,
    queued
      ? table(
          ['event', 'endpoint', 'delivery', 'kind'],
          report.queued.map((q) => [q.event_id, q.endpoint_id, q.delivery_id, q.kind]),
        )
      : null,
    report.pending.length ? `${report.pending.length} still being retried on their schedule were left alone.` : null,
  );
  const notices =
    queued === 0 && report.pending.length === 0
      ? ['Nothing to replay: no enabled endpoint subscribes to these events.']
      : [];
  return { json: report, text, notices };
}

async function replay(
  cli: Cli,
  eventId: string | undefined,
  opts: { since?: string; partner?: string; endpoint?: string },
): Promise<Result> {
  if (!eventId && !opts.since) throw new UsageError('say what to replay: an event id (evt_…) or --since <time>');
  if (eventId && opts.since) throw new UsageError('give an event id or --since <time>, not both');
  const queue = queueOf(cli.ctx);
  const endpointId = opts.endpoint ? await endpointRef(cli, opts.endpoint) : undefined;
  if (eventId) {
    if (opts.partner) throw new UsageError('--partner goes with --since; an event id names its partner already');
    return replayResult(await replayEvent(cli.ctx, queue, eventId, { endpointId }), eventId);
  }
  let since: number;
  try {
    since = parseSince(opts.since!, cli.ctx.now());
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const partnerId = opts.partner ? (await getPartner(cli.ctx, opts.partner)).id : undefined;
  return replayResult(
    await replaySince(cli.ctx, queue, since, { partnerId, endpointId }),
    `events since ${iso(since)}`,
  );
}

function endpointJsonOp(e: EndpointRow & { partner_slug: string }) {
  return {
    id: e.id,
    partner: e.partner_slug,
    url: e.url,
    description: e.description,
    events: e.events === null ? null : JSON.parse(e.events),
    status: e.status,
    disabled_reason: e.disabled_reason,
    failing_since: iso(e.failing_since),
    created_at: iso(e.created_at),
  };
}

async function endpoints(cli: Cli, opts: { partner?: string }): Promise<Result> {
  const rows = await listAllEndpoints(cli.ctx, opts.partner ? (await getPartner(cli.ctx, opts.partner)).id : undefined);
  const json = { data: rows.map(endpointJsonOp) };
  if (rows.length === 0) return { json, text: 'No webhook endpoints.' };
  return {
    json,
    text: table(
      ['id', 'partner', 'url', 'events', 'status', 'failing since (utc)', 'reason'],
      rows.map((e) => [
        e.id,
        e.partner_slug,
        e.url,
        e.events === null ? 'all' : JSON.parse(e.events).join(','),
        e.status,
        when(e.failing_since),
        clip(e.disabled_reason, 70),
      ]),
    ),
  };
}

async function enable(cli: Cli, ref: string): Promise<Result> {
  const e = await enableEndpoint(cli.ctx, await endpointRef(cli, ref), cli.actor);
  return {
    json: { id: e.id, url: e.url, status: e.status },
    text: lines(
      `Enabled webhook endpoint ${e.id}: new events are delivered to it again.`,
      kv(
        [
          ['url', e.url],
          ['status', e.status],
        ],
        '  ',
      ),
      `Events it missed while disabled are not sent by themselves: msgctl webhooks replay --since <time> --endpoint ${e.id}`,
    ),
  };
}

/** Adds the outbound-webhook commands to `msgctl webhooks`. */
export function registerWebhookOutCommands(webhooks: Command): Command {
  webhooks
    .command('deliveries')
    .description('outbound deliveries to partner endpoints, newest first, with their last outcome')
    .option('--endpoint <endpoint>', 'only one endpoint (id or URL)')
    .option('--failed', 'only deliveries that failed: dead, failed, or pending after a failed attempt')
    .option('--attempts', 'also print every attempt (status, duration, error, response)')
    .option('--limit <n>', 'how many', positiveInt, 50)
    .addHelpText(
      'after',
      examples(
        'msgctl webhooks deliveries',
        'msgctl webhooks deliveries --failed --attempts',
        'msgctl webhooks deliveries --endpoint whe_01j… --json',
      ),
    )
    .action(withCli(deliveries));

  webhooks
    .command('replay')
    .description('send events again to the enabled endpoints subscribed to them (same event id)')
    .argument('[event-id]', 'one event (evt_…)')
    .option('--since <time>', 'every event since: ISO time or a duration back from now (30m, 6h, 2d)')
    .option('--partner <partner>', 'with --since: only this partner (slug or id)')
    .option('--endpoint <endpoint>', 'only to this endpoint (id or URL)')
    .addHelpText(
      'after',
      examples(
        'msgctl webhooks replay evt_01j…',
        'msgctl webhooks replay --since 6h --partner acme',
        'msgctl webhooks replay --since 2026-11-20T00:00:00Z --endpoint whe_01j…',
      ),
    )
    .action(withCli(replay));

  webhooks
    .command('enable')
    .description('enable an endpoint msgd disabled (410 Gone, or failing for too long)')
    .argument('<endpoint>', 'endpoint id (whe_…) or URL')
    .addHelpText('after', examples('msgctl webhooks enable whe_01j…'))
    .action(withCli(enable));

  webhooks
    .command('endpoints')
    .description("partners' webhook endpoints with their status (never their secrets)")
    .option('--partner <partner>', 'only one partner (slug or id)')
    .addHelpText('after', examples('msgctl webhooks endpoints', 'msgctl webhooks endpoints --partner acme --json'))
    .action(withCli(endpoints));

  return webhooks;
}
