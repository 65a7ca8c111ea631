// `openai`: any OpenAI-compatible server. Chat completions (vLLM, SGLang, llama.cpp server,
// Ollama, TGI) and the Responses API where the server has it (vLLM, Ollama, OpenAI), speech
// (`/audio/speech`: Kokoro-FastAPI, speaches, LocalAI), transcription
// (`/audio/transcriptions`: whisper.cpp server, speaches, vLLM) -- also streamed, the gateway
// cutting the audio into utterances (gateway/upstreams/segmented-streaming.ts) -- and cloning
// (`/audio/voices`). Reference: platform.openai.com/docs/api-reference (audio, chat).
import { z } from 'zod';
import { floatToS16, s16leBytes } from '../../audio/pcm.ts';
import { wavBlob, wavHeader } from '../../audio/wav.ts';
import {
  UpstreamError,
  type CallOptions,
  type ChatCapability,
  type CloneCapability,
  defineProtocol,
  type SpeechCapability,
  type TranscriptionCapability,
  type UpstreamTarget,
  type Word,
} from '../contract.ts';
import { dispatchCall, dispatchTarget } from '../dispatch-call.ts';
import { checkHttpHealth, drainAnswer, engineBody, engineDelete, engineFailure, engineJson, engineRequest, httpDispatcher } from '../engine-http.ts';
import { boundedSpeech, isWavStart, s16Chunks, wavStream } from '../pcm-streams.ts';
import { segmentedStreaming } from '../segmented-streaming.ts';

/** OpenAI's `pcm` response format: raw 24 kHz 16-bit mono. */
const OPENAI_PCM_RATE = 24000;
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

const bearer = (target: UpstreamTarget): Record<string, string> => (target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {});

/** Where an upstream's chat completions go, worked out once per registry entry (not per request). */
const chatTargets = new WeakMap<UpstreamTarget, { origin: string; path: string }>();
function chatTarget(upstream: UpstreamTarget): { origin: string; path: string } {
  let target = chatTargets.get(upstream);
  if (!target) chatTargets.set(upstream, (target = dispatchTarget(`${upstream.url}/chat/completions`)));
  return target;
}

// The hot path: the client's bytes go as they are, the engine's response is the ChatResponse
// itself (status, content type, body, text()); the route relays any status.
const chat: ChatCapability = (upstream, req) => {
  const key = upstream.apiKey;
  const { origin, path } = chatTarget(upstream);
  return dispatchCall(httpDispatcher, {
    origin,
    path,
    method: 'POST',
    headers: key ? { ...JSON_HEADERS, authorization: `Bearer ${key}` } : JSON_HEADERS,
    body: req.raw,
    signal: req.signal,
    timeoutMs: req.timeoutMs,
  }).catch((e: unknown) => {
    throw engineFailure(e, req, false);
  });
};

/** Where an upstream's Responses API requests go (worked out once per registry entry). */
const responsesTargets = new WeakMap<UpstreamTarget, { origin: string; path: string }>();

// OpenAI's Responses API, forwarded like chat: the client's bytes as they are, the engine's
// answer (any status) as the ChatResponse. Servers without it answer 404 and the route
// translates to chat completions instead.
const responses: ChatCapability = (upstream, req) => {
  let target = responsesTargets.get(upstream);
  if (!target) responsesTargets.set(upstream, (target = dispatchTarget(`${upstream.url}/responses`)));
  const key = upstream.apiKey;
  return dispatchCall(httpDispatcher, {
    origin: target.origin,
    path: target.path,
    method: 'POST',
    headers: key ? { ...JSON_HEADERS, authorization: `Bearer ${key}` } : JSON_HEADERS,
    body: req.raw,
    signal: req.signal,
    timeoutMs: req.timeoutMs,
  }).catch((e: unknown) => {
    throw engineFailure(e, req, false);
  });
};

const speech: SpeechCapability = {
  formatPhoneme: null,
  async synthesize(upstream, req) {
    const body = {
      model: upstream.upstreamModel,
      input: req.text,
      voice: req.voice.upstreamId,
      response_format: 'pcm',
      speed: req.speed,
      ...(req.language ? { language: req.language } : {}),
    };
    const res = await engineRequest(upstream.url, upstream.apiKey, { method: 'POST', path: '/audio/speech', headers: bearer(upstream), json: body }, req);
    // Some servers (Kokoro-FastAPI among them) send a WAV whatever was asked: read its header.
    const iterator = engineBody(res, req);
    const first = await iterator.next();
    async function* all(): AsyncGenerator<Buffer> {
      if (!first.done) yield first.value;
      yield* iterator;
    }
    if (!first.done && (isWavStart(first.value) || res.contentType.includes('wav'))) return boundedSpeech(await wavStream(all()), req.text);
    return boundedSpeech({ sampleRate: OPENAI_PCM_RATE, chunks: s16Chunks(all()) }, req.text);
  },
};

interface VerboseJson {
  text?: unknown;
  words?: { word?: unknown; start?: unknown; end?: unknown }[];
}

