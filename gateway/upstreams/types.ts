import type { UpstreamEntry } from '../registry/model-registry.js';

export interface HealthResult {
  ok: boolean;
  latencyMs: number;
  error?: string;
}

/** What every upstream adapter can do; modality-specific adapters add their operations. */
export interface UpstreamAdapter {
  protocol: string;
  checkHealth(upstream: UpstreamEntry, signal: AbortSignal): Promise<HealthResult>;
}

/** The upstream's API key, read from the environment variable the registry names. */
export function upstreamApiKey(upstream: UpstreamEntry): string | undefined {
  return upstream.apiKeyEnv ? process.env[upstream.apiKeyEnv] : undefined;
}
