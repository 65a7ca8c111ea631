/** "12.500000" -> "$12.500000", "-0.000001" -> "-$0.000001": six decimals, as the API reports money. */
export function usd(amount: string): string {
  return amount.startsWith('-') ? `-$${amount.slice(1)}` : `$${amount}`;
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
