// The gateway's view of the model registry: an in-memory snapshot of models and upstreams,
// reloaded from the database every few seconds (so CLI and dashboard changes reach running
// gateways without a restart) and combined with this process's own health observations.
import { systemClock, type Clock } from '../../server/clock.ts';
import type { Prisma } from '../../server/db/database.ts';
import type { Modality } from '../../server/db/generated/sqlite/enums.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { checkModelAllowed } from '../../server/services/keys/key-budget.ts';
import type { UpstreamTarget } from '../upstreams/contract.ts';
import { protocolNamed } from '../upstreams/protocols/index.ts';
import { withoutAddresses } from '../upstream-envelope.ts';
import { Circuits, type CircuitObserver, type CircuitSettings } from './circuit.ts';

export interface UpstreamEntry extends UpstreamTarget {
  weight: number;
  apiKeyEnv: string | null;
}

/** An upstream's settings through its protocol's schema (defaults filled in); stored values were checked when registered. */
function settingsOf(protocol: string, stored: unknown): Record<string, unknown> {
  const parsed = protocolNamed(protocol)?.settings.safeParse(stored ?? {});
  return parsed?.success ? parsed.data : {};
}

/**
 * The entry with its engine key, read from the environment variable it names at each refresh (a
 * process's environment changes only from within it, so this is what a read at each use would
 * give, without an environment lookup per engine call). Not enumerable: logging or serialising an
 * entry never shows the key.
 */
function withApiKey(entry: Omit<UpstreamEntry, 'apiKey'>, apiKeyEnv: string | null): UpstreamEntry {
  return Object.defineProperty(entry, 'apiKey', { value: apiKeyEnv ? process.env[apiKeyEnv] : undefined, enumerable: false }) as UpstreamEntry;
}

export interface ModelEntry {
  id: string;
  modality: Modality;
  status: 'active' | 'disabled';
  createdAt: Date;
  prices: { inputPicoPerToken: bigint; outputPicoPerToken: bigint; picoPerChar: bigint; picoPerSecond: bigint };
  sampleRates: number[] | null;
  /** LLM: the most output a request without max_tokens is reserved for (`capabilities.max_output_tokens`); null: the gateway's default. */
  maxOutputTokens: number | null;
  /** The first output (an LLM's first token, TTS's first audio, STT's first message) is raced on two upstreams (`capabilities.hedge`; docs/failover.md, "Hedging"). */
  hedge: boolean;
  upstreams: UpstreamEntry[];
}

export type Health = 'unknown' | 'up' | 'down';

/** Whose request a model is resolved for: the models its key may use (null: every model). */
export interface ModelScope {
  allowedModels: ReadonlySet<string> | null;
}

export class ModelRegistry {
  private models = new Map<string, ModelEntry>();
  private health = new Map<string, Health>();
  private healthErrors = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  /** Each upstream's circuit (circuit.ts): the calls' own verdict, beside the health checks. */
  readonly circuits: Circuits;

  constructor(
    private readonly prisma: Prisma,
    options: { clock?: Clock; circuit?: CircuitSettings; onCircuit?: CircuitObserver } = {},
  ) {
    this.circuits = new Circuits(options.clock ?? systemClock, options.circuit ?? { openMs: 30_000, failures: 5 }, options.onCircuit);
  }

  async refresh(): Promise<void> {
    const rows = await this.prisma.model.findMany({ include: { upstreams: true } });
    const next = new Map<string, ModelEntry>();
    for (const m of rows) {
      next.set(m.id, {
        id: m.id,
        modality: m.modality,
        status: m.status,
        createdAt: m.createdAt,
        prices: {
          inputPicoPerToken: m.priceInputPicoPerToken,
          outputPicoPerToken: m.priceOutputPicoPerToken,
          picoPerChar: m.pricePicoPerChar,
          picoPerSecond: m.pricePicoPerSecond,
        },
        sampleRates: Array.isArray(m.sampleRates) ? (m.sampleRates as number[]) : null,
        maxOutputTokens: maxOutputTokensOf(m.capabilities),
        hedge: (m.capabilities as { hedge?: unknown } | null)?.hedge === true,
        upstreams: m.upstreams.map((u) =>
          withApiKey(
            {
              id: u.id,
              modelId: m.id,
              url: u.url.replace(/\/+$/, ''),
              protocol: u.protocol,
              upstreamModel: u.upstreamModel ?? m.id,
              weight: Math.max(0, u.weight),
              apiKeyEnv: u.apiKeyEnv,
              settings: settingsOf(u.protocol, u.settings),
            },
            u.apiKeyEnv,
          ),
        ),
      });
      // Health first seen from the database (another replica's checker), then our own.
      for (const u of m.upstreams) if (!this.health.has(u.id)) this.health.set(u.id, u.health);
    }
    this.models = next;
  }

