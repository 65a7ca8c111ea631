// URL redaction for the access log: linear in the URL (it runs on every request, before
// authentication), the same answer as the regular expression it replaced on ordinary URLs,
// and credentials redacted in the shapes that broke or fooled that expression
// (test/support/regex-redact-url.ts).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redactUrlByRegex as regexRedactUrl } from '../test/support/regex-redact-url.ts';
import { redactUrl } from './redact-url.ts';

// Ordinary URLs: a path, then at most one '?' and '&'-separated parameters whose names hold
// no '?', '&' or '=' and whose values hold no '?' or '&' (a value may hold '=').
const pathChar = fc.constantFrom(...'abcxyz0129-_./%~'.split(''));
const path = fc.array(fc.string({ unit: pathChar, maxLength: 8 }), { maxLength: 4 }).map((parts) => `/${parts.join('/')}`);
const name = fc.oneof(
  fc.constantFrom(
    'api_key',
    'API_KEY',
    'api%5Fkey',
    'api%5fkey',
    'Code',
    'code',
    '+code',
    'code+',
    'claim_token',
    'assertion',
    'access_token',
    'user_code',
    '%',
    '%zz',
    '',
    'model',
    'sample_rate',
    'apikey',
    'codes',
  ),
  fc.string({ unit: fc.constantFrom(...'abcdek_%+ 5F'.split('')), maxLength: 10 }),
);
const value = fc.string({ unit: fc.constantFrom(...'abc123-_.~%+=/:'.split('')), maxLength: 12 });
const param = fc.oneof(
  fc.tuple(name, value).map(([n, v]) => `${n}=${v}`),
  name,
);
const query = fc.array(param, { minLength: 1, maxLength: 5 }).map((params) => params.join('&'));
const ordinaryUrl = fc.tuple(path, fc.option(query, { nil: undefined })).map(([p, q]) => (q === undefined ? p : `${p}?${q}`));

describe('redactUrl', () => {
  it('gives what the regular expression gave on ordinary URLs (property, 2,000 cases)', () => {
    fc.assert(
      fc.property(ordinaryUrl, (url) => {
        expect(redactUrl(url)).toBe(regexRedactUrl(url));
      }),
      { numRuns: 2_000 },
    );
  });

  it.each([
    ['/v1/models', '/v1/models'],
    ['/stt/websocket?model=m&api_key=sk_svc_secret&sample_rate=16000', '/stt/websocket?model=m&api_key=[redacted]&sample_rate=16000'],
    ['/oauth2/token?grant_type=x&claim_token=claim_secret&assertion=eyJ.a.b', '/oauth2/token?grant_type=x&claim_token=[redacted]&assertion=[redacted]'],
    ['/claim?Code=123456&access%5Ftoken=sk_svc_x&user_code=654321', '/claim?Code=[redacted]&access%5Ftoken=[redacted]&user_code=[redacted]'],
    ['/v1/models&api_key=sk_svc_x', '/v1/models&api_key=[redacted]'],
    ['/x?flag&api_key=k==&y=1', '/x?flag&api_key=[redacted]&y=1'],
  ])('table: %s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
    expect(regexRedactUrl(url)).toBe(expected);
  });

  it("a phone token as a stream's custom parameter in the query (Exotel puts them there); a stream URL without a token is left as it is", () => {
    expect(redactUrl('/phone/exotel?svc_token=pt_svc_secret&sample-rate=16000')).toBe('/phone/exotel?svc_token=[redacted]&sample-rate=16000');
    expect(redactUrl('/phone/twilio')).toBe('/phone/twilio');
    expect(redactUrl('/phone/twilio/pt_svc_secret')).toBe('/phone/twilio/[redacted]');
  });

  it('adversarial shapes: long runs of separators are returned as they are, credentials after them redacted', () => {
    const q = '?'.repeat(16_000);
    expect(redactUrl(`/health?${q}`)).toBe(`/health?${q}`);
    expect(redactUrl(`/health?${'&'.repeat(16_000)}`)).toBe(`/health?${'&'.repeat(16_000)}`);
    expect(redactUrl(`/health?${'=&'.repeat(8_000)}`)).toBe(`/health?${'=&'.repeat(8_000)}`);
    expect(redactUrl(`/health?${'a?'.repeat(8_000)}`)).toBe(`/health?${'a?'.repeat(8_000)}`);
    expect(redactUrl(`/health?a=1&${q}`)).toBe(`/health?a=1&${q}`);
    expect(redactUrl(`/health?api_key=sk_svc_secret&${q}`)).toBe(`/health?api_key=[redacted]&${q}`);
    expect(redactUrl(`/health?${q}api_key=sk_svc_secret`)).toBe(`/health?${q}api_key=[redacted]`);
    expect(redactUrl(`/health?${'x'.repeat(16_000)}&api_key=sk_svc_secret`)).toBe(`/health?${'x'.repeat(16_000)}&api_key=[redacted]`);
    expect(redactUrl(`/s?${'api_key=1&'.repeat(2_000)}`)).toBe(`/s?${'api_key=[redacted]&'.repeat(2_000)}`);
  });

  it('a "?" before the "=" starts a new name; one inside a value is looked through', () => {
    // The regular expression read these names as "?api_key" and "x?code", and left the secret.
    expect(redactUrl('/x??api_key=sk_svc_secret')).toBe('/x??api_key=[redacted]');
    expect(redactUrl('/x?x?code=123456&y=1')).toBe('/x?x?code=[redacted]&y=1');
    expect(redactUrl('/x?next=/claim?code=123456&y=1')).toBe('/x?next=/claim?code=[redacted]&y=1');
    // A secret value holding '?' or '=' is redacted up to the next '&', as before.
    expect(redactUrl('/x?api_key=a?b=c&y=1')).toBe('/x?api_key=[redacted]&y=1');
  });

  it('never leaves the value of a secret parameter the server would read (property over hostile strings)', () => {
    const hostile = fc.string({ unit: fc.constantFrom('?', '&', '=', 'a', '%', '+', ' ', 'api_key', 'code', 'SECRET'), maxLength: 40 });
    fc.assert(
      fc.property(hostile, (tail) => {
        const url = `/p?${tail}&api_key=SECRET`;
        // The query as Fastify parses it: the last api_key parameter is this one.
        expect(redactUrl(url).endsWith('&api_key=[redacted]')).toBe(true);
        expect(redactUrl(url)).not.toMatch(/[?&]api_key=SECRET/);
      }),
      { numRuns: 2_000 },
    );
  });

  it("a phone carrier's stream path ends in its token: redacted, the carrier and the query kept", () => {
    const token = `pt_svc_${'a'.repeat(43)}`;
    expect(redactUrl(`/phone/twilio/${token}`)).toBe('/phone/twilio/[redacted]');
    expect(redactUrl(`/phone/telnyx/${token}?api_key=sk_svc_x&a=1`)).toBe('/phone/telnyx/[redacted]?api_key=[redacted]&a=1');
    expect(redactUrl(`/phone/twilio/${token}/more`)).toBe('/phone/twilio/[redacted]');
    expect(redactUrl('/phone/twilio/')).toBe('/phone/twilio/');
    expect(redactUrl('/phone/twilio')).toBe('/phone/twilio');
    expect(redactUrl('/v1/phone/x')).toBe('/v1/phone/x');
  });
});
