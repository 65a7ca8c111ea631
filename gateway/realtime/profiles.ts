// Realtime profiles (config/realtime-profiles.json, or SVC_REALTIME_PROFILES_FILE): the models a
// conversation session on /v1/realtime?model=<profile> is composed of. `?model=` may also name an
// LLM of the registry: the session then uses the default stt and tts models (DEFAULTS below, or
// the registry's first of each modality) and the tts model's first platform voice.
import { ServiceError } from '../../server/services/errors.ts';
import type { RealtimeProfile } from '../../server/config/realtime-profiles.ts';
import type { ModelRegistry, ModelScope } from '../registry/model-registry.ts';

// The file itself is read in server/config (the dashboard's Talk page lists it too).
export { DEFAULT_PROFILES_FILE, loadRealtimeProfiles, type RealtimeProfile } from '../../server/config/realtime-profiles.ts';

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

/** The profile `?model=` names: a profile, or an LLM of the registry with the defaults (404 model_not_found otherwise; 403 model_not_allowed for the key of `scope`). */
export function resolveProfile(profiles: Map<string, RealtimeProfile>, registry: ModelRegistry, model: string, scope: ModelScope | null): RealtimeProfile {
  const profile = profiles.get(model);
  if (profile) return profile;
  // A client left at its default model (only its base URL changed) gets the first profile.
  const first = profiles.values().next().value;
  if (first && isOpenAiRealtimeName(model) && !registry.all().some((m) => m.id === model)) return first;
  registry.resolve(model, 'llm', scope);
  return { id: model, llm: model };
}
