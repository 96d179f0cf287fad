import type { Command } from 'commander';
import { listChannels, channelJson } from '../core/channels.js';
import {
  activatePartner,
  checkPartnerInput,
  createPartner,
  getPartner,
  listPartners,
  partnerJson,
  setCreditLimit,
  setPartnerLimits,
  suspendPartner,
  type Partner,
} from '../core/partners.js';
import { listTokens, tokenJson } from '../core/tokens.js';
import { withCli, type Cli } from './context.js';
import { moneyArg, usage } from './args.js';
import { UsageError } from './errors.js';
import { kv, lines, money, table, when, type Result } from './output.js';
import { examples } from './help.js';

function summary(p: Partner): [string, string | number | null][] {
  return [
    ['id', p.id],
    ['slug', p.slug],
    ['name', p.name],
    ['status', p.status],
    ['balance', money(p.balance, p.currency)],
    ['credit limit', money(p.credit_limit, p.currency)],
    ['available', money(p.balance + p.credit_limit, p.currency)],
    ['rate limit', p.rate_limit_per_minute === null ? 'config default' : `${p.rate_limit_per_minute}/min per token`],
    ['low balance', p.low_balance_threshold === null ? 'config default' : money(p.low_balance_threshold, p.currency)],
    ['created', when(p.created_at)],
  ];
}

function one(headline: string, p: Partner): Result {
  return { json: partnerJson(p), text: lines(headline, kv(summary(p), '  ')) };
}

async function create(
  cli: Cli,
  slug: string,
  opts: { name: string; currency?: string; credit?: string },
): Promise<Result> {
  const creditLimit = opts.credit === undefined ? undefined : moneyArg(opts.credit, 'non-negative', 'a credit limit');
  const input = { slug, name: opts.name, currency: opts.currency, creditLimit };
  usage(() => checkPartnerInput(input));
  const p = await createPartner(cli.ctx, input, cli.actor);
  return one(`Created partner ${p.slug} (${p.id}).`, p);
}

async function list(cli: Cli): Promise<Result> {
  const rows = await listPartners(cli.ctx);
  const text = rows.length
    ? table(
        ['slug', 'name', 'status', 'balance', 'credit', 'available', 'id'],
        rows.map((p) => [
          p.slug,
          p.name,
          p.status,
          money(p.balance, p.currency),
          money(p.credit_limit, p.currency),
          money(p.balance + p.credit_limit, p.currency),
          p.id,
        ]),
        { right: [3, 4, 5] },
      )
    : 'No partners yet. Create one with: msgctl partner create <slug> --name <name>';
  return { json: { data: rows.map(partnerJson) }, text };
}

async function show(cli: Cli, ref: string): Promise<Result> {
  const p = await getPartner(cli.ctx, ref);
  const channels = await listChannels(cli.ctx, { partner: p.id });
  const now = cli.ctx.now();
  const tokens = (await listTokens(cli.ctx, p.id)).map((t) => tokenJson(t, now));
  const activeTokens = tokens.filter((t) => t.state === 'active').length;
  const text = lines(
    kv([...summary(p), ['tokens', `${activeTokens} active, ${tokens.length} total`]]),
    '',
    channels.length
      ? table(
          ['channel', 'sender', 'gateway', 'kind', 'id'],
          channels.map((c) => [c.type, c.sender, c.gateway_name, c.gateway_kind, c.id]),
        )
      : 'No channels assigned. Assign one with: msgctl channel assign <partner> <gateway> <type> --from <sender>',
  );
  return {
    json: {
      ...partnerJson(p),
      channels: channels.map(channelJson),
      tokens: { active: activeTokens, total: tokens.length },
    },
    text,
  };
}

