import type { Command } from 'commander';
import { adjust, ledgerEntryJson, listLedger, topup, type LedgerEntry } from '../core/ledger.js';
import { getPartner, partnerJson, type Partner } from '../core/partners.js';
import { moneyArg } from './args.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { kv, lines, money, when, type Result } from './output.js';

function balanceLines(p: Partner): [string, string][] {
  return [
    ['balance', money(p.balance, p.currency)],
    ['credit limit', money(p.credit_limit, p.currency)],
    ['available', money(p.balance + p.credit_limit, p.currency)],
  ];
}

async function moved(cli: Cli, entry: LedgerEntry, headline: string): Promise<Result> {
  const p = await getPartner(cli.ctx, entry.partner_id);
  return {
    json: { entry: ledgerEntryJson(entry, p.currency), partner: partnerJson(p) },
    text: lines(headline, kv([['entry', `#${entry.id}`], ...balanceLines(p)], '  ')),
  };
}

async function doTopup(cli: Cli, ref: string, amount: string, opts: { note?: string }): Promise<Result> {
  const entry = await topup(cli.ctx, ref, moneyArg(amount, 'positive', 'a top-up'), opts.note ?? null, cli.actor);
  const p = await getPartner(cli.ctx, entry.partner_id);
  return moved(cli, entry, `Topped up ${p.slug} by ${money(entry.amount, p.currency)}.`);
}

async function doAdjust(cli: Cli, ref: string, amount: string, opts: { note: string }): Promise<Result> {
  const entry = await adjust(cli.ctx, ref, moneyArg(amount, 'non-zero', 'an adjustment'), opts.note, cli.actor);
  const p = await getPartner(cli.ctx, entry.partner_id);
  return moved(
    cli,
    entry,
    `Adjusted ${p.slug} by ${entry.amount > 0 ? '+' : ''}${money(entry.amount, p.currency)} (${opts.note}).`,
  );
}

async function show(cli: Cli, ref: string): Promise<Result> {
  const p = await getPartner(cli.ctx, ref);
  const last = (await listLedger(cli.ctx, p.id, { limit: 1 })).entries[0];
  const j = partnerJson(p);
  return {
    json: {
      partner_id: p.id,
      slug: p.slug,
      status: p.status,
      balance: j.balance,
      credit_limit: j.credit_limit,
      available: j.available,
      low_balance_threshold: j.low_balance_threshold,
      last_entry: last ? ledgerEntryJson(last, p.currency) : null,
    },
    text: lines(
      `${p.slug} (${p.status})`,
      kv(
        [
          ...balanceLines(p),
          [
            'last entry',
            last ? `#${last.id} ${last.kind} ${money(last.amount, p.currency)} at ${when(last.created_at)}` : 'none',
          ],
        ],
        '  ',
      ),
    ),
  };
}

export function registerBalance(program: Command) {
  const balance = program.command('balance').description("move and show a partner's money");

  balance
    .command('topup')
    .description('add money to a partner (a positive amount)')
    .argument('<partner>', 'slug or id')
    .argument('<amount>', 'decimal amount, e.g. 100.00')
    .option('--note <text>', 'why, e.g. the invoice number')
    .addHelpText('after', examples('msgctl balance topup acme 100.00 --note "invoice 42"'))
    .action(withCli(doTopup));

  balance
    .command('adjust')
    .description('correct a balance by a signed amount (audited; a note is required)')
    .argument('<partner>', 'slug or id')
    .argument('<amount>', 'signed decimal amount: -5.00 takes money off, 5.00 adds')
    .requiredOption('--note <text>', 'why the correction is made')
    .addHelpText(
      'after',
      examples(
        'msgctl balance adjust acme -5.00 --note "refund of duplicate top-up"',
        'msgctl balance adjust acme --note "goodwill" -- 2.50',
      ),
    )
    .action(withCli(doAdjust));

  balance
    .command('show')
    .description('show balance, credit limit and what is available')
    .argument('<partner>', 'slug or id')
    .addHelpText('after', examples('msgctl balance show acme'))
    .action(withCli(show));
}
