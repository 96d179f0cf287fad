import type { Command } from 'commander';
import { openDataDir } from '../db/datadir.js';
import { migrate, migrationStatus } from '../db/migrate.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { examples } from './help.js';
import type { Result } from './output.js';

function runMigrate(globals: Globals): Result {
  const config = configFor(globals);
  const dd = openDataDir(config.dataDir, { create: false, migrate: false, env: globals.io?.env });
  try {
    const applied = migrate(dd.db);
    const status = migrationStatus(dd.db);
    return {
      json: {
        data_dir: dd.dir,
        applied,
        up_to_date: status.pending.length === 0,
        migrations_applied_total: status.applied,
      },
      text: applied.length
        ? `Applied ${applied.length} migration(s): ${applied.join(', ')}.`
        : `The database is up to date (${status.applied} migration(s) applied).`,
    };
  } finally {
    dd.close();
  }
}

export function registerMigrate(program: Command) {
  program
    .command('migrate')
    .description('apply pending database migrations')
    .addHelpText('after', examples('msgctl migrate', 'msgctl migrate --json'))
    .action(withGlobals(runMigrate));
}
