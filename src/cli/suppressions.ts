import type { Command } from 'commander';
import { CHANNEL_TYPES } from '../core/context.js';
import { getPartner } from '../core/partners.js';
import {
  OPT_OUT_SCOPES,
  SUPPRESSION_REASONS,
  createSuppression,
  listSuppressions,
  normalizeAddress,
  readOptOutScope,
  removeSuppression,
  setOptOutScope,
  suppressionJson,
  type OptOutScope,
  type SuppressionInput,
  type SuppressionReason,
} from '../core/suppressions.js';
import { channelTypeArg, positiveInt } from './args.js';
import { withCli, type Cli } from './context.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

// msgctl suppressions: a partner's suppression list (docs/suppressions.md), as the operator
// sees and keeps it.

const ADDABLE = ['manual', 'opt_out_keyword', 'hard_bounce', 'spam_report', 'unsubscribe'] as const;

function reasonArg(input: string, allowed: readonly string[]): SuppressionReason {
  if (!allowed.includes(input)) throw new UsageError(`--reason must be one of ${allowed.join(', ')}, not "${input}"`);
  return input as SuppressionReason;
}

async function list(
  cli: Cli,
  ref: string,
  opts: { channel?: string; reason?: string; address?: string; limit?: number },
): Promise<Result> {
  const partner = await getPartner(cli.ctx, ref);
  const channel = opts.channel ? channelTypeArg(opts.channel) : undefined;
  const address =
    opts.address !== undefined && channel ? (normalizeAddress(channel, opts.address) ?? opts.address) : opts.address;
  const rows = await listSuppressions(cli.ctx, partner.id, {
    channel,
    reason: opts.reason ? reasonArg(opts.reason, SUPPRESSION_REASONS) : undefined,
    address,
    search: !channel,
    limit: opts.limit ?? 100,
  });
  const text = rows.length
    ? table(
        ['channel', 'address', 'reason', 'sender', 'since', 'source', 'id'],
        rows.map((s) => [s.channel, s.address, s.reason, s.scope || 'all', when(s.created_at), s.source, s.id]),
      )
    : `No suppressions for ${partner.slug}${opts.channel || opts.reason || opts.address ? ' that match' : ''}.`;
  return {
    json: { data: rows.map(suppressionJson), opt_out_scope: await readOptOutScope(cli.ctx, partner.id) },
    text,
  };
}

async function add(
  cli: Cli,
  ref: string,
  channelIn: string,
  address: string,
  opts: { reason?: string; sender?: string; note?: string },
): Promise<Result> {
  const partner = await getPartner(cli.ctx, ref);
  const input: SuppressionInput = {
    channel: channelTypeArg(channelIn),
    address,
    reason: opts.reason ? (reasonArg(opts.reason, ADDABLE) as SuppressionInput['reason']) : 'manual',
    sender: opts.sender ?? null,
    detail: opts.note ?? null,
  };
  const { row, created } = await createSuppression(cli.ctx, partner.id, input, cli.actor);
  const json = suppressionJson(row);
  return {
    json: { ...json, created },
    text: lines(
      created
        ? `Suppressed ${row.address} on ${row.channel} for ${partner.slug}: sends to it are refused from now on.`
        : `${row.address} was already suppressed on ${row.channel} for ${partner.slug} (${row.reason}); nothing changed.`,
      kv(
        [
          ['id', row.id],
          ['reason', row.reason],
          ['sender', row.scope || 'all senders'],
          ['since', when(row.created_at)],
          ['source', row.source],
        ],
        '  ',
      ),
    ),
  };
}

async function remove(cli: Cli, ref: string, id: string, opts: { consentConfirmed?: boolean }): Promise<Result> {
  const partner = await getPartner(cli.ctx, ref);
  const row = await removeSuppression(cli.ctx, partner.id, id, {
    actor: cli.actor,
    consentConfirmed: opts.consentConfirmed === true,
  });
  return {
    json: { ...suppressionJson(row), removed: true },
    text: `Removed ${row.address} (${row.reason}) from ${partner.slug}'s ${row.channel} suppression list.${
      row.reason === 'opt_out_keyword' ? ` The customer's renewed consent is recorded as stated by ${cli.actor}.` : ''
    }`,
  };
}

async function scope(cli: Cli, ref: string, value: string | undefined): Promise<Result> {
  const partner = await getPartner(cli.ctx, ref);
  if (value !== undefined) {
    if (!(OPT_OUT_SCOPES as readonly string[]).includes(value))
      throw new UsageError(`the scope is ${OPT_OUT_SCOPES.join(' or ')}, not "${value}"`);
    await setOptOutScope(cli.ctx, partner.id, value as OptOutScope, cli.actor);
  }
  const now = await readOptOutScope(cli.ctx, partner.id);
  return {
    json: { partner: partner.slug, opt_out_scope: now },
    text:
      now === 'sender'
        ? `${partner.slug}: an SMS opt-out applies to the number the customer replied to.`
        : `${partner.slug}: an SMS opt-out applies to every number of the partner.`,
  };
}

export function registerSuppressions(program: Command) {
  const s = program
    .command('suppressions')
    .description("a partner's suppression list: recipients sends to are refused before cost");

  s.command('list')
    .description('list suppressed recipients, newest first')
    .argument('<partner>', 'slug or id')
    .option('--channel <type>', CHANNEL_TYPES.join(', '))
    .option('--reason <reason>', SUPPRESSION_REASONS.join(', '))
    .option('--address <text>', 'the address (exact with --channel; otherwise any address containing it)')
    .option('--limit <n>', 'at most this many (default 100)', positiveInt)
    .addHelpText(
      'after',
      examples(
        'msgctl suppressions list acme',
        'msgctl suppressions list acme --channel sms --address +14155550123',
        'msgctl suppressions list acme --reason hard_bounce --json',
      ),
    )
    .action(withCli(list));

  s.command('add')
    .description('suppress a recipient on a channel')
    .argument('<partner>', 'slug or id')
    .argument('<channel>', CHANNEL_TYPES.join(', '))
    .argument('<address>', 'E.164 number, email address, PSID or IGSID')
    .option('--reason <reason>', `${ADDABLE.join(', ')} (default manual)`)
    .option('--sender <address>', "only for this sender of the partner's (a number, page, from-address)")
    .option('--note <text>', 'kept with the entry')
    .addHelpText(
      'after',
      examples(
        'msgctl suppressions add acme sms +14155550123',
        'msgctl suppressions add acme email ann@example.com --reason unsubscribe --note "asked by phone"',
      ),
    )
    .action(withCli(add));

  s.command('remove')
    .description('remove a suppression by id')
    .argument('<partner>', 'slug or id')
    .argument('<id>', 'sup_… (from list)')
    .option(
      '--consent-confirmed',
      'the partner holds the customer’s renewed consent: required to remove an opt-out the customer made by keyword; audited',
    )
    .addHelpText(
      'after',
      examples(
        'msgctl suppressions remove acme sup_01jd...',
        'msgctl suppressions remove acme sup_01jd... --consent-confirmed',
      ),
    )
    .action(withCli(remove));

  s.command('scope')
    .description('show or set where an SMS opt-out applies: sender (the number replied to) or partner (every number)')
    .argument('<partner>', 'slug or id')
    .argument('[scope]', OPT_OUT_SCOPES.join(' or '))
    .addHelpText('after', examples('msgctl suppressions scope acme', 'msgctl suppressions scope acme partner'))
    .action(withCli(scope));
}
