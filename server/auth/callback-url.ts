// Where the browser may be sent after signing in: only somewhere on the dashboard itself.
// Checked the way a browser reads the URL (WHATWG parsing: tabs and newlines dropped, "\" as
// "/"), so "/\t/evil.example", "/\\evil.example" and "//evil.example" are seen for what they
// are, other origins. Used by the sign-in and sign-up pages (the path they return to) and by
// next-auth's redirect callback (where OAuth sign-in lands).

// Any fixed origin works: only whether a value leaves it matters. `.invalid` is never a real host.
const PROBE = 'https://dashboard.invalid';

/**
 * `value` as a same-origin path ("/claim?code=1", never "//host"), or "/" when it is missing,
 * not a string, absolute, or resolves to another origin.
 */
export function sameOriginPath(value: unknown): string {
  const raw = Array.isArray(value) ? value[0] : value;
  if (typeof raw !== 'string' || raw === '') return '/';
  let url: URL;
  try {
    url = new URL(raw, `${PROBE}/`);
  } catch {
    return '/';
  }
  // Only paths: an absolute URL naming this origin is not something the pages produce.
  if (url.origin !== PROBE || !/^\s*\//.test(raw.replace(/[\t\n\r]/g, ''))) return '/';
  // "/.//evil" parses to the path "//evil", which a browser would read as a host again.
  const path = `/${url.pathname.replace(/^\/+/, '')}${url.search}${url.hash}`;
  return new URL(path, `${PROBE}/`).origin === PROBE ? path : '/';
}

/** next-auth's `redirect` callback: a same-origin path or URL stays, anything else goes to the dashboard's home. */
export function sameOriginRedirect({ url, baseUrl }: { url: string; baseUrl: string }): string {
  const { origin } = new URL(baseUrl);
  let target: URL;
  try {
    target = new URL(url, origin);
  } catch {
    return `${origin}/`;
  }
  if (target.origin !== origin) return `${origin}/`;
  return `${origin}${sameOriginPath(`${target.pathname}${target.search}${target.hash}`)}`;
}
