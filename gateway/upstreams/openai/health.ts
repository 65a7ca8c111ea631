import { request } from 'undici';
import type { UpstreamEntry } from '../../registry/model-registry.js';
import { upstreamApiKey, type HealthResult } from '../types.js';

/** An OpenAI-compatible server is healthy when GET {url}/models answers 2xx. */
export async function checkOpenAiHealth(upstream: UpstreamEntry, signal: AbortSignal): Promise<HealthResult> {
  const started = performance.now();
  try {
    const key = upstreamApiKey(upstream);
    const res = await request(`${upstream.url}/models`, {
      method: 'GET',
      headers: key ? { authorization: `Bearer ${key}` } : {},
      signal,
    });
    await res.body.dump();
    const latencyMs = Math.round(performance.now() - started);
    return res.statusCode < 300 ? { ok: true, latencyMs } : { ok: false, latencyMs, error: `GET /models answered ${res.statusCode}` };
  } catch (e) {
    return { ok: false, latencyMs: Math.round(performance.now() - started), error: e instanceof Error ? e.message : String(e) };
  }
}
