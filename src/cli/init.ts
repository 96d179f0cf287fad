import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { DB_FILE, keyFileMode, openDataDir } from '../db/datadir.js';
import { migrate, migrationStatus } from '../db/migrate.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { examples } from './help.js';
import { kv, lines, type Result } from './output.js';

function init(globals: Globals): Result {
  const config = configFor(globals);
  const dir = resolve(config.dataDir);
  const existed = existsSync(join(dir, DB_FILE));
  // An existing directory is only inspected: creating a fresh key beside an existing
  // database would make every stored secret unreadable.
  const dd = openDataDir(dir, { create: !existed, migrate: false, env: globals.io?.env });
  try {
    let applied: string[] = [];
    let pending: string[] = [];
    if (existed) {
      const status = migrationStatus(dd.db);
      if (status.tooNew) migrate(dd.db); // throws SchemaTooNewError, changes nothing
      pending = status.pending;
    } else {
      applied = migrate(dd.db);
    }
    const keyFile = dd.keySource === 'env' ? null : dd.keySource;
    const mode = keyFileMode(dir);
    const json = {
      created: !existed,
      data_dir: dir,
      database: dd.db.path,
      master_key: keyFile
        ? { source: 'file', path: keyFile, mode: mode === null ? null : mode.toString(8).padStart(4, '0') }
        : { source: 'env', path: null, mode: null },
      migrations: { applied, pending },
    };
    const details = kv(
      [
        ['data dir', dir],
        ['database', dd.db.path],
        ['master key', keyFile ? `${keyFile} (mode ${json.master_key.mode})` : 'from MSGD_MASTER_KEY (no key file)'],
      ],
      '  ',
    );
    const text = existed
      ? lines(
          `The data directory already exists at ${dir}; nothing changed.`,
          details,
          pending.length ? `  ${pending.length} migration(s) pending: run "msgctl migrate".` : null,
        )
      : lines(
          `Created the data directory at ${dir}.`,
          details,
          keyFile ? '  Back up the master key file: without it the stored provider secrets cannot be read.' : null,
          '',
          'Next: msgctl partner create <slug> --name <name>',
        );
    return { json, text };
  } finally {
    dd.close();
  }
}

export function registerInit(program: Command) {
  program
    .command('init')
    .description('create the data directory, database and master key file (safe to re-run)')
    .addHelpText(
      'after',
      examples(
        'msgctl init',
        'msgctl --data-dir /var/lib/msgd init',
        'MSGD_MASTER_KEY=$(openssl rand -hex 32) msgctl init',
      ),
    )
    .action(withGlobals(init));
}