  start(intervalMs: number, onError: (e: unknown) => void): void {
    this.timer = setInterval(() => this.refresh().catch(onError), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  all(): ModelEntry[] {
    return [...this.models.values()];
  }

  upstreams(): UpstreamEntry[] {
    return this.all().flatMap((m) => m.upstreams);
  }

  setHealth(upstreamId: string, health: Health, error?: string): void {
    this.health.set(upstreamId, health);
    if (error) this.healthErrors.set(upstreamId, error);
    else this.healthErrors.delete(upstreamId);
  }

  healthOf(upstreamId: string): Health {
    return this.health.get(upstreamId) ?? 'unknown';
  }

  /** Usable upstreams: not known to be down, circuit not open. Unknown counts as usable until checked. */
  healthyUpstreams(model: ModelEntry): UpstreamEntry[] {
    return model.upstreams.filter((u) => this.isHealthy(u));
  }

  /** Routed to: weighted, not down by its health checks, its circuit not open. */
  isHealthy(upstream: UpstreamEntry): boolean {
    return upstream.weight > 0 && this.healthOf(upstream.id) !== 'down' && !this.circuits.isOpen(upstream.id);
  }

  /**
   * A failed call on an upstream, counted toward its circuit only where its model has another
   * upstream to route to: a circuit on a model's only upstream would turn its faults into 503s.
   */
  callFailed(upstream: UpstreamEntry): void {
    const model = this.models.get(upstream.modelId);
    if (model && model.upstreams.filter((u) => u.weight > 0).length > 1) this.circuits.failure(upstream.id);
  }

  isServing(model: ModelEntry): boolean {
    return model.status === 'active' && this.healthyUpstreams(model).length > 0;
  }

  /** The ids of the active models of a modality, in id order. */
  activeIds(modality: Modality): string[] {
    return this.all()
      .filter((m) => m.modality === modality && m.status === 'active')
      .map((m) => m.id)
      .sort();
  }

  /**
   * The active model of this modality, or 404 model_not_found; then 403 model_not_allowed unless
   * the request's key may use it (`scope`: the request's key; null only where no request is
   * served: a job already admitted, a check of configuration). Every metered route and session
   * finds its models here, so the key's model list is checked in this one place.
   */
  resolve(modelId: unknown, modality: Modality, scope: ModelScope | null): ModelEntry {
    if (typeof modelId !== 'string' || modelId === '') {
      throw new ServiceError('invalid_request', 'You must provide a model parameter.', 'model');
    }
    const model = this.models.get(modelId);
    if (!model || model.modality !== modality || model.status !== 'active') {
      throw new ServiceError('model_not_found', `The model '${modelId}' does not exist or is not a ${modality} model.`, 'model');
    }
    if (scope) checkModelAllowed(scope.allowedModels, model.id);
    return model;
  }

  /**
   * Healthy upstreams of a model in the order to try them: a weighted random first pick,
   * then the others (for retries of connection failures). None -> 503 model_offline.
   */
  upstreamOrder(model: ModelEntry): UpstreamEntry[] {
    // A half-open circuit is offered; the caller takes its one trial call (circuits.admits).
    const healthy = this.healthyUpstreams(model);
    if (healthy.length === 0) {
      // Say why, when the health checks know (e.g. a local model without its model file), naming no engine address.
      const reasons = [
        ...new Set(
          model.upstreams
            .map((u) => this.healthErrors.get(u.id))
            .filter((e) => e !== undefined)
            .map(withoutAddresses),
        ),
      ];
      const open = model.upstreams.some((u) => this.circuits.stateOf(u.id) !== 'closed');
      const why = (reasons.length ? ` Last health check: ${reasons.join('; ')}.` : '') + (open ? ' Its upstreams failed recent calls (circuit open).' : '');
      throw new ServiceError('model_offline', `The model '${model.id}' has no healthy upstream at the moment; back off and retry in a few minutes.${why}`);
    }
    if (healthy.length === 1) return healthy;
    const total = healthy.reduce((s, u) => s + u.weight, 0);
    let r = Math.random() * total;
    let first = 0;
    for (let i = 0; i < healthy.length; i++) {
      r -= healthy[i]!.weight;
      if (r < 0) {
        first = i;
        break;
      }
    }
    return [healthy[first]!, ...healthy.filter((_, i) => i !== first)];
  }
}

function maxOutputTokensOf(capabilities: unknown): number | null {
  const v = (capabilities as { max_output_tokens?: unknown } | null)?.max_output_tokens;
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : null;
}
