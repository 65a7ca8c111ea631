// What of a request's URL may be logged.

// Query parameters whose values are secrets: API keys, what an agent-registration client might
// (wrongly) put in the query of /oauth2/token or /agent/identity/claim, and a phone token as a
// stream's custom parameter (Exotel passes its applet's custom parameters in the URL's query).
const SECRET_PARAMS = new Set(['api_key', 'claim_token', 'assertion', 'access_token', 'user_code', 'code', 'svc_token']);

// Paths whose last segment is a credential: a phone carrier's stream URL ends in its phone
// token, since carriers send neither headers nor, for Twilio, a query (docs/phone.md).
const SECRET_PATH = '/phone/';

const QUESTION = 63; // '?'
const AMPERSAND = 38; // '&'
const EQUALS = 61; // '='

/**
 * Removes credentials from a URL before it is logged (also when the name is percent-encoded).
 * A parameter is `name=value` after a `?` or `&` anywhere in the URL; its value runs to the
 * next `&`. One pass over the URL: this runs on every access line, before authentication,
 * and a backtracking regular expression is quadratic on a URL of many `?`.
 */
export function redactUrl(url: string): string {
  if (url.startsWith(SECRET_PATH)) url = redactPathSecret(url);
  if (!url.includes('=')) return url; // no parameter with a value: the common case
  let out = '';
  let copied = 0; // url[copied..] is not in `out` yet
  let at = 0;
  while (at < url.length) {
    const c = url.charCodeAt(at);
    if (c !== QUESTION && c !== AMPERSAND) {
      at++;
      continue;
    }
    // A name runs to the next '=', '&' or '?' (a '?' before any '=' starts another name:
    // "/x??api_key=…" is still an api_key).
    let end = at + 1;
    for (; end < url.length; end++) {
      const n = url.charCodeAt(end);
      if (n === EQUALS || n === AMPERSAND || n === QUESTION) break;
    }
    if (end < url.length && url.charCodeAt(end) === EQUALS && isSecret(url.slice(at + 1, end))) {
      let valueEnd = url.indexOf('&', end + 1);
      if (valueEnd === -1) valueEnd = url.length;
      out += `${url.slice(copied, end + 1)}[redacted]`;
      copied = valueEnd;
      at = valueEnd;
    } else {
      // Not a secret: go on from where the name ended (a value may hold "?code=…" too).
      at = end < url.length && url.charCodeAt(end) === EQUALS ? end + 1 : end;
    }
  }
  return copied === 0 ? url : out + url.slice(copied);
}

function isSecret(name: string): boolean {
  if (name.length === 0) return false;
  let decoded = name;
  // Decoding only when there is something to decode: a URL may hold thousands of names.
  if (name.includes('%') || name.includes('+')) {
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // keep the raw name
    }
  }
  return SECRET_PARAMS.has(decoded.trim().toLowerCase());
}

/** `/phone/twilio/<token>?x` as `/phone/twilio/[redacted]?x`: everything after the carrier's segment, up to the query. */
function redactPathSecret(url: string): string {
  const carrierEnd = url.indexOf('/', SECRET_PATH.length);
  if (carrierEnd === -1) return url;
  const query = url.indexOf('?', carrierEnd);
  const end = query === -1 ? url.length : query;
  if (end === carrierEnd + 1) return url;
  return `${url.slice(0, carrierEnd + 1)}[redacted]${url.slice(end)}`;
}
