// URL redaction as it was first written: one regular expression over the URL. On a run of
// '?' without '=' it backtracks quadratically (~100 ms for `/health?` + 16,000 '?', on every
// access line, before authentication), so gateway/redact-url.ts scans the URL once instead;
// this stays as the definition that scan is tested against (gateway/redact-url.unit.test.ts) and
// benchmarked against (bench/redact-url.ts). Kept as it was.
const SECRET_PARAMS = new Set(['api_key', 'claim_token', 'assertion', 'access_token', 'user_code', 'code']);

export function redactUrlByRegex(url: string): string {
  if (!url.includes('?') && !url.includes('&')) return url;
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
