import type { Command } from 'commander';
import { backupBeforeMigrate } from '../db/backup.js';
import { openStore } from '../db/open-store.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { examples } from './help.js';
import { lines, type Result } from './output.js';

// msgctl migrate: the pending migrations of either store. SQLite: a backup of the data
// directory first (backup.beforeMigrate). PostgreSQL: under the migration lock, so several
// processes migrating at once apply each migration once; its backups are PostgreSQL's own.

async function runMigrate(globals: Globals, opts: { backup: boolean }): Promise<Result> {
  const config = configFor(globals);
  const opened = await openStore(config, { env: globals.io?.env, create: false, migrate: false, poolSize: 1 });
  try {
    const status = await opened.migrationStatus();
    // Only when something is about to change, and never for a database with nothing in it yet.
    const wanted =
      opts.backup && config.backup.beforeMigrate && status.pending.length && status.applied > 0 && !status.tooNew;
    const taken =
      wanted && opened.dataDir
        ? backupBeforeMigrate(config)(opened.dataDir.db, status.pending, {
            key: opened.masterKey,
            source: opened.keySource,
          })
        : null;
    const applied = await opened.migrate();
    const after = await opened.migrationStatus();
    const where = opened.dataDir ? { data_dir: opened.dataDir.dir } : { database: opened.where };
    return {
      json: {
        ...where,
        applied,
        up_to_date: after.pending.length === 0,
        migrations_applied_total: after.applied,
        backup: taken && { file: taken.file, key_file: taken.keyFile },
      },
      text: lines(
        applied.length
          ? `Applied ${applied.length} migration(s): ${applied.join(', ')}.`
          : `The database is up to date (${after.applied} migration(s) applied).`,
        taken ? `Backup taken first: ${taken.file}${taken.keyFile ? ` (key: ${taken.keyFile})` : ''}` : null,
        wanted && !opened.dataDir && applied.length
          ? 'No backup taken first: on PostgreSQL, backups are pg_dump or continuous archiving (docs/deploy.md).'
          : null,
      ),
    };
  } finally {
    await opened.close();
  }
}

export function registerMigrate(program: Command) {
  program
    .command('migrate')
    .description('apply pending database migrations (after a backup of a data directory, unless --no-backup)')
    .option('--no-backup', 'do not back the database up first (config backup.beforeMigrate: false does the same)')
    .addHelpText('after', examples('msgctl migrate', 'msgctl migrate --json', 'msgctl migrate --no-backup'))
    .action(withGlobals(runMigrate));
}