async function setLimits(cli: Cli, ref: string, opts: { rateLimit?: string; lowBalance?: string }): Promise<Result> {
  if (opts.rateLimit === undefined && opts.lowBalance === undefined) {
    throw new UsageError('give --rate-limit and/or --low-balance');
  }
  const limits: { rateLimitPerMinute?: number | null; lowBalanceThreshold?: number | null } = {};
  if (opts.rateLimit !== undefined) {
    if (opts.rateLimit === 'default') limits.rateLimitPerMinute = null;
    else if (/^\d+$/.test(opts.rateLimit)) limits.rateLimitPerMinute = Number(opts.rateLimit);
    else
      throw new UsageError(
        `--rate-limit expects a whole number of requests per minute or "default", got "${opts.rateLimit}"`,
      );
  }
  if (opts.lowBalance !== undefined) {
    limits.lowBalanceThreshold =
      opts.lowBalance === 'default' ? null : moneyArg(opts.lowBalance, 'non-negative', 'a low-balance threshold');
  }
  const p = await setPartnerLimits(cli.ctx, ref, limits, cli.actor);
  return one(`Updated limits of ${p.slug}.`, p);
}

export function registerPartner(program: Command) {
  const partner = program.command('partner').description('create and manage partners (tenants)');

  partner
    .command('create')
    .description('create a partner')
    .argument('<slug>', 'short unique name: lowercase letters, digits, dashes')
    .requiredOption('--name <name>', 'display name')
    .option('--currency <code>', 'ISO 4217 currency of its balance', 'USD')
    .option('--credit <amount>', 'credit limit: how far the balance may go below zero')
    .addHelpText(
      'after',
      examples(
        'msgctl partner create acme --name "Acme Ltd"',
        'msgctl partner create globex --name Globex --currency EUR --credit 50.00',
      ),
    )
    .action(withCli(create));

  partner
    .command('list')
    .description('list partners with their balances')
    .addHelpText('after', examples('msgctl partner list', 'msgctl partner list --json'))
    .action(withCli(list));

  partner
    .command('show')
    .description('show a partner: balance, credit, channels, tokens')
    .argument('<partner>', 'slug or id')
    .addHelpText('after', examples('msgctl partner show acme'))
    .action(withCli(show));

  partner
    .command('suspend')
    .description('suspend a partner: its tokens are refused from the next request on')
    .argument('<partner>', 'slug or id')
    .addHelpText('after', examples('msgctl partner suspend acme'))
    .action(
      withCli(async (cli, ref: string) => {
        const p = await suspendPartner(cli.ctx, ref, cli.actor);
        return one(`Suspended ${p.slug}: its API requests are refused until "msgctl partner activate ${p.slug}".`, p);
      }),
    );

  partner
    .command('activate')
    .description('activate a suspended partner')
    .argument('<partner>', 'slug or id')
    .addHelpText('after', examples('msgctl partner activate acme'))
    .action(
      withCli(async (cli, ref: string) => {
        const p = await activatePartner(cli.ctx, ref, cli.actor);
        return one(`Activated ${p.slug}.`, p);
      }),
    );

  partner
    .command('set-credit')
    .description('set how far the balance may go below zero')
    .argument('<partner>', 'slug or id')
    .argument('<amount>', 'credit limit as a decimal, e.g. 25.00 (0 for prepaid only)')
    .addHelpText('after', examples('msgctl partner set-credit acme 25.00', 'msgctl partner set-credit acme 0'))
    .action(
      withCli(async (cli, ref: string, amount: string) => {
        const p = await setCreditLimit(cli.ctx, ref, moneyArg(amount, 'non-negative', 'a credit limit'), cli.actor);
        return one(`Credit limit of ${p.slug} is now ${money(p.credit_limit, p.currency)}.`, p);
      }),
    );

  partner
    .command('set-limits')
    .description('set the per-token request rate and the low-balance warning threshold')
    .argument('<partner>', 'slug or id')
    .option('--rate-limit <per-minute>', 'requests per minute per token, or "default"')
    .option('--low-balance <amount>', 'warn when the balance falls below this, or "default"')
    .addHelpText(
      'after',
      examples(
        'msgctl partner set-limits acme --rate-limit 120',
        'msgctl partner set-limits acme --low-balance 10.00',
        'msgctl partner set-limits acme --rate-limit default',
      ),
    )
    .action(withCli(setLimits));
}
