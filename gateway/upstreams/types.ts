import type { UpstreamEntry } from '../registry/model-registry.js';

export interface HealthResult {
  ok: boolean;
  latencyMs: number;
  error?: string;
}

/** The upstream's API key, read from the environment variable the registry names. */
export function upstreamApiKey(upstream: UpstreamEntry): string | undefined {
  return upstream.apiKeyEnv ? process.env[upstream.apiKeyEnv] : undefined;
}
