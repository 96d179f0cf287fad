// One error type for the domain. It carries a stable code and no HTTP status: the http
// layer maps codes to statuses (src/web/errors.ts), the CLI prints the message.

export interface ErrorDetail {
  field?: string;
  message: string;
  code?: string;
}

export class AppError extends Error {
  readonly code: string;
  readonly details: ErrorDetail[];
  readonly data?: Record<string, unknown>;

  constructor(code: string, message: string, details: ErrorDetail[] = [], data?: Record<string, unknown>) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
    this.data = data;
  }
}

/** A validation issue (zod's, or one shaped like it) as an error detail: its dotted path and message. */
export interface Issue {
  path: readonly PropertyKey[];
  message: string;
}

export function issueDetails(issues: readonly Issue[]): ErrorDetail[] {
  return issues.map((i) => ({ field: i.path.map(String).join('.') || undefined, message: i.message }));
}

export const notFound = (what: string, ref: string) => new AppError('not_found', `${what} "${ref}" not found`);

export const invalid = (message: string, details: ErrorDetail[] = []) =>
  new AppError('invalid_request', message, details);

export const conflict = (message: string) => new AppError('conflict', message);
