// Ids are `<prefix>_<ULID>` and the ULID starts with its millisecond time (src/lib/ids.ts),
// so a time bound is an id bound: range scans on the primary key instead of a time index.

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** The smallest id of this prefix that can have been created at or after `ms`. */
export function idFloor(prefix: string, ms: number): string {
  let t = Math.max(0, Math.floor(ms));
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return `${prefix}_${out}0000000000000000`;
}

/** The creation time (epoch ms) an id carries; NaN for a string that is no such id. */
export function idTime(id: string): number {
  const ulid = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  if (ulid.length !== 10) return NaN;
  let t = 0;
  for (const ch of ulid) {
    const v = ALPHABET.indexOf(ch);
    if (v < 0) return NaN;
    t = t * 32 + v;
  }
  return t;
}
