// ISO 8601 UTC for integer ms, identical to Date#toISOString for years 1970-9999 but about 5x
// faster: list pages format four timestamps per row, and that showed up in profiles.

const DAY = 86_400_000;
const days = new Map<number, string>();

const p2 = (n: number) => (n < 10 ? '0' + n : '' + n);
const p3 = (n: number) => (n < 10 ? '00' + n : n < 100 ? '0' + n : '' + n);

export function fastIso(ms: number): string {
  const day = Math.floor(ms / DAY);
  let prefix = days.get(day);
  if (prefix === undefined) {
    if (days.size > 4096) days.clear();
    prefix = new Date(day * DAY).toISOString().slice(0, 11);
    days.set(day, prefix);
  }
  let r = ms - day * DAY;
  const h = Math.floor(r / 3_600_000);
  r -= h * 3_600_000;
  const m = Math.floor(r / 60_000);
  r -= m * 60_000;
  const s = Math.floor(r / 1000);
  return prefix + p2(h) + ':' + p2(m) + ':' + p2(s) + '.' + p3(r - s * 1000) + 'Z';
}

export function fastIsoOrNull(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : fastIso(ms);
}
