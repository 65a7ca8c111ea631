// A /v1/realtime session's configuration: what `session.update` (GA and beta shapes) and
// `transcription_session.update` may set, checked, and the session object the server echoes in
// `session.created` / `session.updated` (GA shape). Fields of OpenAI's we do not act on
// (tracing, noise_reduction, include, prompt...) are accepted and ignored; the ones we act on
// are checked and named in errors by their path in the event.
import { ServiceError } from '../../server/services/errors.ts';
import type { Encoding, SampleRate } from '../audio/output-format.ts';
import type { TurnDetection } from '../stt/turn-detector.ts';

/** OpenAI's audio formats: pcm16 at 24 kHz, or G.711 at 8 kHz (telephony). */
export type RealtimeAudioFormat = 'pcm16' | 'g711_ulaw' | 'g711_alaw';

export const FORMAT_AUDIO: Record<RealtimeAudioFormat, { sampleRate: SampleRate; encoding: Encoding }> = {
  pcm16: { sampleRate: 24_000, encoding: 'pcm_s16le' },
  g711_ulaw: { sampleRate: 8_000, encoding: 'pcm_mulaw' },
  g711_alaw: { sampleRate: 8_000, encoding: 'pcm_alaw' },
};

/** A format as GA events write it. */
export const GA_FORMAT: Record<RealtimeAudioFormat, object> = {
  pcm16: { type: 'audio/pcm', rate: 24_000 },
  g711_ulaw: { type: 'audio/pcmu' },
  g711_alaw: { type: 'audio/pcma' },
};

export interface TurnDetectionConfig {
  type: 'server_vad' | 'semantic_vad';
  preset: TurnDetection;
  /** server_vad */
  threshold?: number;
  prefixPaddingMs: number;
  silenceDurationMs?: number;
  /** semantic_vad */
  eagerness?: 'low' | 'medium' | 'high' | 'auto';
  createResponse: boolean;
  interruptResponse: boolean;
}

export interface RealtimeTool {
  type: 'function';
  name: string;
  description?: string;
  parameters?: unknown;
}

export interface RealtimeConfig {
  kind: 'realtime' | 'transcription';
  /** The profile or LLM named by `?model=` / `session.model` (conversation sessions). */
  model: string | null;
  instructions: string;
  outputModalities: ('audio' | 'text')[];
  inputFormat: RealtimeAudioFormat;
  outputFormat: RealtimeAudioFormat;
  /** The registry's stt model transcribing the user's audio; null: the profile's. */
  transcriptionModel: string | null;
  language: string | undefined;
  turnDetection: TurnDetectionConfig | null;
  voice: string | null;
  /** The registry's tts model speaking the answers (our extension `audio.output.model`); null: the profile's. */
  ttsModel: string | null;
  /** Our extension `audio.output.pronunciation_dict_id`. */
  dictId: string | undefined;
  speed: number;
  tools: RealtimeTool[];
  toolChoice: unknown;
  temperature: number | undefined;
  maxOutputTokens: number | 'inf';
  /** Our extension `svc_turn_latency`: an `svc.turn_latency` event after each turn the detector ended. */
  turnLatency: boolean;
  /** Our extension `svc_preemptive_answers`: answers prepared on the eager end of turn (responses.ts). */
  preemptive: boolean;
}

/** OpenAI's defaults (server_vad: threshold 0.5, 300 ms of prefix, 500 ms of silence; semantic_vad: eagerness auto). */
export function defaultTurnDetection(type: 'server_vad' | 'semantic_vad'): TurnDetectionConfig {
  return type === 'server_vad'
    ? { type, preset: 'balanced', threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, createResponse: true, interruptResponse: true }
    : { type, preset: 'balanced', eagerness: 'auto', prefixPaddingMs: 300, createResponse: true, interruptResponse: true };
}

export function defaultConfig(kind: RealtimeConfig['kind'], model: string | null): RealtimeConfig {
  return {
    kind,
    model,
    instructions: '',
    outputModalities: ['audio'],
    inputFormat: 'pcm16',
    outputFormat: 'pcm16',
    transcriptionModel: null,
    language: undefined,
    turnDetection: defaultTurnDetection('server_vad'),
    voice: null,
    ttsModel: null,
    dictId: undefined,
    speed: 1,
    tools: [],
    toolChoice: 'auto',
    temperature: undefined,
    maxOutputTokens: 'inf',
    turnLatency: false,
    preemptive: false,
  };
}

const EAGERNESS_PRESET: Record<string, TurnDetection> = { low: 'patient', medium: 'balanced', auto: 'balanced', high: 'responsive' };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const bad = (param: string, message: string) => new ServiceError('invalid_request', `${param}: ${message}`, param);

function optString(o: Obj, key: string, path: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw bad(`${path}.${key}`, 'must be a string');
  return v;
}

function optNumber(o: Obj, key: string, path: string, min: number, max: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw bad(`${path}.${key}`, `must be a number from ${min} to ${max}`);
  return v;
}

function optBool(o: Obj, key: string, path: string): boolean | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw bad(`${path}.${key}`, 'must be true or false');
  return v;
}

