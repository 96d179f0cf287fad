import type { Command } from 'commander';
import { ledgerEntryJson, listLedger } from '../core/ledger.js';
import { positiveInt } from './args.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { money, table, when, type Result } from './output.js';

async function list(cli: Cli, ref: string, opts: { limit: number; before?: number }): Promise<Result> {
  const limit = Math.min(opts.limit, 1000);
  const { partner, entries } = await listLedger(cli.ctx, ref, { limit, before: opts.before });
  const cur = partner.currency;
  const text = entries.length
    ? table(
        ['#', 'time (utc)', 'kind', 'amount', 'balance after', 'note', 'actor', 'message'],
        entries.map((e) => [
          e.id,
          when(e.created_at),
          e.kind,
          money(e.amount, cur),
          money(e.balance_after, cur),
          e.note,
          e.actor,
          e.message_id,
        ]),
        { right: [0, 3, 4] },
      )
    : `No ledger entries for ${partner.slug} yet.`;
  const data = entries.map((e) => ledgerEntryJson(e, cur));
  // Keyset paging: pass the last id as --before to continue.
  const next = entries.length === limit ? entries[entries.length - 1].id : null;
  return { json: { partner: partner.slug, data, next_before: next }, text };
}

export function registerLedger(program: Command) {
  const ledger = program.command('ledger').description("a partner's append-only money history");

  ledger
    .command('list')
    .description('list ledger entries, newest first')
    .argument('<partner>', 'slug or id')
    .option('--limit <n>', 'how many entries (max 1000)', positiveInt, 50)
    .option('--before <id>', 'only entries older than this entry id (paging)', positiveInt)
    .addHelpText('after', examples('msgctl ledger list acme', 'msgctl ledger list acme --limit 200 --json'))
    .action(withCli(list));
}
