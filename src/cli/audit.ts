import type { Command } from 'commander';
import { listAudit } from '../core/audit.js';
import { positiveInt } from './args.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { table, type Result } from './output.js';

async function list(cli: Cli, opts: { limit: number }): Promise<Result> {
  const rows = await listAudit(cli.ctx, Math.min(opts.limit, 10_000));
  const text = rows.length
    ? table(
        ['#', 'time (utc)', 'actor', 'action', 'target', 'details'],
        rows.map((r) => [
          r.id,
          r.created_at?.slice(0, 19).replace('T', ' '),
          r.actor,
          r.action,
          r.target_id,
          r.details ? JSON.stringify(r.details) : null,
        ]),
        { right: [0] },
      )
    : 'The audit log is empty.';
  return { json: { data: rows }, text };
}

export function registerAudit(program: Command) {
  program
    .command('audit')
    .description('who changed what, and when')
    .command('list')
    .description('list operator actions, newest first')
    .option('--limit <n>', 'how many entries', positiveInt, 50)
    .addHelpText('after', examples('msgctl audit list', 'msgctl audit list --limit 500 --json'))
    .action(withCli(list));
}
