import { AppError } from '../lib/errors.js';

/** Bad command-line usage (conflicting or malformed flags): exit code 2, like commander's own. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** The one rule for exit codes, as `msgctl --help` states it. */
export const EXIT_CODES_HELP = [
  'Exit codes:',
  '  0  ok',
  '  1  refused by a rule checked against the data (unknown partner, insufficient funds,',
  '     a channel already assigned), or failed',
  '  2  usage error, found before any data is read: a missing or unknown option or command,',
  '     or a malformed argument (an amount that is not a number or has the wrong sign,',
  '     an unknown channel type, gateway kind or scope, an unreadable expiry)',
].join('\n');

/** Collapse a possibly multi-line message into the one line msgctl promises on stderr. */
export function oneLine(s: string): string {
  return s
    .trim()
    .split(/\s*\n\s*/)
    .join('; ');
}

/** The message after "msgctl: ". AppError details are appended compactly, field first. */
export function describeError(e: unknown): string {
  if (e instanceof AppError) {
    const details = e.details.map((d) => (d.field ? `${d.field}: ${d.message}` : d.message));
    return oneLine(details.length ? `${e.message}: ${details.join('; ')}` : e.message);
  }
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    // SQLite's own wording ("database is locked") means little to an operator without this.
    if (code === 'SQLITE_BUSY') return 'the database is busy (another process holds a write lock); try again';
    return oneLine(e.message || e.name);
  }
  return oneLine(String(e));
}

export function exitCodeFor(e: unknown): number {
  return e instanceof UsageError ? EXIT_USAGE : EXIT_FAILURE;
}
