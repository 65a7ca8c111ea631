// Operators' view of the registry: every model with its upstreams, what the gateway's health
// checker last recorded for each (health, latency, last error, when) and its error rate over the
// last 15 minutes (upstream-stats.ts). Nothing secret leaves here: upstream keys live in
// environment variables (only the variable's name is stored), and URLs are shown without userinfo, query or fragment in case an operator put a token there.
import type { Prisma } from '../../db/database.ts';
import { VOICE_CATALOGUE_PROTOCOLS } from '../voices/engine-voices.ts';
import { isCircuitOpen } from './record-circuit.ts';
import { recentUpstreamCounts } from './upstream-stats.ts';

export interface UpstreamHealthRecord {
  id: string;
  url: string;
  protocol: string;
  upstreamModel: string | null;
  weight: number;
  /** Name of the environment variable holding the upstream's key; never the key. */
  apiKeyEnv: string | null;
  health: 'unknown' | 'up' | 'down';
  latencyMs: number | null;
  lastError: string | null;
  lastCheckedAt: Date | null;
  /** A gateway's circuit for it opened since its last health check (docs/failover.md, "Circuits"). */
  circuitOpen: boolean;
  /** Calls through every gateway over the last 15 minutes, and how many failed. */
  recentRequests: number;
  recentErrors: number;
  /** recentErrors / recentRequests; null without calls. */
  errorRate: number | null;
}

export interface ModelHealthRecord {
  id: string;
  modality: 'llm' | 'tts' | 'stt';
  displayName: string;
  status: 'active' | 'disabled';
  /** A TTS model with an upstream whose engine lists its voices: they can be imported (`svc voices import`, the Models page). */
  listsVoices: boolean;
  upstreams: UpstreamHealthRecord[];
}

export async function listModelHealth(prisma: Prisma): Promise<ModelHealthRecord[]> {
  const models = await prisma.model.findMany({
    // Enums sort as text on SQLite and in declaration order on PostgreSQL: sort here instead.
    orderBy: { id: 'asc' },
    include: { upstreams: { orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] } },
  });
  const counts = await recentUpstreamCounts(prisma);
  return models.sort(byModality).map((m) => ({
    id: m.id,
    modality: m.modality,
    displayName: m.displayName,
    status: m.status,
    listsVoices: m.modality === 'tts' && m.upstreams.some((u) => VOICE_CATALOGUE_PROTOCOLS.includes(u.protocol)),
    upstreams: m.upstreams.map((u) => ({
      id: u.id,
      url: displayUrl(u.url),
      protocol: u.protocol,
      upstreamModel: u.upstreamModel,
      weight: u.weight,
      apiKeyEnv: u.apiKeyEnv,
      health: u.health,
      latencyMs: u.latencyMs,
      lastError: u.lastError,
      lastCheckedAt: u.lastCheckedAt,
      circuitOpen: isCircuitOpen(u.lastError),
      ...rates(counts.get(u.id)),
    })),
  }));
}

function rates(c: { requests: number; errors: number } | undefined) {
  const recentRequests = c?.requests ?? 0;
  const recentErrors = c?.errors ?? 0;
  return { recentRequests, recentErrors, errorRate: recentRequests > 0 ? recentErrors / recentRequests : null };
}

const MODALITY_ORDER = { llm: 0, tts: 1, stt: 2 } as const;

/** LLM, TTS, STT; by id within each. */
export const byModality = (a: { modality: keyof typeof MODALITY_ORDER; id: string }, b: { modality: keyof typeof MODALITY_ORDER; id: string }) =>
  MODALITY_ORDER[a.modality] - MODALITY_ORDER[b.modality] || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** "https://user:pw@host/v1?token=x#f" -> "https://host/v1"; "local:flite" as it is. */
export function displayUrl(url: string): string {
  if (url.startsWith('local:')) return url;
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' && !url.endsWith('/') ? '' : u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
