import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { backupFileName, keepKeyBeside, snapshot } from '../db/backup.js';
import { openDataDir } from '../db/datadir.js';
import { refuseOnPostgres } from '../db/open-store.js';
import { describeKeySource } from '../db/master-key.js';
import { configFor, withGlobals, type Globals } from './context.js';
import { examples } from './help.js';
import { processIO, type CliWritable } from './io.js';
import { kv, lines, type Result } from './output.js';

// msgctl backup: a consistent snapshot of a data directory, taken beside a running msgd.

const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;

/** A directory (existing, or named with a trailing slash) gets a timestamped file; anything else is the file. */
function targetFile(arg: string, now: number): string {
  const path = resolve(arg);
  if (arg.endsWith('/') && !existsSync(path)) mkdirSync(path, { recursive: true, mode: 0o700 });
  if (existsSync(path) && statSync(path).isDirectory()) return join(path, backupFileName(now));
  return path;
}

/** Progress on stderr, redrawn in place, only for a person at a terminal. */
function progressLine(stderr: CliWritable, enabled: boolean) {
  let last = '';
  return {
    update(done: number, total: number) {
      if (!enabled) return;
      const pct = Math.min(99, Math.floor((done / Math.max(total, 1)) * 100));
      const line = `backing up: ${pct}% (${mb(done)} of about ${mb(total)})`;
      if (line !== last) stderr.write(`\r\x1b[2K${line}`);
      last = line;
    },
    clear() {
      if (enabled && last) stderr.write('\r\x1b[2K');
    },
  };
}

async function backup(globals: Globals, dest: string, opts: { key: boolean }): Promise<Result> {
  const config = configFor(globals);
  refuseOnPostgres(
    config,
    "msgctl backup copies a data directory's SQLite database",
    "back it up with pg_dump (pg_dump -Fc -f msgd.dump <url>) or PostgreSQL's continuous archiving (WAL archiving with pgBackRest or Barman, or a managed service's point-in-time recovery); no backup was taken",
  );
  // Only to read the key and find the database: no migration check, a backup copies as it is.
  const io = globals.io ?? processIO();
  const dd = openDataDir(config.dataDir, {
    create: false,
    migrate: false,
    env: io.env,
    masterKeyFile: config.masterKeyFile,
  });
  const dbPath = dd.db.path;
  const key = { key: dd.masterKey, source: dd.keySource };
  dd.close();
  const file = targetFile(dest, Date.now());
  // Only a terminal on stderr gets the redrawn line: a file or pipe would keep every frame.
  const progress = progressLine(io.stderr, !globals.json && !!(io.stderr as { isTTY?: boolean }).isTTY);
  let result;
  try {
    result = await snapshot(dbPath, file, { onProgress: (d, t) => progress.update(d, t) });
  } finally {
    progress.clear();
  }
  const keyFile = opts.key
    ? keepKeyBeside({ ...config, backup: { ...config.backup, withKey: true } }, file, key)
    : null;
  const notices: string[] = [];
  if (keyFile) {
    notices.push(
      `msgctl: ${keyFile} holds the master key. Whoever has it and the backup can read every provider secret: store it apart from the backup.`,
    );
  } else if (key.source.kind !== 'dataDir') {
    notices.push(
      `msgctl: the master key comes from ${describeKeySource(key.source)} and was not written; restoring needs that key.`,
    );
  } else {
    notices.push(`msgctl: no key file written; restoring needs the master key (${key.source.path}).`);
  }
  return {
    json: {
      file: result.file,
      key_file: keyFile,
      bytes: result.bytes,
      duration_ms: result.durationMs,
      source: dbPath,
    },
    text: lines(
      `Backed up ${dbPath}.`,
      kv(
        [
          ['backup', result.file],
          ['key file', keyFile ?? '(none)'],
          ['size', mb(result.bytes)],
          ['took', `${(result.durationMs / 1000).toFixed(1)} s`],
        ],
        '  ',
      ),
      `Restore with: msgctl --data-dir <empty dir> restore ${result.file}${keyFile ? ` --key ${keyFile}` : ''}`,
    ),
    notices,
  };
}

export function registerBackup(program: Command) {
  program
    .command('backup')
    .description('take a consistent backup of the database while msgd runs, with the master key beside it')
    .argument('<dir|file>', 'a directory (a timestamped file is made in it) or the backup file to write')
    .option('--no-key', 'do not write the master key file beside the backup')
    .addHelpText(
      'after',
      examples(
        'msgctl backup /var/backups/msgd/',
        'msgctl backup /mnt/offsite/msgd-before-upgrade.db',
        'msgctl backup /var/backups/msgd/ --no-key --json',
      ) +
        `\nThe key file (<backup>.master-key) and the backup together open every provider secret:\nkeep them in different places. Restore with "msgctl restore".\n`,
    )
    .action(withGlobals(backup));
}
