// A multipart POST to an OpenAI-compatible server (transcriptions, voice cloning): its key from
// the environment, the request's deadline, and a non-2xx answer as the upstream's error.
import { request, type FormData } from 'undici';
import type { UpstreamEntry } from '../../registry/model-registry.js';
import { upstreamApiKey } from '../types.js';
import { upstreamErrorFromResponse } from '../upstream-errors.js';
import { httpDispatcher } from './chat.js';

export async function postForm(upstream: UpstreamEntry, path: string, form: FormData, call: { signal: AbortSignal; timeoutMs: number }) {
  const key = upstreamApiKey(upstream);
  const res = await request(`${upstream.url}${path}`, {
    method: 'POST',
    dispatcher: httpDispatcher,
    headers: key ? { authorization: `Bearer ${key}` } : {},
    body: form,
    signal: call.signal,
    headersTimeout: call.timeoutMs,
    bodyTimeout: call.timeoutMs,
  });
  if (res.statusCode >= 300) throw await upstreamErrorFromResponse({ statusCode: res.statusCode, text: () => res.body.text() });
  return res;
}
