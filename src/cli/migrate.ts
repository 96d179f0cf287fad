import type { Command } from 'commander';
import { backupBeforeMigrate } from '../db/backup.js';
import { openDataDir } from '../db/datadir.js';
import { migrate, migrationStatus } from '../db/migrate.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { examples } from './help.js';
import { lines, type Result } from './output.js';

function runMigrate(globals: Globals, opts: { backup: boolean }): Result {
  const config = configFor(globals);
  const dd = openDataDir(config.dataDir, {
    create: false,
    migrate: false,
    env: globals.io?.env,
    masterKeyFile: config.masterKeyFile,
  });
  try {
    const status = migrationStatus(dd.db);
    // Only when something is about to change, and never for a database with nothing in it yet.
    const taken =
      opts.backup && config.backup.beforeMigrate && status.pending.length && status.applied > 0 && !status.tooNew
        ? backupBeforeMigrate(config)(dd.db, status.pending, { key: dd.masterKey, source: dd.keySource })
        : null;
    const applied = migrate(dd.db);
    const after = migrationStatus(dd.db);
    return {
      json: {
        data_dir: dd.dir,
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
      ),
    };
  } finally {
    dd.close();
  }
}

export function registerMigrate(program: Command) {
  program
    .command('migrate')
    .description('apply pending database migrations (after a backup, unless --no-backup)')
    .option('--no-backup', 'do not back the database up first (config backup.beforeMigrate: false does the same)')
    .addHelpText('after', examples('msgctl migrate', 'msgctl migrate --json', 'msgctl migrate --no-backup'))
    .action(withGlobals(runMigrate));
}
