import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KEY_PREFIX, displayPrefix, generateApiKey, hashApiKey, hashesEqual, isWellFormedApiKey } from './api-key-format.ts';
import { redactKey } from './verify-api-key.ts';

const FORMAT = /^sk_svc_[A-Za-z0-9_-]{43}$/;

describe('generateApiKey', () => {
  it('is sk_svc_ followed by 32 random bytes in base64url without padding (43 characters)', () => {
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey();
      expect(key).toMatch(FORMAT);
      expect(key).toHaveLength(7 + 43);
      const raw = Buffer.from(key.slice(KEY_PREFIX.length), 'base64url');
      expect(raw).toHaveLength(32);
      expect(raw.toString('base64url')).toBe(key.slice(KEY_PREFIX.length));
      expect(isWellFormedApiKey(key)).toBe(true);
    }
  });

  it('does not repeat', () => {
    const keys = new Set(Array.from({ length: 5_000 }, generateApiKey));
    expect(keys.size).toBe(5_000);
  });
});

describe('isWellFormedApiKey', () => {
  const body = 'A'.repeat(43);
  it.each([
    [`sk_svc_${body}`, true],
    [`sk_svc_${'-_aZ09'.repeat(7)}x`, true],
    ['', false],
    ['sk_svc_', false],
    [`sk_svc_${'A'.repeat(42)}`, false],
    [`sk_svc_${'A'.repeat(44)}`, false],
    [`sk_svc_${'A'.repeat(42)}=`, false], // padding
    [`sk_svc_${'A'.repeat(42)}+`, false], // base64, not base64url
    [`sk_svc_${'A'.repeat(42)}/`, false],
    [`sk_svc_${'A'.repeat(42)} `, false],
    [` sk_svc_${body}`, false],
    [`sk_svc_${body}\n`, false],
    [`SK_SVC_${body}`, false],
    [`sk-svc-${body}`, false],
    [`sk_${body}xxxx`, false],
    [`sk-proj-${body}`, false],
    [`sk_svc_${'A'.repeat(42)}é`, false],
  ])('%j -> %s', (key, ok) => {
    expect(isWellFormedApiKey(key)).toBe(ok);
  });
});

describe('hashApiKey', () => {
  it('is the lowercase hex SHA-256 of the full key', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const key = generateApiKey();
    expect(hashApiKey(key)).toBe(createHash('sha256').update(key, 'utf8').digest('hex'));
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('differs for keys that differ in one character', () => {
    const key = `sk_svc_${'A'.repeat(43)}`;
    expect(hashApiKey(key)).not.toBe(hashApiKey(`${key.slice(0, -1)}B`));
  });
});

describe('hashesEqual', () => {
  const h = hashApiKey('one');
  it.each([
    [h, h, true],
    [h, hashApiKey('two'), false],
    [h, h.slice(0, 62), false],
    [h, '', false],
  ])('%s == %s -> %s', (a, b, eq) => {
    expect(hashesEqual(a, b)).toBe(eq);
  });
});

describe('displayPrefix', () => {
  it('is sk_svc_ plus the next 4 characters (11 characters)', () => {
    const key = generateApiKey();
    const prefix = displayPrefix(key);
    expect(prefix).toHaveLength(11);
    expect(prefix).toBe(key.slice(0, 11));
    expect(prefix.startsWith('sk_svc_')).toBe(true);
    expect(displayPrefix(`sk_svc_abcd${'x'.repeat(39)}`)).toBe('sk_svc_abcd');
  });
});

describe('redactKey', () => {
  it('shows the display prefix and the last 4 characters of a full key, never the rest', () => {
    const key = `sk_svc_abcd${'m'.repeat(35)}wxyz`;
    const redacted = redactKey(key);
    expect(redacted).toBe('sk_svc_abcd********wxyz');
    expect(redacted).not.toContain('m');
  });

  it('hides at least 35 of the 43 random characters of any generated key', () => {
    for (let i = 0; i < 100; i++) {
      const key = generateApiKey();
      const redacted = redactKey(key);
      expect(redacted).toBe(`${key.slice(0, 11)}********${key.slice(-4)}`);
      expect(redacted).not.toContain(key.slice(11, -4));
    }
  });

  it.each([
    ['', '********'],
    ['abc', '********'],
    ['12345678', '********'],
    ['sk_svc_abcd', '********'],
    ['sk_svc_abcdefghijklmnop', '********'], // 23 characters: prefix and suffix would overlap or nearly cover it
  ])('masks a short value %j completely (and hides its length) as %j', (value, masked) => {
    expect(redactKey(value)).toBe(masked);
  });

  it('replaces non-printable characters so an error message cannot carry control bytes', () => {
    const redacted = redactKey(`sk_svc_\u0000\nbc${'x'.repeat(30)}\u001b[1m`);
    expect(redacted).toMatch(/^[\x20-\x7e]*$/);
    expect(redacted.startsWith('sk_svc_??bc')).toBe(true);
  });
});
