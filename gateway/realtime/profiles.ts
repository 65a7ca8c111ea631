// Realtime profiles (config/realtime-profiles.json, or SVC_REALTIME_PROFILES_FILE): the models a
// conversation session on /v1/realtime?model=<profile> is composed of. `?model=` may also name an
// LLM of the registry: the session then uses the default stt and tts models (DEFAULTS below, or
// the registry's first of each modality) and the tts model's first platform voice.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { PROJECT_ROOT } from '../../server/project-root.ts';
import { ServiceError } from '../../server/services/errors.ts';
import type { ModelRegistry } from '../registry/model-registry.ts';

export interface RealtimeProfile {
  id: string;
  /** Each: a model id of the registry, or undefined for the default. */
  stt?: string;
  llm: string;
  tts?: string;
  voice?: string;
  instructions?: string;
}

const ProfilesFile = z.object({
  profiles: z.array(
    z.object({
      id: z.string().min(1),
      stt: z.string().min(1).optional(),
      llm: z.string().min(1),
      tts: z.string().min(1).optional(),
      voice: z.string().min(1).optional(),
      instructions: z.string().optional(),
    }),
  ),
});

export const DEFAULT_PROFILES_FILE = join(PROJECT_ROOT, 'config/realtime-profiles.json');

/** The profiles of `file`; none when it does not exist. A file that does not parse is an error at start, not at the first session. */
export function loadRealtimeProfiles(file = DEFAULT_PROFILES_FILE): Map<string, RealtimeProfile> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw e;
  }
  const parsed = ProfilesFile.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file}: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  return new Map(parsed.data.profiles.map((p) => [p.id, p]));
}

/** OpenAI's transcription model names (what LiveKit's and OpenAI's clients send by default): they get the session's own stt model. */
export const isOpenAiSttName = (model: string): boolean => /^(whisper-1|gpt-4o(-mini)?-transcribe.*|gpt-realtime.*|gpt-live-transcribe.*)$/.test(model);

/** OpenAI's realtime model names (the clients' defaults): they get the default profile. */
export const isOpenAiRealtimeName = (model: string): boolean => /^(gpt-realtime.*|gpt-4o(-mini)?-realtime.*)$/.test(model);

/** Preferred when a session names no stt or tts model: the engines the gateway ships. */
const DEFAULTS = { stt: 'local-stt', tts: 'local-flite' } as const;

/** The stt or tts model a session uses when it names none: the shipped default, else the registry's first active model of that modality. */
export function defaultModel(registry: ModelRegistry, modality: 'stt' | 'tts'): string {
  const ids = registry.activeIds(modality);
  if (ids.includes(DEFAULTS[modality])) return DEFAULTS[modality];
  if (ids.length === 0) throw new ServiceError('model_offline', `No ${modality} model is registered: a realtime session needs one.`);
  return ids[0]!;
}

/** The profile `?model=` names: a profile, or an LLM of the registry with the defaults (404 model_not_found otherwise). */
export function resolveProfile(profiles: Map<string, RealtimeProfile>, registry: ModelRegistry, model: string): RealtimeProfile {
  const profile = profiles.get(model);
  if (profile) return profile;
  // A client left at its default model (only its base URL changed) gets the first profile.
  const first = profiles.values().next().value;
  if (first && isOpenAiRealtimeName(model) && !registry.all().some((m) => m.id === model)) return first;
  registry.resolve(model, 'llm');
  return { id: model, llm: model };
}