/** A format as GA (`{type: "audio/pcm", rate: 24000}`, `audio/pcmu`, `audio/pcma`) or beta (`"pcm16"`, `"g711_ulaw"`, `"g711_alaw"`) writes it. */
function parseFormat(v: unknown, path: string): RealtimeAudioFormat {
  if (typeof v === 'string') {
    if (v === 'pcm16' || v === 'g711_ulaw' || v === 'g711_alaw') return v;
    throw bad(path, 'must be one of pcm16, g711_ulaw, g711_alaw');
  }
  if (!isObj(v)) throw bad(path, 'must be an object like {"type":"audio/pcm","rate":24000}');
  if (v.type === 'audio/pcm') {
    if (v.rate !== undefined && v.rate !== 24_000) throw bad(`${path}.rate`, 'must be 24000 (pcm16 is 24 kHz)');
    return 'pcm16';
  }
  if (v.type === 'audio/pcmu') return 'g711_ulaw';
  if (v.type === 'audio/pcma') return 'g711_alaw';
  throw bad(`${path}.type`, 'must be one of audio/pcm, audio/pcmu, audio/pcma');
}

function parseTurnDetection(v: unknown, path: string): TurnDetectionConfig | null {
  if (v === null) return null;
  if (!isObj(v)) throw bad(path, 'must be an object or null');
  const type = v.type ?? 'server_vad';
  if (type !== 'server_vad' && type !== 'semantic_vad') throw bad(`${path}.type`, 'must be server_vad or semantic_vad');
  const t = defaultTurnDetection(type);
  t.createResponse = optBool(v, 'create_response', path) ?? true;
  t.interruptResponse = optBool(v, 'interrupt_response', path) ?? true;
  t.prefixPaddingMs = optNumber(v, 'prefix_padding_ms', path, 0, 10_000) ?? t.prefixPaddingMs;
  if (type === 'server_vad') {
    t.threshold = optNumber(v, 'threshold', path, 0, 1) ?? 0.5;
    t.silenceDurationMs = optNumber(v, 'silence_duration_ms', path, 0, 10_000) ?? 500;
  } else {
    const eagerness = optString(v, 'eagerness', path) ?? 'auto';
    if (!(eagerness in EAGERNESS_PRESET)) throw bad(`${path}.eagerness`, 'must be one of low, medium, high, auto');
    t.eagerness = eagerness as TurnDetectionConfig['eagerness'];
    t.preset = EAGERNESS_PRESET[eagerness]!;
  }
  return t;
}

function parseTools(v: unknown, path: string): RealtimeTool[] {
  if (!Array.isArray(v)) throw bad(path, 'must be an array');
  if (v.length > 128) throw bad(path, 'must have at most 128 tools');
  return v.map((tool, i) => {
    const p = `${path}[${i}]`;
    if (!isObj(tool) || (tool.type ?? 'function') !== 'function') throw bad(`${p}.type`, 'must be "function"');
    const name = optString(tool, 'name', p);
    if (!name) throw bad(`${p}.name`, 'is required');
    return { type: 'function', name, description: optString(tool, 'description', p), parameters: tool.parameters };
  });
}

function parseTranscription(v: unknown, path: string, into: RealtimeConfig): void {
  if (v === null || v === undefined) return;
  if (!isObj(v)) throw bad(path, 'must be an object');
  into.transcriptionModel = optString(v, 'model', path) ?? into.transcriptionModel;
  into.language = optString(v, 'language', path) ?? into.language;
}

/**
 * `session` of a session.update (or transcription_session.update) applied to `current`: a new
 * config, or a ServiceError naming the field. Beta fields (`input_audio_format`, `modalities`,
 * `voice`, `input_audio_transcription`, `max_response_output_tokens`...) and GA ones (`audio.input`,
 * `audio.output`, `output_modalities`, `max_output_tokens`) are both read.
 */
