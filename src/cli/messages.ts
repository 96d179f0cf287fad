import type { Command } from 'commander';
import { getPartner } from '../core/partners.js';
import { listOperatorMessages } from '../core/message-reads.js';
import { getMessageRowIn, messageHistoryIn } from '../core/messages.js';
import { messageJson } from '../core/message-json.js';
import { STATUS_RANK, type MessageStatus } from '../core/statuses.js';
import { cancelScheduled } from '../core/scheduled.js';
import { releaseHeldDispatches } from '../jobs/restore-hold.js';
import { notFound } from '../lib/errors.js';
import { queueOf } from '../queue/of-ctx.js';
import { positiveInt } from './args.js';
import { withCli, type Cli } from './context.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { count, kv, lines, money, table, when, type Result } from './output.js';

// msgctl messages: what was sent and what became of it, including messages flagged as
// possible duplicates (an attempt may have reached the provider unseen: a timeout, a reset or a crash mid-call).

async function list(
  cli: Cli,
  opts: { partner?: string; status?: string; uncertain?: boolean; failed?: boolean; limit: number },
): Promise<Result> {
  const partnerId = opts.partner ? (await getPartner(cli.ctx, opts.partner)).id : undefined;
  const known = Object.keys(STATUS_RANK);
  if (opts.status && !known.includes(opts.status)) throw new UsageError(`--status must be one of ${known.join(', ')}`);
  const rows = await listOperatorMessages(cli.ctx, {
    partnerId,
    status: opts.status as MessageStatus | undefined,
    failed: opts.failed,
    uncertain: opts.uncertain,
    limit: opts.limit,
  });
  return {
    json: { data: rows.map((m) => messageJson(m)) },
    text: rows.length
      ? table(
          ['id', 'created (utc)', 'dir', 'channel', 'to', 'status', 'price', 'error', 'dup?'],
          rows.map((m) => [
            m.id,
            when(m.created_at),
            m.direction === 'outbound' ? 'out' : 'in',
            m.channel_type,
            m.to,
            m.status,
            money(m.price),
            m.error_code ? `${m.error_code}${m.error_message ? `: ${m.error_message}` : ''}` : null,
            m.dispatch_uncertain ? 'possible duplicate' : null,
          ]),
          { right: [6] },
        )
      : 'No messages match.',
  };
}

async function show(cli: Cli, id: string): Promise<Result> {
  const m = await getMessageRowIn(cli.ctx.store, id);
  if (!m) throw notFound('message', id);
  const hist = await messageHistoryIn(cli.ctx.store, id, m);
  const partner = await getPartner(cli.ctx, m.partner_id);
  const json = { ...messageJson(m, hist), partner: { id: partner.id, slug: partner.slug } };
  return {
    json,
    text: lines(
      kv([
        ['id', m.id],
        ['partner', `${partner.slug} (${partner.id})`],
        ['direction', m.direction],
        ['channel', m.channel_type],
        ['from', m.from],
        ['to', m.to],
        ['status', m.status],
        ['price', `${money(m.price)}${m.refunded ? ' (refunded)' : ''}`],
        ['provider id', m.provider_message_id],
        ['error', m.error_code ? `${m.error_code}: ${m.error_message ?? ''}` : null],
        [
          'possible duplicate',
          m.dispatch_uncertain
            ? 'yes: an attempt may have reached the provider without msgd learning the outcome (a timeout or reset mid-call, or a crash), so a retry may have sent it twice'
            : 'no',
        ],
        ['created', when(m.created_at)],
        [
          m.direction === 'inbound' ? 'sent by customer' : 'handed to provider',
          m.sent_at === null ? null : when(m.sent_at),
        ],
        ['unsent by customer', m.deleted_at === null ? null : `${when(m.deleted_at)} (content redacted)`],
      ]),
      '',
      table(
        ['time (utc)', 'status', 'provider status', 'applied', 'error'],
        hist.map((h) => [
          when(h.occurred_at),
          h.status,
          h.provider_status,
          h.ignored ? 'no (late/duplicate)' : 'yes',
          h.error_code ? `${h.error_code}: ${h.error_message ?? ''}` : null,
        ]),
      ),
    ),
  };
}

/** A scheduled message is canceled before its time: never sent, its price refunded. */
async function cancel(cli: Cli, id: string): Promise<Result> {
  const m = await cancelScheduled(cli.ctx, null, id, cli.actor);
  return {
    json: messageJson((await getMessageRowIn(cli.ctx.store, m.id))!),
    text: `Canceled ${m.id}${m.price > 0 ? `: ${money(m.price)} refunded to the partner` : ''}.`,
  };
}

/** The messages a restore held (src/jobs/restore-hold.ts) go out, flagged possible duplicates. */
async function releaseHeld(cli: Cli): Promise<Result> {
  const released = await releaseHeldDispatches(cli.ctx, queueOf(cli.ctx));
  return {
    json: { released },
    text: released
      ? `Released ${count(released, 'held message')}: msgd sends ${released === 1 ? 'it' : 'them'} now, flagged possible duplicates (msgctl messages list --uncertain).`
      : 'No message is held.',
  };
}

export function registerMessages(program: Command) {
  const messages = program.command('messages').description('messages and their status history');
  messages
    .command('list')
    .description('messages, newest first')
    .option('--partner <partner>', 'only this partner (slug or id)')
    .option(
      '--status <status>',
      'only this status (scheduled, queued, sending, sent, delivered, read, failed, canceled, ...)',
    )
    .option('--failed', 'only failed, undelivered, bounced or dropped messages')
    .option(
      '--uncertain',
      'only messages that may have reached the provider twice (a crash, timeout or reset during the provider call)',
    )
    .option('--limit <n>', 'how many (max 1000)', positiveInt, 50)
    .addHelpText('after', examples('msgctl messages list --partner acme', 'msgctl messages list --uncertain --json'))
    .action(withCli(list));
  messages
    .command('show')
    .description('one message with its status history')
    .argument('<id>', 'message id (msg_...)')
    .action(withCli(show));
  messages
    .command('cancel')
    .description('cancel a scheduled message before its time: it is never sent and its price is refunded')
    .argument('<id>', 'message id (msg_...)')
    .addHelpText('after', examples('msgctl messages list --status scheduled', 'msgctl messages cancel msg_...'))
    .action(withCli(cancel));
  messages
    .command('release-held')
    .description(
      'send the messages a restore held (they were waiting when the backup was taken), flagged possible duplicates',
    )
    .addHelpText('after', examples('msgctl messages list --status queued', 'msgctl messages release-held'))
    // Also before msgctl migrate: rolling an upgrade back restores a backup of the older schema,
    // which the previous msgd runs; it knows no held jobs, so they are released first. The
    // release writes only columns every schema has.
    .action(withCli(releaseHeld, { olderSchema: true }));
}
