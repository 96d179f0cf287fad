// A PostgreSQL URL as msgd may show it: in errors, logs and start-up messages the password is
// `***`, whether it sits in the userinfo (`postgres://user:secret@host/db`) or in a `password=`
// parameter (`?password=secret`, or a `key=value` connection string's `password=secret`).

const MASK = '***';

/** `url` with every password in it replaced by `***`; anything else is left as written. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = MASK;
    for (const key of [...u.searchParams.keys()]) {
      if (key.toLowerCase() === 'password') u.searchParams.set(key, MASK);
    }
    // URL encodes `***` in the query as `%2A%2A%2A`: show it as written.
    return u.toString().replace(/%2A%2A%2A/g, MASK);
  } catch {
    // Not a URL (a libpq `host=… password=…` string, or a malformed URL): mask by pattern.
    return url
      .replace(/(\/\/[^/@:]*:)[^@/]*@/g, `$1${MASK}@`)
      .replace(/(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)/gi, `$1${MASK}`);
  }
}
