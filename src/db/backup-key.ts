import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { DataDirError } from './errors.js';
import { parseKeyFile } from './master-key.js';

// The master key beside a backup. The backup holds provider secrets sealed with this key:
// whoever has both files can open them, so the file says so in its first lines, and the
// operator is told to keep it somewhere other than the backups.

export function writeBackupKey(keyFile: string, backupFile: string, key: Buffer): void {
  const text = [
    `# msgd master key for the backup ${basename(backupFile)}.`,
    '# SECRET: whoever has this file and the backup can read every provider secret in it.',
    '# Store it apart from the backup (another place, another medium), mode 0600.',
    '# msgctl restore <backup> --key <this file>',
    key.toString('base64'),
    '',
  ].join('\n');
  writeFileSync(keyFile, text, { mode: 0o600, flag: 'wx' });
  chmodSync(keyFile, 0o600);
}

/** A key written by writeBackupKey, or a data directory's master.key. */
export function readKeyFile(keyFile: string): Buffer {
  let text: string;
  try {
    text = readFileSync(keyFile, 'utf8');
  } catch (e) {
    throw new DataDirError(`cannot read the key file ${keyFile}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
  return parseKeyFile(text, keyFile);
}
