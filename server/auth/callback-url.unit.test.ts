// The path the sign-in and sign-up pages return to (their callbackUrl, the visitor's to
// write). The property that matters: whatever comes out, a browser on the dashboard
// resolves it to the dashboard. Each case is checked that way, not only against a string.
import { describe, expect, it } from 'vitest';
import { sameOriginPath } from './callback-url.ts';

const DASHBOARD = 'https://dash.example.com';
/** Where a browser on the dashboard goes for `path` (WHATWG parsing, as window.location.assign). */
const landsOn = (path: string) => new URL(path, `${DASHBOARD}/signin`);

describe('sameOriginPath', () => {
  it.each([
    // callbackUrl=%2F%09%2Fevil.example, as the page receives it decoded: the browser drops the tab.
    ['/\t/evil.example'],
    ['/\n/evil.example'],
    ['/\r\n/evil.example'],
    ['\t//evil.example'],
    ['//evil.example'],
    ['///evil.example'],
    ['/\\evil.example'],
    ['\\\\evil.example'],
    ['/\\/evil.example'],
    ['https://evil.example'],
    ['HTTPS://evil.example/x'],
    ['https:evil.example'],
    ['//evil.example/%2F..'],
    ['javascript:alert(1)'],
    ['data:text/html,hi'],
    ['evil.example'],
    [''],
    [undefined],
    [['//evil.example', '/keys']],
  ])('%j -> "/"', (value) => {
    expect(sameOriginPath(value)).toBe('/');
  });

  it.each([
    ['/', '/'],
    ['/keys', '/keys'],
    ['/claim?code=123456', '/claim?code=123456'],
    ['/invite/AbC_-9', '/invite/AbC_-9'],
    ['/signup?callbackUrl=%2Fclaim#x', '/signup?callbackUrl=%2Fclaim#x'],
    // Dot segments that would leave "//host" after the browser removes them.
    ['/.//evil.example', '/evil.example'],
    ['/x/..//evil.example', '/evil.example'],
    // An encoded slash stays encoded: a browser does not read it as a separator.
    ['/%2F%2Fevil.example', '/%2F%2Fevil.example'],
    [['/credits', '//evil.example'], '/credits'],
  ])('%j -> %j', (value, expected) => {
    expect(sameOriginPath(value)).toBe(expected);
  });

  it('never produces a path a browser resolves to another origin', () => {
    const tricky = ['/\t/a', '/\\a', '//a', '/./\\a', '/..//a', '/%09/a', '/\u0000/a', ' //a', '/\u3000/a', '/\ufeff/a'];
    for (const value of tricky) expect(landsOn(sameOriginPath(value)).origin).toBe(DASHBOARD);
  });
});
