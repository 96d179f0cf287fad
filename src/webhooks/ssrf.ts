import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { AppError } from '../lib/errors.js';

// Partner-supplied URLs must not reach msgd's own network: loopback, private ranges,
// link-local (cloud metadata at 169.254.169.254), CGNAT and the other special-purpose
// blocks. Checked when an endpoint is registered AND on every connection, against the
// address actually dialled, so a DNS answer that changes later (rebinding) gains nothing.

type Range = [prefix: bigint, bits: number, label: string];

function v4(ip: string): bigint | null {
  const parts = ip.split('.');
  if (parts.length !== 4) return null;
  let n = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = (n << 8n) | BigInt(Number(p));
  }
  return n;
}

function v6(ip: string): bigint | null {
  let s = ip.split('%')[0];
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two hex groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = v4(dotted[1]);
    if (n === null) return null;
    s = s.slice(0, -dotted[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...Array(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  let n = 0n;
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    n = (n << 16n) | BigInt(parseInt(g, 16));
  }
  return n;
}

const r4 = (cidr: string, label: string): Range => {
  const [ip, bits] = cidr.split('/');
  return [v4(ip)!, Number(bits), label];
};
const r6 = (cidr: string, label: string): Range => {
  const [ip, bits] = cidr.split('/');
  return [v6(ip)!, Number(bits), label];
};

const V4: Range[] = [
  r4('169.254.169.254/32', 'cloud metadata'),
  r4('0.0.0.0/8', 'unspecified ("this network")'),
  r4('10.0.0.0/8', 'private'),
  r4('100.64.0.0/10', 'shared address space (CGNAT)'),
  r4('127.0.0.0/8', 'loopback'),
  r4('169.254.0.0/16', 'link-local'),
  r4('172.16.0.0/12', 'private'),
  r4('192.0.0.0/24', 'IETF protocol assignments'),
  r4('192.0.2.0/24', 'documentation'),
  r4('192.88.99.0/24', '6to4 relay'),
  r4('192.168.0.0/16', 'private'),
  r4('198.18.0.0/15', 'benchmarking'),
  r4('198.51.100.0/24', 'documentation'),
  r4('203.0.113.0/24', 'documentation'),
  r4('224.0.0.0/4', 'multicast'),
  r4('240.0.0.0/4', 'reserved'),
];

const V6: Range[] = [
  r6('::/128', 'unspecified'),
  r6('::1/128', 'loopback'),
  r6('::/96', 'IPv4-compatible'),
  r6('64:ff9b:1::/48', 'local-use NAT64'),
  r6('100::/64', 'discard-only'),
  r6('2001::/23', 'IETF protocol assignments'),
  r6('2001:db8::/32', 'documentation'),
  r6('fc00::/7', 'unique local (private)'),
  r6('fe80::/10', 'link-local'),
  r6('fec0::/10', 'site-local'),
  r6('ff00::/8', 'multicast'),
];

// IPv6 forms that carry an IPv4 address inside: judged by that IPv4 address.
const EMBEDDED: [prefix: bigint, bits: number, extract: (n: bigint) => bigint][] = [
  [v6('::ffff:0:0')!, 96, (n) => n & 0xffffffffn],
  [v6('64:ff9b::')!, 96, (n) => n & 0xffffffffn],
  [v6('2002::')!, 16, (n) => (n >> 80n) & 0xffffffffn],
];

function inRange(n: bigint, width: number, [prefix, bits]: [bigint, number, ...unknown[]]): boolean {
  const shift = BigInt(width - bits);
  return n >> shift === prefix >> shift;
}

function classify4(n: bigint): string | null {
  for (const r of V4) if (inRange(n, 32, r)) return r[2];
  return null;
}

/** Why an address may not be dialled ("loopback", "private", ...), or null when it may. */
export function forbiddenReason(ip: string): string | null {
  const family = isIP(ip.split('%')[0]);
  if (family === 4) return classify4(v4(ip)!);
  if (family !== 6) return 'not an IP address';
  const n = v6(ip);
  if (n === null) return 'not an IP address';
  for (const [prefix, bits, extract] of EMBEDDED) {
    if (inRange(n, 128, [prefix, bits])) {
      const inner = classify4(extract(n));
      return inner ? `${inner} (IPv4 inside IPv6)` : null;
    }
  }
  for (const r of V6) if (inRange(n, 128, r)) return r[2];
  return null;
}

export class TargetRefused extends Error {
  readonly code = 'ERR_WEBHOOK_TARGET_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'TargetRefused';
  }
}

function refuseAny(host: string, addresses: string[]): void {
  for (const a of addresses) {
    const why = forbiddenReason(a);
    if (why) {
      throw new TargetRefused(
        a === host ? `${host} is a ${why} address` : `${host} resolves to ${a}, a ${why} address`,
      );
    }
  }
}

function resolveAll(host: string): Promise<string[]> {
  return new Promise((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (err, list) =>
      err ? reject(err) : resolve(list.map((a) => a.address)),
    ),
  );
}

/**
 * Registration check of an endpoint URL: HTTPS, no credentials in it, and (unless private
 * targets are allowed) a host whose every address is public. Throws AppError.
 */
export async function checkEndpointUrl(raw: string, allowPrivate: boolean): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('invalid_request', 'the url is not a valid absolute URL', [
      { field: 'url', message: 'an https:// URL' },
    ]);
  }
  if (url.protocol !== 'https:') {
    throw new AppError('invalid_request', 'webhook endpoints must use https://', [
      { field: 'url', message: 'must start with https://' },
    ]);
  }
  if (url.username || url.password) {
    throw new AppError(
      'invalid_request',
      'the url must not contain credentials; verify requests by their signature instead',
      [{ field: 'url', message: 'no user:password@ part' }],
    );
  }
  if (allowPrivate) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    try {
      addresses = await resolveAll(host);
    } catch (e: any) {
      throw new AppError('invalid_request', `the host ${host} does not resolve (${e?.code ?? 'DNS error'})`, [
        { field: 'url', message: 'a host name with a public DNS record' },
      ]);
    }
  }
  try {
    refuseAny(host, addresses);
  } catch (e) {
    throw new AppError(
      'url_not_allowed',
      `refused: ${(e as Error).message}; endpoints must be reachable on the public internet`,
      [{ field: 'url', message: 'loopback, private, link-local, CGNAT and metadata addresses are refused' }],
    );
  }
  return url;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls.connect that fails the connection when any address of the host is
 * forbidden. IP-literal hosts never reach a lookup: guardIpLiteral covers those.
 */
export function guardedLookup(
  hostname: string,
  options: { all?: boolean; family?: number } | number,
  cb: LookupCallback,
): void {
  const opts = typeof options === 'number' ? { family: options } : (options ?? {});
  dnsLookup(hostname, { all: true, verbatim: true, family: opts.family ?? 0 }, (err, list) => {
    if (err) return cb(err, opts.all ? [] : '', 0);
    try {
      refuseAny(
        hostname,
        list.map((a) => a.address),
      );
    } catch (e) {
      return cb(e as NodeJS.ErrnoException, opts.all ? [] : '', 0);
    }
    if (opts.all) return cb(null, list);
    cb(null, list[0].address, list[0].family);
  });
}

/** Connection-time check of a host written as an IP address. */
export function guardIpLiteral(host: string): TargetRefused | null {
  const h = host.replace(/^\[|\]$/g, '');
  if (!isIP(h)) return null;
  const why = forbiddenReason(h);
  return why ? new TargetRefused(`${h} is a ${why} address`) : null;
}