/** 16-bit WAV of mono float samples, as engines that take files want them. */
export function wavOf(samples: Float32Array, sampleRate: number): Buffer {
  const pcm = s16leBytes(floatToS16(samples));
  return Buffer.concat([wavHeader({ sampleRate, channels: 1, encoding: 'pcm_s16le', dataByteLength: pcm.length }), pcm]);
}

const transcription: TranscriptionCapability = {
  async transcribe(upstream, req) {
    const form = new FormData();
    form.set('file', wavBlob(wavOf(req.samples, req.sampleRate)), 'audio.wav');
    form.set('model', upstream.upstreamModel);
    form.set('response_format', 'verbose_json');
    form.append('timestamp_granularities[]', 'word');
    if (req.language) form.set('language', req.language);
    if (req.keyterms.length) form.set('prompt', req.keyterms.join(', '));
    const res = await engineRequest(
      upstream.url,
      upstream.apiKey,
      { method: 'POST', path: '/audio/transcriptions', headers: bearer(upstream), body: form },
      req,
    );
    const body = await engineJson<VerboseJson | null>(res, req, 'the transcription');
    // JSON of another shape is an engine fault too, not an empty transcript to bill for.
    if (body === null || typeof body !== 'object' || (typeof body.text !== 'string' && !Array.isArray(body.words))) {
      throw new UpstreamError('protocol', 'The transcription engine returned JSON without a transcript (no text or words).');
    }
    const words: Word[] = (Array.isArray(body.words) ? body.words : [])
      .filter((w) => typeof w.word === 'string' && typeof w.start === 'number' && typeof w.end === 'number')
      .map((w) => ({ word: String(w.word).trim(), start: Number(w.start), end: Number(w.end) }));
    return { text: typeof body.text === 'string' ? body.text.trim() : words.map((w) => w.word).join(' '), words };
  },
};

function parseExpiry(value: unknown): Date | null {
  if (typeof value === 'number' && Number.isFinite(value)) return new Date(value * 1000);
  if (typeof value === 'string' && !Number.isNaN(Date.parse(value))) return new Date(value);
  return null;
}

/** Speaker latents (engines that give the voice back rather than keep it) make clone answers of megabytes. */
const CLONE_ANSWER_MAX_BYTES = 8 * 1024 * 1024;

// Cloning on servers with a voice-creation endpoint (OpenAI's custom voices, and servers that
// mirror it): multipart `name`, `audio_sample` (WAV), optional `transcript`, `language`; the
// answer's `id` (or `voice_id`) is the voice to send to /audio/speech; an `expires_at` (unix
// seconds or ISO) becomes the profile's expiry.
const clone: CloneCapability = {
  async clone(upstream, req) {
    const form = new FormData();
    form.set('name', req.name);
    form.set('audio_sample', wavBlob(req.clip.wav), 'clip.wav');
    form.set('model', upstream.upstreamModel);
    if (req.transcript) form.set('transcript', req.transcript);
    form.set('language', req.language);
    form.set('mode', req.mode);
    const res = await engineRequest(upstream.url, upstream.apiKey, { method: 'POST', path: '/audio/voices', headers: bearer(upstream), body: form }, req);
    const body = await engineJson<Record<string, unknown> | null>(res, req, 'the clone request', CLONE_ANSWER_MAX_BYTES);
    const id = body?.id ?? body?.voice_id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 512) {
      throw new UpstreamError('protocol', 'The speech engine answered the clone request without a voice id.');
    }
    // Engines that return speaker conditioning (latents) instead of keeping the voice give it
    // back here; the profile keeps it and the speech request sends it each time.
    const latents = body?.speaker_latents ?? null;
    return {
      upstreamId: id,
      params: latents && typeof latents === 'object' ? { speaker_latents: latents } : null,
      expiresAt: parseExpiry(body?.expires_at),
      metadata: { engine: 'openai-compatible', upstream_voice_id: id },
    };
  },
  // OpenAI's DELETE /audio/voices/{voice_id} (developers.openai.com/api/reference/resources/audio/subresources/voices/methods/delete).
  deleteVoice: (target, upstreamId, call) => engineDelete(target.url, target.apiKey, `/audio/voices/${encodeURIComponent(upstreamId)}`, bearer(target), call),
};

/** The engine is there and takes our key: GET {url}/models answers 2xx (before a streamed transcription starts taking audio). */
export async function probeModels(target: UpstreamTarget, call: CallOptions): Promise<void> {
  await drainAnswer(await engineRequest(target.url, target.apiKey, { method: 'GET', path: '/models', headers: bearer(target) }, call), call);
}

export const openai = defineProtocol({
  name: 'openai',
  summary: 'any OpenAI-compatible server: /chat/completions, /responses, /audio/speech, /audio/transcriptions (streamed by the gateway), /audio/voices',
  settings: z.object({}).strict(),
  capabilities: ['chat', 'speech', 'transcription', 'streaming_transcription', 'clone'],
  create: () => ({
    // Healthy when GET {url}/models answers 2xx.
    health: (target, signal) => checkHttpHealth(target.url, '/models', bearer(target), signal, target.apiKey),
    chat,
    responses,
    speech,
    transcription,
    streamingTranscription: segmentedStreaming(transcription, probeModels),
    clone,
  }),
});
