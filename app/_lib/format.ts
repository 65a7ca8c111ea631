/**
 * Money for people, from the API's six-decimal strings: "5.000000" -> "$5.00", "1234.5" ->
 * "$1,234.50", "-0.000001" -> "-$0.000001". Cents for amounts of a cent or more; amounts below a
 * cent keep up to six decimals, so a tiny cost never reads "$0.00".
 */
export function usd(amount: string): string {
  const negative = amount.trim().startsWith('-');
  const value = Math.abs(Number(amount));
  if (!Number.isFinite(value)) return amount;
  const digits = value === 0 || value >= 0.01 ? 2 : 6;
  const text = value.toLocaleString('en', { minimumFractionDigits: 2, maximumFractionDigits: digits });
  return `${negative && value !== 0 ? '-' : ''}$${text}`;
}

const dateTime = new Intl.DateTimeFormat('en', { dateStyle: 'medium', timeStyle: 'short' });

export function formatDateTime(iso: string | null, fallback = '—'): string {
  return iso ? dateTime.format(new Date(iso)) : fallback;
}

/** The message of a tRPC (or any) error, fit for showing to the user. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error && error.message) return error.message;
  return 'Something went wrong. Try again.';
}

export function isUnauthorized(error: unknown): boolean {
  return (error as { data?: { code?: string } } | null)?.data?.code === 'UNAUTHORIZED';
}

/** A sign-in or sign-up link that comes back to `callbackPath` afterwards (nothing added for "/"). */
export function withCallback(path: string, callbackPath: string): string {
  return callbackPath === '/' ? path : `${path}?callbackUrl=${encodeURIComponent(callbackPath)}`;
}

/** "1 request", "2 requests" (English plural with an s). */
export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en')} ${word}${n === 1 ? '' : 's'}`;
}

/** The field a refused input names (the server's tRPC error data, e.g. "changes.name"), or null. */
export function errorParam(error: unknown): string | null {
  const data = (error as { data?: { serviceParam?: unknown } } | null)?.data;
  return typeof data?.serviceParam === 'string' ? data.serviceParam : null;
}

/**
 * A refused input worded for people rather than API clients: with labels
 * {'changes.name': 'name'}, "changes.name: must not be empty" becomes "Name must not be empty."
 * and `field` is "name" (the form field to mark). Messages about other fields, or none, are
 * returned as they are, with `field` null.
 */
export function humanError(error: unknown, labels: Record<string, string>): { field: string | null; message: string } {
  const message = errorMessage(error);
  const param = errorParam(error) ?? /^([A-Za-z_][\w.[\]]*): /.exec(message)?.[1] ?? null;
  const label = param === null ? undefined : labels[param];
  if (!param || label === undefined || !message.startsWith(`${param}: `)) return { field: null, message };
  const rest = message.slice(param.length + 2).replace(/\.$/, '');
  const sentence = /^(must|is|are|should|cannot|can)\b/.test(rest) ? `${label} ${rest}` : /^an? /.test(rest) ? `${label} must be ${rest}` : `${label}: ${rest}`;
  return {
    field: param
      .split('.')
      .at(-1)!
      .replace(/\[\d+\]$/, ''),
    message: `${sentence[0]!.toUpperCase()}${sentence.slice(1)}.`,
  };
}

/** Milliseconds for people: "—" where nothing was measured (never "0 ms" for nothing), "<1 ms", "12.5 ms", "340 ms", "2.41 s". */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1) return '<1 ms';
  if (ms < 100) return `${ms.toLocaleString('en', { maximumFractionDigits: 1 })} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toLocaleString('en', { maximumFractionDigits: 2 })} s`;
}

/** A share (0..1) as a percentage with one decimal; "—" for none. */
export function formatRate(rate: number | null | undefined): string {
  return rate === null || rate === undefined ? '—' : `${(rate * 100).toFixed(1)}%`;
}