export function applySessionUpdate(current: RealtimeConfig, session: unknown): RealtimeConfig {
  if (!isObj(session)) throw bad('session', 'must be an object');
  const next: RealtimeConfig = { ...current };
  const p = 'session';
  if (session.type !== undefined && session.type !== null) {
    if (session.type !== 'realtime' && session.type !== 'transcription') throw bad('session.type', 'must be realtime or transcription');
    if (session.type !== current.kind) throw bad('session.type', `this is a ${current.kind} session; its type cannot change`);
  }
  if (session.model !== undefined && session.model !== null) {
    if (typeof session.model !== 'string') throw bad('session.model', 'must be a string');
    next.model = session.model;
  }
  next.instructions = optString(session, 'instructions', p) ?? next.instructions;
  const modalities = session.output_modalities ?? session.modalities;
  if (modalities !== undefined && modalities !== null) {
    const param = session.output_modalities !== undefined ? 'session.output_modalities' : 'session.modalities';
    if (!Array.isArray(modalities) || modalities.length === 0 || modalities.some((m) => m !== 'audio' && m !== 'text'))
      throw bad(param, 'must be ["audio"] or ["text"]');
    // GA: audio includes its transcript; a beta ["text","audio"] means the same.
    next.outputModalities = modalities.includes('audio') ? ['audio'] : ['text'];
  }
  if (session.input_audio_format !== undefined) next.inputFormat = parseFormat(session.input_audio_format, 'session.input_audio_format');
  if (session.output_audio_format !== undefined) next.outputFormat = parseFormat(session.output_audio_format, 'session.output_audio_format');
  if (session.voice !== undefined && session.voice !== null) next.voice = optString(session, 'voice', p)!;
  if (session.input_audio_transcription !== undefined) parseTranscription(session.input_audio_transcription, 'session.input_audio_transcription', next);
  if (session.turn_detection !== undefined) next.turnDetection = parseTurnDetection(session.turn_detection, 'session.turn_detection');
  if (session.audio !== undefined && session.audio !== null) {
    if (!isObj(session.audio)) throw bad('session.audio', 'must be an object');
    const { input, output } = session.audio;
    if (input !== undefined && input !== null) {
      if (!isObj(input)) throw bad('session.audio.input', 'must be an object');
      if (input.format !== undefined) next.inputFormat = parseFormat(input.format, 'session.audio.input.format');
      if (input.transcription !== undefined) parseTranscription(input.transcription, 'session.audio.input.transcription', next);
      if (input.turn_detection !== undefined) next.turnDetection = parseTurnDetection(input.turn_detection, 'session.audio.input.turn_detection');
    }
    if (output !== undefined && output !== null) {
      if (!isObj(output)) throw bad('session.audio.output', 'must be an object');
      const op = 'session.audio.output';
      if (output.format !== undefined) next.outputFormat = parseFormat(output.format, `${op}.format`);
      next.voice = optString(output, 'voice', op) ?? next.voice;
      next.ttsModel = optString(output, 'model', op) ?? next.ttsModel;
      next.dictId = optString(output, 'pronunciation_dict_id', op) ?? next.dictId;
      next.speed = optNumber(output, 'speed', op, 0.6, 1.5) ?? next.speed;
    }
  }
  if (session.tools !== undefined && session.tools !== null) next.tools = parseTools(session.tools, 'session.tools');
  if (session.tool_choice !== undefined) next.toolChoice = session.tool_choice;
  next.temperature = optNumber(session, 'temperature', p, 0, 2) ?? next.temperature;
  next.turnLatency = optBool(session, 'svc_turn_latency', p) ?? next.turnLatency;
  next.preemptive = optBool(session, 'svc_preemptive_answers', p) ?? next.preemptive;
  const max = session.max_output_tokens ?? session.max_response_output_tokens;
  if (max !== undefined && max !== null) {
    const param = session.max_output_tokens !== undefined ? 'session.max_output_tokens' : 'session.max_response_output_tokens';
    if (max !== 'inf' && (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > 4096))
      throw bad(param, 'must be an integer from 1 to 4096, or "inf"');
    next.maxOutputTokens = max;
  }
  return next;
}

function turnDetectionWire(t: TurnDetectionConfig | null): object | null {
  if (!t) return null;
  const common = { create_response: t.createResponse, interrupt_response: t.interruptResponse };
  return t.type === 'server_vad'
    ? { type: t.type, threshold: t.threshold, prefix_padding_ms: t.prefixPaddingMs, silence_duration_ms: t.silenceDurationMs, idle_timeout_ms: null, ...common }
    : { type: t.type, eagerness: t.eagerness, ...common };
}

/** The session object of session.created / session.updated (GA shape), with the models it resolved to. */
export function sessionWire(id: string, c: RealtimeConfig, resolved: { stt: string; llm?: string; tts?: string; voice?: string; expiresAt: number }): object {
  const input = {
    format: GA_FORMAT[c.inputFormat],
    transcription: { model: resolved.stt, language: c.language ?? null, prompt: '' },
    noise_reduction: null,
    turn_detection: turnDetectionWire(c.turnDetection),
  };
  if (c.kind === 'transcription') {
    return {
      type: 'transcription',
      object: 'realtime.transcription_session',
      id,
      expires_at: resolved.expiresAt,
      audio: { input },
      include: null,
      svc_turn_latency: c.turnLatency,
    };
  }
  return {
    type: 'realtime',
    object: 'realtime.session',
    id,
    model: c.model,
    output_modalities: c.outputModalities,
    instructions: c.instructions,
    tools: c.tools,
    tool_choice: c.toolChoice,
    max_output_tokens: c.maxOutputTokens,
    temperature: c.temperature ?? null,
    tracing: null,
    truncation: 'auto',
    prompt: null,
    expires_at: resolved.expiresAt,
    audio: { input, output: { format: GA_FORMAT[c.outputFormat], voice: resolved.voice ?? c.voice, speed: c.speed, model: resolved.tts ?? null } },
    include: null,
    // What the session is composed of (ours): the registry's models it transcribes, answers and speaks with.
    models: { stt: resolved.stt, llm: resolved.llm ?? null, tts: resolved.tts ?? null },
    // Ours: whether each turn's latency is reported (svc.turn_latency), whether answers are prepared on the eager end of turn.
    svc_turn_latency: c.turnLatency,
    svc_preemptive_answers: c.preemptive,
  };
}
