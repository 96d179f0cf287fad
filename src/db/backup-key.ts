import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { DataDirError } from './datadir.js';

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

/** A key written by writeBackupKey, or a data directory's master.key (base64, no comments). */
export function readKeyFile(keyFile: string): Buffer {
  let text: string;
  try {
    text = readFileSync(keyFile, 'utf8');
  } catch (e) {
    throw new DataDirError(`cannot read the key file ${keyFile}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const key = lines.length === 1 ? Buffer.from(lines[0], 'base64') : Buffer.alloc(0);
  if (key.length !== 32) throw new DataDirError(`${keyFile} does not hold a 32-byte base64 master key`);
  return key;
}
