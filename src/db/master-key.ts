import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  openSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { DataDirError } from './errors.js';

// The master key: 32 bytes that seal every stored secret (src/core/secrets.ts). msgd and msgctl
// take it from one of three places: MSGD_MASTER_KEY; the file the masterKeyFile setting names
// (MSGD_MASTER_KEY_FILE, --master-key-file); else <dataDir>/master.key, created on first start.
// The first two together are refused: which one is right cannot be guessed, and the wrong one
// leaves every stored secret unreadable. No message here ever holds a byte of the key or of the
// file's text.

export const KEY_FILE = 'master.key';

/** Where the key in use came from. */
export type KeySource = { kind: 'env' } | { kind: 'file'; path: string } | { kind: 'dataDir'; path: string };

export interface MasterKey {
  key: Buffer;
  source: KeySource;
}

/** How operators and messages name the key's origin. */
export function describeKeySource(source: KeySource): string {
  if (source.kind === 'env') return 'MSGD_MASTER_KEY';
  if (source.kind === 'file') return `masterKeyFile ${source.path}`;
  return source.path;
}

/** The key file's path, or null when the key comes from the environment. */
export function keyFileOf(source: KeySource): string | null {
  return source.kind === 'env' ? null : source.path;
}

const FORMAT = '32 bytes written as 64 hex characters or base64 on one line (openssl rand -hex 32)';

function decode(value: string): Buffer | null {
  const v = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(v)) return Buffer.from(v, 'hex');
  const b = Buffer.from(v, 'base64');
  return b.length === 32 && /^[A-Za-z0-9+/=_-]+$/.test(v) ? b : null;
}

/** Decode MSGD_MASTER_KEY: 64 hex chars or base64 of exactly 32 bytes. */
export function decodeMasterKey(value: string): Buffer {
  const key = decode(value);
  if (!key) throw new DataDirError('MSGD_MASTER_KEY must be 32 bytes, written as 64 hex characters or base64');
  return key;
}

/**
 * A key file's text: one key line (hex or base64) among blank and `#` comment lines, as
 * master.key, a backup's .master-key and `openssl rand -hex 32 > file` all write it.
 */
export function parseKeyFile(text: string, file: string): Buffer {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const key = lines.length === 1 ? decode(lines[0]) : null;
  if (!key) throw new DataDirError(`${file} does not hold a master key: it must hold ${FORMAT}`);
  return key;
}

/** A key file's permission bits, or null when it does not exist. */
export function keyFileMode(file: string): number | null {
  return existsSync(file) ? statSync(file).mode & 0o777 : null;
}

export const modeText = (mode: number) => mode.toString(8).padStart(4, '0');

/**
 * The file masterKeyFile names. Like ssh with a private key, refused when another account may
 * read or change it: whoever reads it can open every provider secret, whoever writes it can
 * make them all unreadable.
 */
export function readMasterKeyFile(file: string): Buffer {
  const named = `the master key file ${file}`;
  // One open, then the checks and the read on that same handle: a file swapped between a
  // check by path and a read by path would be read unchecked. O_NONBLOCK: a FIFO put in its
  // place does not hang the start.
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      throw new DataDirError(
        `${named} does not exist (set by masterKeyFile, MSGD_MASTER_KEY_FILE or --master-key-file): point it at the key the stored secrets were sealed with, or create a new one: (umask 077; openssl rand -hex 32 > ${file})`,
      );
    if (code === 'EACCES')
      throw new DataDirError(
        `cannot read ${named} (EACCES): it must be owned by the user msgd runs as, mode 0600 (chown that user, chmod 600 ${file})`,
      );
    throw new DataDirError(`cannot read ${named} (${code ?? e}): msgd's user must be able to read it`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new DataDirError(`${named} is not a regular file`);
    const mode = st.mode & 0o777;
    if (mode & 0o077) {
      throw new DataDirError(
        `${named} has mode ${modeText(mode)}: other accounts may read or change it; it must be readable by its owner alone (chmod 600 ${file})`,
      );
    }
    let text: string;
    try {
      text = readFileSync(fd, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new DataDirError(
        `cannot read ${named} (${code ?? e}): it must be owned by the user msgd runs as, mode 0600 (chown that user, chmod 600 ${file})`,
      );
    }
    return parseKeyFile(text, named);
  } finally {
    closeSync(fd);
  }
}

/**
 * The key msgd and msgctl use for a data directory. `keyFile` is the masterKeyFile setting;
 * `create` makes <dataDir>/master.key when no key is given at all and none is there yet.
 */
export function loadMasterKey(
  dir: string,
  env: NodeJS.ProcessEnv,
  keyFile: string | null | undefined,
  create: boolean,
): MasterKey {
  const given = givenMasterKey(env, keyFile);
  if (given) return given;
  const own = join(dir, KEY_FILE);
  if (!existsSync(own)) {
    if (!create)
      throw new DataDirError(
        `no master key: ${own} is missing and neither MSGD_MASTER_KEY nor masterKeyFile (MSGD_MASTER_KEY_FILE) is set`,
      );
    writeFileSync(own, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
    chmodSync(own, 0o600);
  }
  const text = readFileSync(own, 'utf8');
  return { key: parseKeyFile(text, own), source: { kind: 'dataDir', path: own } };
}

/**
 * The key msgd and msgctl use on PostgreSQL (database.url): there is no data directory to hold
 * a key file, so it comes from MSGD_MASTER_KEY or the masterKeyFile setting, one of them and not
 * both; neither set is refused with one line saying how to give it.
 */
export function loadMasterKeyWithoutDataDir(env: NodeJS.ProcessEnv, keyFile: string | null | undefined): MasterKey {
  const given = givenMasterKey(env, keyFile);
  if (given) return given;
  throw new DataDirError(
    'no master key: on PostgreSQL (database.url) there is no data directory to keep one in; set MSGD_MASTER_KEY, or masterKeyFile (MSGD_MASTER_KEY_FILE, --master-key-file) to a file of mode 0600 holding the key (umask 077; openssl rand -hex 32 > /etc/msgd/master.key)',
  );
}

/** The key MSGD_MASTER_KEY or the masterKeyFile setting gives (both is refused), or null for neither. */
function givenMasterKey(env: NodeJS.ProcessEnv, keyFile: string | null | undefined): MasterKey | null {
  const file = keyFile ? resolve(keyFile) : null;
  if (env.MSGD_MASTER_KEY && file) {
    throw new DataDirError(
      `two master keys are given, MSGD_MASTER_KEY and the key file ${file} (masterKeyFile): keep one (unset MSGD_MASTER_KEY, or masterKeyFile, MSGD_MASTER_KEY_FILE and --master-key-file)`,
    );
  }
  if (env.MSGD_MASTER_KEY) return { key: decodeMasterKey(env.MSGD_MASTER_KEY), source: { kind: 'env' } };
  if (file) return { key: readMasterKeyFile(file), source: { kind: 'file', path: file } };
  return null;
}
