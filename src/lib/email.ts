// Pragmatic address check (the WHATWG "valid e-mail address" rule, used by browsers):
// no display names, no quoted local parts, a dotted domain of LDH labels.
const EMAIL =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+$/;

export function isEmail(input: string): boolean {
  return typeof input === 'string' && input.length <= 254 && EMAIL.test(input) && input.split('@')[0].length <= 64;
}
