import { InvalidArgumentError } from 'commander';
import { isChannelType } from '../core/channels.js';
import { CHANNEL_TYPES, type ChannelType } from '../core/context.js';
import { AppError, invalid } from '../lib/errors.js';
import { MoneyParseError, parseMoney, quoteInput } from '../lib/money.js';
import { parseDuration, parseIsoTime } from '../lib/time.js';
import { describeError, UsageError } from './errors.js';

/** Commander collector for options that may be given more than once (--set a=1 --set b=2). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Commander parser for counts such as --limit. */
export function positiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new InvalidArgumentError('expected a positive whole number');
  }
  return Number(value);
}

/** An expiry: a duration from now ("30d", "12h", "90m", "2w") or an ISO 8601 date/time. */
export function parseExpiry(input: string, now: number): number {
  const ms = parseDuration(input);
  if (ms !== null) {
    if (ms <= 0) throw invalid(`invalid expiry "${input}": must be in the future`);
    return now + ms;
  }
  const t = parseIsoTime(input);
  if (t === null) {
    throw invalid(`invalid expiry "${input}"`, [
      { field: 'expires', message: 'an ISO date such as 2027-01-31 or a duration such as 30d, 12h, 90m, 2w' },
    ]);
  }
  return t;
}

/** "key=value" pairs; the value may itself contain "=". */
export function parsePairs(list: string[] | undefined, flag: string): [string, string][] {
  return (list ?? []).map((item) => {
    const i = item.indexOf('=');
    if (i <= 0) throw new UsageError(`${flag} expects key=value, got ${quoteInput(item)}`);
    return [item.slice(0, i).trim(), item.slice(i + 1)];
  });
}

/** Read all of stdin; one trailing newline (from echo or a heredoc) is not part of a secret. */
export async function readStdin(stdin: AsyncIterable<Buffer | string> = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/**
 * Run a check of a command-line value that needs no data (the form of an amount, a channel
 * type, a scope name) and report what it refuses as a usage error: exit 2, like a missing option.
 */
export function usage<T>(check: () => T): T {
  try {
    return check();
  } catch (e) {
    if (e instanceof AppError || e instanceof MoneyParseError) throw new UsageError(describeError(e));
    throw e;
  }
}

/** An amount from the command line, in micro-units; its form and sign are usage errors. */
export function moneyArg(input: string, rule: 'any' | 'positive' | 'non-negative' | 'non-zero', what: string): number {
  const micro = usage(() => parseMoney(input));
  const ok =
    rule === 'positive' ? micro > 0 : rule === 'non-negative' ? micro >= 0 : rule === 'non-zero' ? micro !== 0 : true;
  if (!ok)
    throw new UsageError(
      `${what} must be ${rule === 'non-zero' ? 'a non-zero amount' : rule === 'positive' ? 'a positive amount' : 'zero or positive'}, got ${quoteInput(input)}`,
    );
  return micro;
}

export function channelTypeArg(input: string): ChannelType {
  if (!isChannelType(input))
    throw new UsageError(`unknown channel type ${quoteInput(input)}: one of ${CHANNEL_TYPES.join(', ')}`);
  return input;
}
