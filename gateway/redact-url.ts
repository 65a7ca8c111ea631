// What of a request's URL may be logged.

// Query parameters whose values are secrets: API keys, and what an agent-registration client
// might (wrongly) put in the query of /oauth2/token or /agent/identity/claim.
const SECRET_PARAMS = new Set(['api_key', 'claim_token', 'assertion', 'access_token', 'user_code', 'code']);

/** Removes credentials from a URL before it is logged (also when the name is percent-encoded). */
export function redactUrl(url: string): string {
  if (!url.includes('?') && !url.includes('&')) return url; // no parameters: the common case
  return url.replace(/([?&])([^=&]*)=([^&]*)/g, (whole, sep: string, name: string) => {
    let decoded = name;
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // keep the raw name
    }
    return SECRET_PARAMS.has(decoded.trim().toLowerCase()) ? `${sep}${name}=[redacted]` : whole;
  });
}
