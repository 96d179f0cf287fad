import pino, { type Logger, type LoggerOptions } from 'pino';

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

export function createLogger(level: string, opts: { pretty?: boolean; destination?: NodeJS.WritableStream } = {}): Logger {
  const options: LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: 'msgd' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return opts.destination ? pino(options, opts.destination as any) : pino(options);
}
