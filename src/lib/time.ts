// Times: ISO 8601 UTC for every surface, and the durations operators type ("30m", "2d").

const DAY = 86_400_000;
/** The last day Date#toISOString writes with a four-digit year (9999-12-31). */
const LAST_PLAIN_DAY = 2_932_896;
const dayPrefixes = new Map<number, string>();
const p2 = (n: number) => (n < 10 ? '0' + n : '' + n);
const p3 = (n: number) => (n < 10 ? '00' + n : n < 100 ? '0' + n : '' + n);

/**
 * `2026-11-22T10:00:00.000Z` for integer ms, as Date#toISOString writes it. The date part is
 * kept per day: list pages format four times a row (npm run bench: v1 conversations list).
 */
export function iso(ms: number): string;
export function iso(ms: number | null | undefined): string | null;
export function iso(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  const day = Math.floor(ms / DAY);
  if (!Number.isInteger(ms) || day < 0 || day > LAST_PLAIN_DAY) return new Date(ms).toISOString();
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size > 4096) dayPrefixes.clear();
    prefix = new Date(day * DAY).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  let r = ms - day * DAY;
  const h = Math.floor(r / 3_600_000);
  r -= h * 3_600_000;
  const m = Math.floor(r / 60_000);
  r -= m * 60_000;
  const s = Math.floor(r / 1000);
  return prefix + p2(h) + ':' + p2(m) + ':' + p2(s) + '.' + p3(r - s * 1000) + 'Z';
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY, w: 7 * DAY };

/** "90m", "12h", "30d", "2w" (also "s" and "ms") in milliseconds; null when it is not a duration. */
export function parseDuration(text: string): number | null {
  const m = /^(\d+)\s*(ms|s|m|h|d|w)$/.exec(text.trim());
  return m ? Number(m[1]) * UNIT_MS[m[2]] : null;
}

/** An ISO 8601 date or date-time in ms since the epoch; null when the text is not one. */
export function parseIsoTime(text: string): number | null {
  // Date.parse alone accepts "1" or "March": require an ISO shape so typos are not dates.
  const s = text.trim();
  const t = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(s) ? Date.parse(s) : NaN;
  return Number.isNaN(t) ? null : t;
}

/** A point in the past: an ISO date, or a duration back from now ("30m", "2h", "7d"). */
export function parseSince(input: string, now = Date.now()): number {
  const back = parseDuration(input);
  if (back !== null) return now - back;
  const t = parseIsoTime(input);
  if (t === null) throw new Error(`invalid time "${input}": use an ISO date or a duration like 15m, 2h, 7d`);
  return t;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
