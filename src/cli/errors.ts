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
