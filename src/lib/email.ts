import { domainToASCII, domainToUnicode } from 'node:url';

// Pragmatic address check (the WHATWG "valid e-mail address" rule, used by browsers):
// no display names, no quoted local parts, a dotted domain of LDH labels.
const EMAIL =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+$/;

/** RFC 5322's dot-atom: dots only between characters, never two together. */
const DOT_ATOM = /^[^.](?:\.?[^.])*$/;

export function isEmail(input: string): boolean {
  if (typeof input !== 'string' || input.length > 254 || !EMAIL.test(input)) return false;
  const at = input.lastIndexOf('@');
  const local = input.slice(0, at);
  const domain = input.slice(at + 1);
  if (local.length > 64 || !DOT_ATOM.test(local)) return false;
  // A top-level domain is never all digits (RFC 3696 section 2): 127.0.0.1 and example.1 are
  // no mail domains. A label in punycode (xn--) must decode.
  if (/^\d+$/.test(domain.slice(domain.lastIndexOf('.') + 1))) return false;
  return domain.split('.').every(validPunycode);
}

/**
 * A label in punycode (xn--…) must decode to Unicode and encode back to itself. Checked label by
 * label and both ways: Node 20 and 22 map a label that does not decode to '', Node 24 leaves it
 * as it is.
 */
function validPunycode(label: string): boolean {
  if (!/^xn--/i.test(label)) return true;
  const unicode = domainToUnicode(label);
  return (
    unicode !== '' && unicode.toLowerCase() !== label.toLowerCase() && domainToASCII(unicode) === label.toLowerCase()
  );
}

/**
 * The address with an internationalised domain in its ASCII (punycode) form, as DNS and every
 * provider take it: ann@bücher.de → ann@xn--bcher-kva.de. ASCII domains are left exactly as
 * written; a domain that is not a valid IDN is left as is (isEmail then refuses it).
 */
export function asciiDomain(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return address;
  const domain = address.slice(at + 1);
  if (/^[\x00-\x7f]*$/.test(domain)) return address;
  const ascii = domainToASCII(domain);
  return ascii ? address.slice(0, at + 1) + ascii : address;
}

/** The address a partner gave, as msgd stores and sends it (trimmed, domain in ASCII); null when it is not valid. */
export function normalizeEmail(input: string): string | null {
  const address = asciiDomain(input.trim());
  return isEmail(address) ? address : null;
}

/**
 * The form a contact is found by: mailboxes are case-insensitive in practice (every major
 * provider ignores case), so ANN@Example.com and ann@example.com are one contact. Messages
 * still go to the address exactly as the partner wrote it.
 */
export function contactEmail(address: string): string {
  return asciiDomain(address.trim()).toLowerCase();
}

/**
 * The form a console login is stored and found by: trimmed, the domain in ASCII, lower case. Every
 * spelling of one address (ANN@Bücher.de, ann@xn--bcher-kva.de, a full-width domain) is one key,
 * for the lookup and for the login throttle alike.
 */
export function loginEmail(address: string): string {
  return asciiDomain(address.trim()).toLowerCase();
}
