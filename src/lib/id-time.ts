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

/** The millisecond time an id was created at (its ULID's first 10 characters). */
export function idTime(id: string): number {
  const body = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let t = 0;
  for (const c of body) t = t * 32 + ALPHABET.indexOf(c);
  return t;
}
