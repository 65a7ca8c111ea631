import type { Prisma } from '../../db/database.ts';
import type { Modality } from '../../db/generated/sqlite/enums.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';

export interface ModelPrices {
  inputPicoPerToken?: bigint;
  outputPicoPerToken?: bigint;
  picoPerChar?: bigint;
  picoPerSecond?: bigint;
}

export interface UpsertModelInput {
  id: string;
  modality: Modality;
  displayName?: string;
  status?: 'active' | 'disabled';
  prices?: ModelPrices;
  sampleRates?: number[] | null;
  /** LLM: the most output reserved for a request that sets no max_tokens (stored as capabilities.max_output_tokens). */
  maxOutputTokens?: number;
  /** Race two upstreams for the first output (token, audio, transcript) and keep the first (stored as capabilities.hedge; docs/failover.md). */
  hedge?: boolean;
  /** `settings`: the protocol's settings for this upstream; on an update, absent keeps the stored ones. */
  upstream?: {
    url: string;
    protocol: string;
    upstreamModel?: string | null;
    weight?: number;
    apiKeyEnv?: string | null;
    settings?: Record<string, unknown> | null;
  };
}

/**
 * Whether an upstream may use a protocol, with what settings, for a model of a modality: the
 * gateway's protocol registry (gateway/upstreams/protocols `checkProtocol`), handed in by the caller.
 */
export type CheckProtocol = (
  protocol: string,
  modality: Modality,
  settings: unknown,
) => { ok: true; settings: Record<string, unknown> } | { ok: false; message: string; param: string };

const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

export function validateUpstreamUrl(url: string): void {
  if (/^local:[a-z0-9-]+$/.test(url)) return;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ServiceError('invalid_request', `Upstream URL is not a URL: ${url}`, 'upstream');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ServiceError('invalid_request', 'Upstream URL must be http(s):// or local:<engine>.', 'upstream');
  }
  if (parsed.username || parsed.password) {
    throw new ServiceError('invalid_request', 'Put upstream credentials in an environment variable (--api-key-env), not in the URL.', 'upstream');
  }
}

/** Creates or updates a model and, when given, adds or updates one of its upstreams (by URL). */
export async function upsertModel(prisma: Prisma, checkProtocol: CheckProtocol, input: UpsertModelInput) {
  if (!MODEL_ID.test(input.id)) throw new ServiceError('invalid_request', 'Model id must be 1-128 characters of letters, digits and ._:/-', 'id');
  if (input.upstream) {
    validateUpstreamUrl(input.upstream.url);
    if (input.upstream.apiKeyEnv && !ENV_NAME.test(input.upstream.apiKeyEnv)) {
      throw new ServiceError('invalid_request', 'api key env must be an environment variable name.', 'api_key_env');
    }
  }
  const existing = await prisma.model.findUnique({ where: { id: input.id } });
  if (existing && existing.modality !== input.modality) {
    throw new ServiceError('conflict', `Model ${input.id} exists with modality ${existing.modality}.`, 'modality');
  }
  let settings: Record<string, unknown> | undefined;
  if (input.upstream) {
    const stored =
      input.upstream.settings === undefined
        ? await prisma.upstream.findUnique({
            where: { modelId_url: { modelId: input.id, url: input.upstream.url } },
            select: { settings: true, protocol: true },
          })
        : null;
    const given = input.upstream.settings !== undefined ? input.upstream.settings : stored?.protocol === input.upstream.protocol ? stored.settings : null;
    const checked = checkProtocol(input.upstream.protocol, input.modality, given);
    if (!checked.ok) throw new ServiceError('invalid_request', checked.message, checked.param);
    settings = checked.settings;
  }
  const p = input.prices ?? {};
  const prices = {
    ...(p.inputPicoPerToken !== undefined && { priceInputPicoPerToken: p.inputPicoPerToken }),
    ...(p.outputPicoPerToken !== undefined && { priceOutputPicoPerToken: p.outputPicoPerToken }),
    ...(p.picoPerChar !== undefined && { pricePicoPerChar: p.picoPerChar }),
    ...(p.picoPerSecond !== undefined && { pricePicoPerSecond: p.picoPerSecond }),
  };
  const sampleRates = input.sampleRates === undefined ? {} : { sampleRates: input.sampleRates ?? undefined };
  if (input.maxOutputTokens !== undefined && !(Number.isSafeInteger(input.maxOutputTokens) && input.maxOutputTokens > 0)) {
    throw new ServiceError('invalid_request', 'max_output_tokens must be a positive integer.', 'max_output_tokens');
  }
  const changed = {
    ...(input.maxOutputTokens !== undefined && { max_output_tokens: input.maxOutputTokens }),
    ...(input.hedge !== undefined && { hedge: input.hedge }),
  };
  const capabilities = Object.keys(changed).length === 0 ? {} : { capabilities: { ...capabilitiesOf(existing?.capabilities), ...changed } };
  await prisma.model.upsert({
    where: { id: input.id },
    create: {
      id: input.id,
      modality: input.modality,
      displayName: input.displayName ?? '',
      status: input.status ?? 'active',
      ...prices,
      ...sampleRates,
      ...capabilities,
    },
    update: {
      ...(input.displayName !== undefined && { displayName: input.displayName }),
      ...(input.status !== undefined && { status: input.status }),
      ...prices,
      ...sampleRates,
      ...capabilities,
    },
  });
  if (input.upstream) {
    const u = input.upstream;
    await prisma.upstream.upsert({
      where: { modelId_url: { modelId: input.id, url: u.url } },
      create: {
        id: newId('ups'),
        modelId: input.id,
        url: u.url,
        protocol: u.protocol,
        settings: settings as object,
        upstreamModel: u.upstreamModel ?? null,
        weight: u.weight ?? 1,
        apiKeyEnv: u.apiKeyEnv ?? null,
      },
      update: {
        protocol: u.protocol,
        settings: settings as object,
        ...(u.upstreamModel !== undefined && { upstreamModel: u.upstreamModel }),
        ...(u.weight !== undefined && { weight: u.weight }),
        ...(u.apiKeyEnv !== undefined && { apiKeyEnv: u.apiKeyEnv }),
      },
    });
  }
  return getModel(prisma, input.id);
}

export async function getModel(prisma: Prisma, id: string) {
  const model = await prisma.model.findUnique({ where: { id }, include: { upstreams: { orderBy: { createdAt: 'asc' } } } });
  if (!model) throw new ServiceError('model_not_found', `The model '${id}' does not exist.`);
  return model;
}

export async function listModels(prisma: Prisma) {
  return prisma.model.findMany({ include: { upstreams: { orderBy: { createdAt: 'asc' } } }, orderBy: { id: 'asc' } });
}

export async function removeUpstream(prisma: Prisma, input: { modelId: string; url: string }) {
  const { count } = await prisma.upstream.deleteMany({ where: { modelId: input.modelId, url: input.url } });
  if (count === 0) throw new ServiceError('not_found', `Model ${input.modelId} has no upstream ${input.url}.`);
}

function capabilitiesOf(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
