// Which of the registry's models a /v1/realtime session runs on now: the stt model transcribing
// the user's audio, and the LLM, tts model and voice behind a response. What the session's
// configuration names, else its profile's, else the defaults (profiles.ts); OpenAI's model and
// voice names (a client's defaults) get the profile's.
import { ServiceError } from '../../server/services/errors.ts';
import { defaultVoiceFor } from '../../server/services/voices/default-voice.ts';
import type { GatewayContext } from '../context.ts';
import type { RequestAuth } from '../core/gateway-core.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { streamingModel } from '../stt/open-session.ts';
import { resolveTtsModel, resolveVoice, type ResolvedVoice } from '../tts/synthesize.ts';
import { OPENAI_VOICES } from '../tts/openai-voices.ts';
import { defaultModel, isOpenAiRealtimeName, isOpenAiSttName, resolveProfile, type RealtimeProfile } from './profiles.ts';
import type { RealtimeAudioFormat, RealtimeConfig } from './session-config.ts';

/** The models behind one response. */
export interface ResponseEngines {
  llm: ModelEntry;
  /** null: a text-only response. */
  tts: { model: ModelEntry; voice: ResolvedVoice; voiceId: string; speed: number; language: string | undefined; format: RealtimeAudioFormat } | null;
}

export class SessionEngines {
  /** The last engines resolved, and for what (a model lookup per update or response is not repeated). */
  private cache: { key: string; engines: Promise<ResponseEngines>; at: number } | null = null;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly auth: RequestAuth,
    /** What `?model=` named (conversation sessions). */
    private readonly urlProfile: RealtimeProfile | null,
    private readonly profiles: Map<string, RealtimeProfile>,
  ) {}

  sttModelId(config: RealtimeConfig): string {
    const asked = config.transcriptionModel;
    if (asked && !isOpenAiSttName(asked)) return asked;
    return this.urlProfile?.stt ?? defaultModel(this.ctx.registry, 'stt');
  }

  sttModel(config: RealtimeConfig): ModelEntry {
    return streamingModel(this.ctx, this.sttModelId(config), this.auth);
  }

  profile(config: RealtimeConfig): RealtimeProfile {
    const { model } = config;
    const { registry } = this.ctx;
    // An OpenAI model name in session.update (a client's default) keeps the session's profile.
    if (!model || model === this.urlProfile?.id || (isOpenAiRealtimeName(model) && !registry.all().some((m) => m.id === model))) return this.urlProfile!;
    return resolveProfile(this.profiles, registry, model, this.auth);
  }

  /** The LLM and (audio answers) the TTS model and voice a response uses now (looked up again only when one of them changed). */
  forResponse(config: RealtimeConfig, textOnly: boolean, voiceOverride?: string): Promise<ResponseEngines> {
    const c = config;
    const key = JSON.stringify([c.model, textOnly, voiceOverride ?? c.voice, c.ttsModel, c.dictId, c.speed, c.language, c.outputFormat]);
    // Kept as long as the registry's own snapshot: a price or an upstream changed there is seen as soon.
    if (this.cache?.key !== key || performance.now() - this.cache.at > this.ctx.config.registryRefreshMs) {
      const engines = this.lookUp(config, textOnly, voiceOverride);
      this.cache = { key, engines, at: performance.now() };
      engines.catch(() => {
        if (this.cache?.engines === engines) this.cache = null;
      });
    }
    return this.cache!.engines;
  }

  private async lookUp(config: RealtimeConfig, textOnly: boolean, voiceOverride?: string): Promise<ResponseEngines> {
    const { ctx, auth } = this;
    const profile = this.profile(config);
    const llm = ctx.registry.resolve(profile.llm, 'llm', auth);
    if (textOnly) return { llm, tts: null };
    const ttsModel = resolveTtsModel(ctx, config.ttsModel ?? profile.tts ?? defaultModel(ctx.registry, 'tts'), 'realtime', auth);
    const asked = voiceOverride ?? config.voice;
    let voiceId = asked && !OPENAI_VOICES.has(asked) ? asked : (profile.voice ?? (await defaultVoiceFor(ctx.db.prisma, ttsModel.id)));
    if (!voiceId)
      throw new ServiceError(
        'voice_not_found',
        `No voice has a ready profile for '${ttsModel.id}'; name one in session.audio.output.voice.`,
        'session.audio.output.voice',
      );
    const voice = await resolveVoice(ctx, auth.orgId, ttsModel, { voiceId, dictId: config.dictId }, 'realtime');
    voiceId = voice.profile.voiceId;
    return { llm, tts: { model: ttsModel, voice, voiceId, speed: config.speed, language: config.language, format: config.outputFormat } };
  }
}
