// Parsing a URL costs more than most of what is done with it: provider endpoints and partner
// endpoints are few, calls to them many. undici's dispatcher.request takes origin and path
// apart, so each URL is split once and remembered.

export interface UrlTarget {
  origin: string;
  /** Path and query. */
  path: string;
}

const targets = new Map<string, UrlTarget>();
const MAX_TARGETS = 10_000;

/** The origin and path of an absolute URL; throws on one that does not parse, as new URL does. */
export function urlTarget(url: string): UrlTarget {
  let t = targets.get(url);
  if (t === undefined) {
    const u = new URL(url);
    t = { origin: u.origin, path: u.pathname + u.search };
    if (targets.size >= MAX_TARGETS) targets.clear();
    targets.set(url, t);
  }
  return t;
}
