import pino, { type Bindings, type ChildLoggerOptions, type Logger, type LoggerOptions } from 'pino';
import type { LogSink } from '../lib/log-sink.js';

// Everything that could carry a credential is censored before it reaches a log line:
// partner tokens, provider signatures, and any body field named like a secret.
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-hub-signature"]',
  'req.headers["x-hub-signature-256"]',
  'req.headers["x-twilio-signature"]',
  'req.headers["x-twilio-email-event-webhook-signature"]',
  'headers.authorization',
  '*.authorization',
  '*.secret',
  '*.secrets',
  '*.password',
  '*.auth_token',
  '*.access_token',
  '*.api_key',
  '*.app_secret',
  '*.token',
  'secret',
  'secrets',
];

/**
 * Field names whose string values are secrets, at any depth: pino's paths above match fixed
 * places only, and an error can carry its request's headers several levels down
 * (`err.request.headers.authorization`), a provider's settings its own names
 * (`page_access_token`, `api_key_secret`, `signing_secret`), a webhook its signature headers.
 */
export const SECRET_FIELD =
  /^(?:authorization|proxy-authorization|cookie|set-cookie|password|passphrase|secret|secrets|token|tokens|api_?key|x-api-key|signature|session_?id|master_?key|private_?key|.*[_-](?:token|secret|password|signature|api_?key)|x-[a-z0-9-]*signature[a-z0-9-]*)$/i;

const STRING_FIELD = /"((?:[^"\\]|\\.)*)":"((?:[^"\\]|\\.)*)"/g;

/** One serialized log line with every secret-named string field's value censored. */
export function redactLine(line: string): string {
  return line.replace(STRING_FIELD, (all, key: string) => (SECRET_FIELD.test(key) ? `"${key}":"[redacted]"` : all));
}

export function createLogger(
  level: string,
  opts: { pretty?: boolean; destination?: NodeJS.WritableStream | LogSink } = {},
): Logger {
  const options: LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: 'msgd' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  const dest = opts.destination ?? process.stdout;
  // Every line passes through redactLine on its way out, whatever logged it.
  return pino(options, { write: (line: string) => dest.write(redactLine(line)) });
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

// The level methods are put on the prototype in the class's static block below.
export interface LazyRequestLogger extends Pick<Logger, (typeof LEVELS)[number]> {}

/**
 * A request's logger, made the first time something logs through it. Fastify gives every
 * request a child of the server's logger, and pino's child() runs the redaction over its
 * bindings, a visible share of a webhook's main-thread time, while most requests log nothing.
 */
export class LazyRequestLogger {
  #real: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get real(): Logger {
    return (this.#real ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.#real?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real.level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.real.child(bindings, options);
  }

  static {
    for (const level of LEVELS) {
      Object.defineProperty(LazyRequestLogger.prototype, level, {
        value(this: LazyRequestLogger, ...args: unknown[]) {
          (this.real[level] as (...a: unknown[]) => void)(...args);
        },
        writable: true,
        configurable: true,
      });
    }
  }
}

/** A request's path as logs show it: no query string, and no secret an invite link carries. */
export function loggedPath(url: string): string {
  return url.split('?')[0].replace(/^\/ui\/invite\/[^/]+/, '/ui/invite/[redacted]');
}
