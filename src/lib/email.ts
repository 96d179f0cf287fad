// Pragmatic address check (the WHATWG "valid e-mail address" rule, used by browsers):
// no display names, no quoted local parts, a dotted domain of LDH labels.
const EMAIL =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+$/;

export function isEmail(input: string): boolean {
  return typeof input === 'string' && input.length <= 254 && EMAIL.test(input) && input.split('@')[0].length <= 64;
}

/**
 * The form a contact is found by: mailboxes are case-insensitive in practice (every major
 * provider ignores case), so ANN@Example.com and ann@example.com are one contact. Messages
 * still go to the address exactly as the partner wrote it.
 */
export function contactEmail(address: string): string {
  return address.trim().toLowerCase();
}
