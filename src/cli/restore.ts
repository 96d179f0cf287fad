import { existsSync, mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { keyFileFor } from '../db/backup.js';
import { readKeyFile } from '../db/backup-key.js';
import { openDataDir } from '../db/datadir.js';
import { refuseOnPostgres } from '../db/open-store.js';
import { readMasterKeyFile } from '../db/master-key.js';
import { lockDataDir } from '../db/instance-lock.js';
import { dataFilesIn, placeBackup, type PlacedBackup } from '../db/restore.js';
import { holdRestoredDispatches } from '../jobs/restore-hold.js';
import { AppError } from '../lib/errors.js';
import { JobQueue } from '../queue/queue.js';
import { configFor, coreCtxOf, withGlobals, type Globals } from './context.js';
import { checkTable, inspect } from './doctor.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { count, lines, type Result } from './output.js';
import type { Config } from '../config/schema.js';

// msgctl restore: a backup into an empty data directory, checked as msgctl doctor checks a
// data directory (with the full integrity check) before it is called restored.

async function restore(globals: Globals, backup: string, opts: { key?: string }): Promise<Result> {
  const config = configFor(globals);
  refuseOnPostgres(
    config,
    'msgctl restore places a SQLite backup into a data directory',
    "restore a pg_dump with pg_restore into an empty database, or use your archive's point-in-time recovery, then run msgctl migrate; nothing was restored",
  );
  const dir = resolve(config.dataDir);
  const source = resolve(backup);
  if (!existsSync(source)) throw new AppError('not_found', `no backup at ${source}`);
  const env = globals.io?.env ?? process.env;
  // A key kept outside the data directory is the key msgd will use: nothing is placed beside the
  // database, and a --key as well would be a second, possibly different, key.
  const given = env.MSGD_MASTER_KEY
    ? 'MSGD_MASTER_KEY is set'
    : config.masterKeyFile
      ? `masterKeyFile is set (${resolve(config.masterKeyFile)})`
      : null;
  if (given && opts.key) throw new UsageError(`${given}: it is the key msgd will use; drop --key`);
  if (config.masterKeyFile && !env.MSGD_MASTER_KEY) readMasterKeyFile(resolve(config.masterKeyFile));
  const keyPath = opts.key ? resolve(opts.key) : keyFileFor(source);
  if (!given && !existsSync(keyPath)) {
    throw new AppError(
      'invalid_request',
      `no master key: ${keyPath} does not exist; pass --key <file>, or set MSGD_MASTER_KEY or masterKeyFile to the key the backup was made with`,
    );
  }
  const key = given ? null : readKeyFile(keyPath);
  const present = dataFilesIn(dir);
  if (present.length) {
    throw new AppError(
      'conflict',
      `${dir} is not empty (${present.join(', ')}): restore only into an empty data directory, so nothing is overwritten`,
    );
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Held while restoring: a msgd started meanwhile would create a fresh database here.
  const lock = lockDataDir(dir);
  let placed: PlacedBackup | null = null;
  try {
    placed = placeBackup(dir, source, key);
    const held = await holdInFlight(dir, config, env);
    const checks = await inspect(dir, config, { integrity: 'full', env });
    const failed = checks.filter((c) => c.status === 'fail');
    if (failed.length) {
      throw new AppError(
        'restore_failed',
        `the backup did not pass its checks and was not restored (${dir} is empty again): ${failed.map((c) => `${c.name}: ${c.message}`).join('; ')}`,
      );
    }
    const pending = checks.find((c) => c.name === 'migrations' && c.status === 'warn');
    return {
      json: { ok: true, data_dir: dir, backup: source, key_file: key ? keyPath : null, held_messages: held, checks },
      text: lines(
        `Restored ${source} into ${dir}.`,
        '',
        checkTable(checks),
        '',
        ...(held > 0
          ? [
              `${count(held, 'message was', 'messages were')} waiting to be sent when the backup was taken and ${held === 1 ? 'is' : 'are'} held:`,
              'the server the backup came from may have sent them since. Check with the providers, then send them',
              '(flagged possible duplicates) with "msgctl messages release-held".',
              '',
            ]
          : []),
        pending
          ? 'The backup is from an older msgd: msgd applies its pending migrations at start (or run "msgctl migrate").'
          : 'Start msgd on this data directory.',
      ),
    };
  } catch (e) {
    // Leave the directory as empty as it was found, so the restore can simply be run again.
    placed?.remove();
    throw e;
  } finally {
    lock.release();
  }
}

/** Holds the messages the backup has waiting for their provider call (src/jobs/restore-hold.ts). */
async function holdInFlight(dir: string, config: Config, env: NodeJS.ProcessEnv): Promise<number> {
  const dd = openDataDir(dir, { create: false, migrate: false, env, masterKeyFile: config.masterKeyFile });
  try {
    return await holdRestoredDispatches(coreCtxOf(dd, config), new JobQueue(dd.db));
  } finally {
    dd.close();
  }
}

export function registerRestore(program: Command) {
  program
    .command('restore')
    .description('restore a backup into an empty data directory and check it (integrity, migrations, ledger)')
    .argument('<backup>', 'the backup file (msgctl backup, or a scheduled or pre-migration backup)')
    .option(
      '--key <file>',
      'the master key file to place in the data directory (default: <backup>.master-key beside the backup; not with MSGD_MASTER_KEY or masterKeyFile)',
    )
    .addHelpText(
      'after',
      examples(
        'msgctl --data-dir /var/lib/msgd restore /var/backups/msgd/msgd-20261126T021500Z.db',
        'msgctl --data-dir ./data restore backup.db --key /secure/backup.db.master-key',
      ),
    )
    .action(withGlobals(restore));
}
