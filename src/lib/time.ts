export function iso(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString();
}

/** Parse "30s", "5m", "2h", "7d" or an ISO date into milliseconds-since-epoch relative to now. */
export function parseSince(input: string, now = Date.now()): number {
  const m = /^(\d+)\s*(ms|s|m|h|d)$/.exec(input.trim());
  if (m) {
    const n = Number(m[1]);
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms'];
    return now - n * unit;
  }
  const t = Date.parse(input);
  if (Number.isNaN(t)) throw new Error(`invalid time "${input}": use an ISO date or a duration like 15m, 2h, 7d`);
  return t;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
