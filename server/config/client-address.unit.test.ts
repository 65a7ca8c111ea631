import { describe, expect, it } from 'vitest';
import { addressNetwork, clientAddress } from './client-address.ts';

describe('clientAddress', () => {
  it('without trusted proxies: the TCP peer, whatever X-Forwarded-For says', () => {
    expect(clientAddress({ socketAddress: '198.51.100.7', forwardedFor: '203.0.113.1', trustedProxies: 0 })).toBe('198.51.100.7');
    expect(clientAddress({ socketAddress: '198.51.100.7', forwardedFor: undefined, trustedProxies: 0 })).toBe('198.51.100.7');
  });

  it('without trusted proxies and no known peer (the dashboard): unknown, never the header', () => {
    expect(clientAddress({ socketAddress: null, forwardedFor: '203.0.113.1', trustedProxies: 0 })).toBeNull();
  });

  it('behind N proxies: the N-th entry from the right; what the client wrote to the left of it does not matter', () => {
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: 'spoofed, 203.0.113.9', trustedProxies: 1 })).toBe('203.0.113.9');
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: ['made-up', '203.0.113.9, 10.0.0.1'], trustedProxies: 2 })).toBe('203.0.113.9');
    expect(clientAddress({ socketAddress: null, forwardedFor: '1.1.1.1, 2.2.2.2, 203.0.113.9', trustedProxies: 1 })).toBe('203.0.113.9');
  });

  it('behind proxies but with fewer entries than proxies: the peer, never an entry the client may have written', () => {
    // The request skipped a proxy: the one entry is whatever the client (or one proxy) wrote.
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: '203.0.113.9', trustedProxies: 3 })).toBe('10.0.0.2');
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: 'spoofed, 203.0.113.9', trustedProxies: 3 })).toBe('10.0.0.2');
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: ['spoofed', '203.0.113.9'], trustedProxies: 3 })).toBe('10.0.0.2');
    // Exactly as many entries as proxies: the leftmost is the one the first proxy wrote.
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: '203.0.113.9, 10.0.0.1, 10.0.0.3', trustedProxies: 3 })).toBe('203.0.113.9');
    expect(clientAddress({ socketAddress: '10.0.0.2', forwardedFor: ' , ', trustedProxies: 1 })).toBe('10.0.0.2');
    // The dashboard does not know the peer: then no address at all.
    expect(clientAddress({ socketAddress: null, forwardedFor: '203.0.113.9', trustedProxies: 2 })).toBeNull();
    expect(clientAddress({ socketAddress: null, forwardedFor: null, trustedProxies: 1 })).toBeNull();
  });

  it('IPv6 addresses stand for their /64; IPv4-mapped ones for the IPv4 address; ports and zones are dropped', () => {
    const key = (address: string) => clientAddress({ socketAddress: address, forwardedFor: null, trustedProxies: 0 });
    expect(key('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(key('2001:0DB8:0001:0002:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(key('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(key('::1')).toBe('0:0:0:0::/64');
    expect(key('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(key('::ffff:192.0.2.4')).toBe('192.0.2.4');
    expect(key('64:ff9b::192.0.2.4')).toBe('64:ff9b:0:0::/64');
    expect(clientAddress({ socketAddress: null, forwardedFor: '[2001:db8:1:2::5]:4711', trustedProxies: 1 })).toBe('2001:db8:1:2::/64');
    expect(clientAddress({ socketAddress: null, forwardedFor: '192.0.2.4:4711', trustedProxies: 1 })).toBe('192.0.2.4');
  });

  it('an entry that is not an address is used as it is, bounded', () => {
    expect(clientAddress({ socketAddress: null, forwardedFor: `unknown-${'x'.repeat(300)}`, trustedProxies: 1 })).toHaveLength(100);
  });
});

describe('addressNetwork', () => {
  it("an IPv4 address's /24, an IPv6 address's /48 (from the /64 a registration keeps); nothing for what is neither", () => {
    expect(addressNetwork('203.0.113.77')).toBe('203.0.113.0/24');
    expect(addressNetwork('127.0.0.1')).toBe('127.0.0.0/24');
    const kept = clientAddress({ socketAddress: '2001:db8:ab:cd:1:2:3:4', forwardedFor: undefined, trustedProxies: 0 });
    expect(kept).toBe('2001:db8:ab:cd::/64');
    expect(addressNetwork(kept)).toBe('2001:db8:ab::/48');
    expect(addressNetwork('2001:db8::1')).toBe('2001:db8:0::/48');
    expect(addressNetwork('not-an-address')).toBeNull();
    expect(addressNetwork(null)).toBeNull();
  });
});
