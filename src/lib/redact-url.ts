// A PostgreSQL URL as msgd may show it: in errors, logs and start-up messages every password is
// `***`, whether it sits in the userinfo (`postgres://user:secret@host/db`) or in a parameter
// whose name holds "password" (`?password=secret`, `sslpassword=`, a `key=value` connection
// string's `password='it''s'`). The masking works on the text as written, not on a URL parser's
// reading of it: a password typed without percent-encoding (`/`, `?`, `#`, `@` from
// `openssl rand -base64`) makes a parser see a host and port, or fail, and would show it whole.

const MASK = '***';

// A parameter: its name, `=`, and its value. In a URL's query the value runs to the next `&`
// (pg reads a space there as part of it); in a `key=value` string it is quoted, or runs to the
// next space.
const URL_PARAM = /([?&]([^&=]+)=)([^&]*)/g;
const KEY_VALUE = /((?:^|\s)([^\s=]+)\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)/g;

function decoded(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/** `url` with every password in it replaced by `***`; anything else is left as written. */
export function redactUrl(url: string): string {
  let out = url;
  // The userinfo's password runs from the first `:` after `//` to the last `@`: a user name
  // cannot hold a `:`, a password may hold anything. (A URL without a password but with `@`
  // in its parameters after a port loses more than the password: never less.)
  const scheme = out.indexOf('://');
  if (scheme !== -1) {
    const start = scheme + 3;
    const at = out.lastIndexOf('@');
    const colon = out.indexOf(':', start);
    if (colon !== -1 && colon < at) out = `${out.slice(0, colon + 1)}${MASK}${out.slice(at)}`;
  }
  return out.replace(scheme === -1 ? KEY_VALUE : URL_PARAM, (all, head: string, name: string) =>
    decoded(name).toLowerCase().includes('password') ? `${head}${MASK}` : all,
  );
}
