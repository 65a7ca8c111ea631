// The address a request came from, for per-address limits (registration routes on the
// gateway, wrong claim codes on the dashboard). X-Forwarded-For is written by whoever sends
// the request, so it is believed only as far as SVC_TRUSTED_PROXIES says: with N reverse
// proxies in front that each append the address they saw, the client is the N-th entry from
// the right; everything left of it may be made up by the client.
import { isIPv4, isIPv6 } from 'node:net';

export interface AddressSources {
  /** The TCP peer; unknown (null) in the dashboard, where Next does not expose it. */
  socketAddress: string | null | undefined;
  forwardedFor: string | string[] | null | undefined;
  /** How many reverse proxies in front of this process append to X-Forwarded-For. */
  trustedProxies: number;
}

/**
 * The client's address as a limiter key, or null when it cannot be known. An IPv6 address
 * stands for its /64 (one host usually holds the whole /64, so single addresses would give
 * it 2^64 buckets); an IPv4-mapped IPv6 address for the IPv4 address.
 */
export function clientAddress({ socketAddress, forwardedFor, trustedProxies }: AddressSources): string | null {
  if (trustedProxies <= 0) return socketAddress ? limiterKey(socketAddress) : null;
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : (forwardedFor ?? ''))
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  // Fewer entries than proxies: the request did not come through all of them, so every entry
  // may be the client's own words; only the peer is known (null in the dashboard).
  const entry = entries.length < trustedProxies ? socketAddress : entries[entries.length - trustedProxies];
  return entry ? limiterKey(entry) : null;
}

function limiterKey(address: string): string {
  // Some proxies write a port ("203.0.113.9:4711", "[2001:db8::1]:4711"); a zone id is local.
  const bare = address
    .replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, '$1')
    .replace(/^\[|\](:\d+)?$/g, '')
    .replace(/%.*$/, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped) return mapped[1]!;
  if (isIPv4(bare)) return bare;
  if (!isIPv6(bare)) return address.slice(0, 100);
  return `${expandIPv6(bare).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, as lower-case hex without leading zeros. */
function expandIPv6(address: string): string[] {
  let text = address.toLowerCase();
  // A trailing dotted IPv4 part is the last two groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.map((g) => Number.parseInt(g, 16).toString(16));
}

/**
 * An address as the claim page shows it, coarse enough to say where an agent registered from
 * without pinpointing a host: an IPv4 address's /24 ("203.0.113.0/24"), an IPv6 address's /48
 * (what clientAddress keeps is its /64: "2001:db8:1::/48"). Null for what is neither.
 */
export function addressNetwork(address: string | null): string | null {
  if (!address) return null;
  if (isIPv4(address)) return `${address.split('.').slice(0, 3).join('.')}.0/24`;
  const bare = address.replace(/\/\d+$/, '');
  if (!isIPv6(bare)) return null;
  return `${expandIPv6(bare).slice(0, 3).join(':')}::/48`;
}
