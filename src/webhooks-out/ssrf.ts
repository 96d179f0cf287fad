import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { AppError } from '../lib/errors.js';

// Partner-supplied URLs must not reach msgd's own network: loopback, private ranges,
// link-local (cloud metadata at 169.254.169.254), CGNAT and the other special-purpose
// blocks. Checked when an endpoint is registered AND on every connection, against the
// address actually dialled, so a DNS answer that changes later (rebinding) gains nothing.

// The special-purpose ranges come from ipaddr.js, which follows the IANA registries (RFC 6890
// and its successors: 5f00::/16, 3fff::/20, ::ffff:0:0:0/96, ...). msgd adds three judgements
// of its own: the cloud metadata address gets its own name, an IPv6 address that carries an
// IPv4 address is judged by that IPv4 address, and IPv6 outside the global unicast block
// 2000::/3 (IETF-reserved ::/8 and the rest) is never a public host.

const { IPv4, IPv6 } = ipaddr;

const LABELS: Record<string, string> = {
  unspecified: 'unspecified',
  broadcast: 'reserved',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'shared address space (CGNAT)',
  private: 'private',
  reserved: 'reserved',
  as112: 'AS112 DNS sink',
  as112v6: 'AS112 DNS sink',
  amt: 'AMT relay',
  uniqueLocal: 'unique local (private)',
  deprecatedSiteLocal: 'site-local',
  discard: 'discard-only',
  teredo: 'Teredo',
  benchmarking: 'benchmarking',
  deprecatedOrchid: 'ORCHID',
  orchid2: 'ORCHIDv2',
  droneRemoteIdProtocolEntityTags: 'drone remote ID (DRIP)',
  segmentRouting: 'segment routing (SRv6)',
};

const METADATA = IPv4.parse('169.254.169.254');
const NAT64 = IPv6.parse('64:ff9b::');
const GLOBAL_UNICAST = IPv6.parse('2000::');

function classify4(ip: ipaddr.IPv4): string | null {
  if (ip.match(METADATA, 32)) return 'cloud metadata';
  const range = ip.range();
  if (range === 'unicast') return null;
  if (range === 'unspecified') return 'unspecified ("this network")';
  return LABELS[range] ?? range;
}

const v4of = (a: number, b: number) => new IPv4([a >> 8, a & 0xff, b >> 8, b & 0xff]);

/** The IPv4 address an IPv6 form carries (mapped, RFC 6145 translated, NAT64 /96, 6to4), or null. */
function embedded(ip: ipaddr.IPv6, range: string): ipaddr.IPv4 | null {
  const p = ip.parts;
  if (range === 'ipv4Mapped' || range === 'rfc6145') return v4of(p[6], p[7]);
  if (range === 'rfc6052' && ip.match(NAT64, 96)) return v4of(p[6], p[7]);
  if (range === '6to4') return v4of(p[1], p[2]);
  return null;
}

function classify6(ip: ipaddr.IPv6): string | null {
  const range = ip.range();
  const inner = embedded(ip, range);
  if (inner) {
    const why = classify4(inner);
    return why ? `${why} (IPv4 inside IPv6)` : null;
  }
  if (range === 'rfc6052') return 'local-use NAT64';
  if (range !== 'unicast') return LABELS[range] ?? range;
  return ip.match(GLOBAL_UNICAST, 3) ? null : 'reserved (outside global unicast 2000::/3)';
}

/** Why an address may not be dialled ("loopback", "private", ...), or null when it may. */
export function forbiddenReason(ip: string): string | null {
  const bare = ip.split('%')[0];
  const family = isIP(bare);
  if (family === 4 && IPv4.isValidFourPartDecimal(bare)) return classify4(IPv4.parse(bare));
  if (family === 6 && IPv6.isValid(bare)) return classify6(IPv6.parse(bare));
  return 'not an IP address';
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
