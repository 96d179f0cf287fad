import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { DB_FILE, openDataDir } from '../db/datadir.js';
import { refuseOnPostgres } from '../db/open-store.js';
import { keyFileMode, keyFileOf, modeText } from '../db/master-key.js';
import { migrate, migrationStatus } from '../db/migrate.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { examples } from './help.js';
import { kv, lines, type Result } from './output.js';

function init(globals: Globals): Result {
  const config = configFor(globals);
  refuseOnPostgres(
    config,
    'msgctl init creates a data directory and its master key file',
    'there is no data directory to create; create the database and its role (docs/scale.md), set MSGD_MASTER_KEY or masterKeyFile, then run msgctl migrate; nothing was created',
  );
  const dir = resolve(config.dataDir);
  const existed = existsSync(join(dir, DB_FILE));
  // An existing directory is only inspected: creating a fresh key beside an existing
  // database would make every stored secret unreadable.
  const dd = openDataDir(dir, {
    create: !existed,
    migrate: false,
    env: globals.io?.env,
    masterKeyFile: config.masterKeyFile,
  });
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
    const keyFile = keyFileOf(dd.keySource);
    const mode = keyFile ? keyFileMode(keyFile) : null;
    const json = {
      created: !existed,
      data_dir: dir,
      database: dd.db.path,
      master_key: {
        // file: <dataDir>/master.key; master_key_file: the masterKeyFile setting.
        source: { env: 'env', file: 'master_key_file', dataDir: 'file' }[dd.keySource.kind],
        path: keyFile,
        mode: mode === null ? null : modeText(mode),
      },
      migrations: { applied, pending },
    };
    const details = kv(
      [
        ['data dir', dir],
        ['database', dd.db.path],
        [
          'master key',
          keyFile
            ? `${keyFile} (${dd.keySource.kind === 'file' ? 'masterKeyFile, ' : ''}mode ${json.master_key.mode})`
            : 'from MSGD_MASTER_KEY (no key file)',
        ],
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
        '(umask 077; openssl rand -hex 32 > /etc/msgd/master.key) && msgctl --master-key-file /etc/msgd/master.key init',
      ),
    )
    .action(withGlobals(init));
}
