'use client';
// Calls from the browser to the gateway, through the dashboard's proxy (/api/gateway/...,
// app/api/gateway/[...path]/route.ts), which adds the org's dashboard key. Errors arrive in
// the API's envelope {error:{message,type,code,param}} and are thrown as GatewayError, with the
// x-request-id the answer carried (its row in the Logs page).
export const GATEWAY_PROXY = '/api/gateway';

export class GatewayError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null,
    readonly param: string | null = null,
    /** The answer's x-request-id: the request's row on the Logs page. */
    readonly requestId: string | null = null,
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

/** What the gateway reported about money on a metered answer (x-svc-* headers). */
export interface Charge {
  costUsd: string | null;
  remainingUsd: string | null;
}

export const chargeOf = (headers: { get(name: string): string | null }): Charge => ({
  costUsd: headers.get('x-svc-request-cost-usd'),
  remainingUsd: headers.get('x-svc-credits-remaining-usd'),
});

function errorFrom(status: number, text: string, requestId: string | null): GatewayError {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; param?: unknown } };
    if (body.error && typeof body.error.message === 'string') {
      return new GatewayError(
        body.error.message,
        status,
        typeof body.error.code === 'string' ? body.error.code : null,
        typeof body.error.param === 'string' ? body.error.param : null,
        requestId,
      );
    }
  } catch {
    // not JSON: fall through
  }
  if (status === 401) return new GatewayError('Your session has ended. Sign in again.', status, 'invalid_api_key');
  return new GatewayError(`The gateway answered ${status}. Try again.`, status, null, null, requestId);
}

/** fetch through the proxy; a non-2xx answer throws GatewayError with the envelope's message. */
export async function gatewayFetch(path: string, init: RequestInit = {}): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(`${GATEWAY_PROXY}/${path}`, { ...init, credentials: 'same-origin' });
  } catch {
    throw new GatewayError('Could not reach the dashboard server. Check your connection and try again.', 0, null);
  }
  if (!res.ok) throw errorFrom(res.status, await res.text(), res.headers.get('x-request-id'));
  return res;
}

export async function gatewayJson<T>(path: string, init: RequestInit = {}): Promise<{ status: number; body: T; charge: Charge }> {
  const res = await gatewayFetch(path, init);
  return { status: res.status, body: (await res.json()) as T, charge: chargeOf(res.headers) };
}

/**
 * POSTs a form with upload progress (fetch cannot report it): XMLHttpRequest through the proxy.
 * onProgress gets a fraction 0..1, or null when the size is unknown.
 */
export function uploadForm<T>(
  path: string,
  form: FormData,
  onProgress: (fraction: number | null) => void,
  signal?: AbortSignal,
): Promise<{ status: number; body: T; charge: Charge }> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `${GATEWAY_PROXY}/${path}`);
    xhr.responseType = 'text';
    xhr.upload.onprogress = (e) => onProgress(e.lengthComputable && e.total > 0 ? e.loaded / e.total : null);
    xhr.upload.onload = () => onProgress(1);
    xhr.onerror = () => reject(new GatewayError('The upload failed: the connection was lost. Try again.', 0, null));
    xhr.onabort = () => reject(new GatewayError('The upload was cancelled.', 0, 'aborted'));
    xhr.onload = () => {
      if (xhr.status < 200 || xhr.status >= 300) return reject(errorFrom(xhr.status, xhr.responseText, xhr.getResponseHeader('x-request-id')));
      try {
        resolve({ status: xhr.status, body: JSON.parse(xhr.responseText) as T, charge: chargeOf({ get: (n) => xhr.getResponseHeader(n) }) });
      } catch {
        reject(new GatewayError('The gateway sent an answer the dashboard could not read.', xhr.status, null));
      }
    };
    signal?.addEventListener('abort', () => xhr.abort(), { once: true });
    xhr.send(form);
  });
}
