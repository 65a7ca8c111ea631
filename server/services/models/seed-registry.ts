// Seeds models from the shipped config/models.json (or SVC_MODELS_FILE). Only models that are
// not in the database yet are created, so operator changes survive restarts.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { PROJECT_ROOT } from '../../project-root.ts';
import { parseUsdToPico } from '../../money.ts';
import { upsertModel, type CheckProtocol } from './upsert-model.ts';

const ModelSeed = z.object({
  id: z.string(),
  modality: z.enum(['llm', 'tts', 'stt']),
  display_name: z.string().optional(),
  price_input_per_mtok: z.string().optional(),
  price_output_per_mtok: z.string().optional(),
  price_per_char: z.string().optional(),
  price_per_second: z.string().optional(),
  sample_rates: z.array(z.number().int()).optional(),
  upstreams: z.array(
    z.object({
      url: z.string(),
      protocol: z.string(),
      upstream_model: z.string().optional(),
      weight: z.number().int().min(0).optional(),
      api_key_env: z.string().optional(),
      settings: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
});
const SeedFile = z.object({ models: z.array(ModelSeed) });

export const DEFAULT_MODELS_FILE = join(PROJECT_ROOT, 'config/models.json');

/**
 * USD per million tokens -> pico-USD per token (1 USD/MTok = 1,000,000 pico/token). Exact:
 * a price that would need fractions of a pico-USD per token (more than 6 decimals) is refused.
 */
export function perMTokToPico(usdPerMTok: string): bigint {
  const picoPerMTok = parseUsdToPico(usdPerMTok);
  if (picoPerMTok % 1_000_000n !== 0n) throw new RangeError(`a price per million tokens has at most 6 decimals: ${JSON.stringify(usdPerMTok)}`);
  return picoPerMTok / 1_000_000n;
}

export async function seedRegistry(prisma: Prisma, checkProtocol: CheckProtocol, file = process.env.SVC_MODELS_FILE ?? DEFAULT_MODELS_FILE): Promise<string[]> {
  if (!existsSync(file)) return [];
  const seed = SeedFile.parse(JSON.parse(readFileSync(file, 'utf8')));
  const created: string[] = [];
  for (const m of seed.models) {
    if (await prisma.model.findUnique({ where: { id: m.id }, select: { id: true } })) continue;
    for (const [i, u] of m.upstreams.entries()) {
      await upsertModel(prisma, checkProtocol, {
        id: m.id,
        modality: m.modality,
        ...(i === 0 && {
          displayName: m.display_name ?? '',
          sampleRates: m.sample_rates ?? null,
          prices: {
            ...(m.price_input_per_mtok && { inputPicoPerToken: perMTokToPico(m.price_input_per_mtok) }),
            ...(m.price_output_per_mtok && { outputPicoPerToken: perMTokToPico(m.price_output_per_mtok) }),
            ...(m.price_per_char && { picoPerChar: parseUsdToPico(m.price_per_char) }),
            ...(m.price_per_second && { picoPerSecond: parseUsdToPico(m.price_per_second) }),
          },
        }),
        upstream: {
          url: u.url,
          protocol: u.protocol,
          upstreamModel: u.upstream_model ?? null,
          weight: u.weight ?? 1,
          apiKeyEnv: u.api_key_env ?? null,
          settings: u.settings ?? null,
        },
      });
    }
    created.push(m.id);
  }
  return created;
}
