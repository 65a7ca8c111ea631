// POST /tts/sse, POST /tts/bytes (native, Cartesia-shaped) and POST /v1/audio/speech
// (OpenAI-shaped), all on one pipeline: gateway/tts/synthesize.ts -> gateway/audio.
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import { contentTypeFor, convertAll, createAudioConverter } from '../audio/convert.ts';
import { accessTokenCredential } from '../core/access-token-credential.ts';
import { setSpendHeaders } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { ERROR_TABLE, envelope } from '../errors.ts';
import { allChunks, chargeSynthesis, startSynthesis, type Charge, type StartedSynthesis } from '../tts/synthesize.ts';
import { parseTtsRequest, type TtsRequest } from '../tts/tts-request.ts';
import type { OutputFormat } from '../audio/output-format.ts';
import { toFloat32, type PcmSamples } from '../audio/pcm.ts';
import { sendStream } from '../metrics/metrics-http.ts';
import { parseOpenAiSpeechRequest } from '../tts/openai-speech-request.ts';
import { voiceForOpenAiName } from '../tts/openai-voices.ts';

/**
 * A body without a Content-Type is read as JSON on the Cartesia-shaped routes: LiveKit's Cartesia
 * plugin posts its JSON to /tts/bytes without one. Any type that is given keeps its own answer
 * (415 for what is not JSON).
 */
const jsonWithoutContentType = async (request: FastifyRequest, _reply: FastifyReply, payload: RequestPayload) => {
  if (request.headers['content-type'] === undefined) request.raw.headers['content-type'] = 'application/json';
  return payload;
};

export function registerTtsRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // Cartesia's routes take its access tokens with the tts grant (gateway/core/access-token-credential.ts) as well as keys.
  const credential = accessTokenCredential(ctx, 'tts', false);
  app.post('/tts/sse', { config: { metered: true, credential }, preParsing: jsonWithoutContentType }, async (request, reply) => {
    const tts = parseTtsRequest(request.body, 'sse');
    const s = await startSynthesis(ctx, request, reply, tts, 'tts.sse');
    const charge = await chargeSynthesis(ctx, request, s, tts, 'tts.sse');
    setSpendHeaders(reply, charge.costMicros, charge.remainingMicros);
    reply.code(200).headers({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    return sendStream(reply, ctx.metrics, sseEvents(s, tts, request.id));
  });

  app.post('/tts/bytes', { config: { metered: true, credential }, preParsing: jsonWithoutContentType }, async (request, reply) => {
    const tts = parseTtsRequest(request.body, 'bytes');
    const s = await startSynthesis(ctx, request, reply, tts, 'tts.bytes');
    return sendAudio(ctx, reply, s, tts, () => chargeSynthesis(ctx, request, s, tts, 'tts.bytes'));
  });

  app.post('/v1/audio/speech', { config: { metered: true } }, async (request, reply) => {
    const { tts, sse } = parseOpenAiSpeechRequest(request.body);
    tts.voiceId = await voiceForOpenAiName(ctx.db.prisma, request.auth.orgId, tts.modelId, tts.voiceId);
    const s = await startSynthesis(ctx, request, reply, tts, 'audio.speech');
    const charge = () => chargeSynthesis(ctx, request, s, tts, 'audio.speech');
    if (sse) {
      const c = await charge();
      setSpendHeaders(reply, c.costMicros, c.remainingMicros);
      reply.code(200).headers({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
      return sendStream(reply, ctx.metrics, openAiSseEvents(s, tts, request.id));
    }
    return sendAudio(ctx, reply, s, tts, charge, openAiContentType(tts.output));
  });
}

/** The Content-Type of OpenAI's formats: its `pcm` is raw 16-bit little-endian mono at 24 kHz, said so rather than as bare octets. */
function openAiContentType(output: OutputFormat): string {
  return output.container === 'raw' ? `audio/pcm;rate=${output.sampleRate};channels=1` : contentTypeFor(output);
}

/** Whole file (exact WAV sizes, MP3 at the asked bit rate), or progressive bytes when streaming. */
export async function sendAudio(
  ctx: GatewayContext,
  reply: FastifyReply,
  s: StartedSynthesis,
  tts: TtsRequest,
  charge: () => Promise<Charge>,
  contentType = contentTypeFor(tts.output),
) {
  const { output, volume } = tts;
  if (!tts.stream) {
    const audio = await wholeAudio(s, tts);
    const c = await charge();
    setSpendHeaders(reply, c.costMicros, c.remainingMicros);
    return reply.code(200).header('content-type', contentType).send(audio);
  }
  const c = await charge();
  setSpendHeaders(reply, c.costMicros, c.remainingMicros);
  return sendStream(reply.code(200).header('content-type', contentType), ctx.metrics, progressiveBytes(s, output, volume));
}

/** All of a synthesis's audio as one file in the asked format. */
export async function wholeAudio(s: StartedSynthesis, tts: TtsRequest): Promise<Buffer> {
  const parts: PcmSamples[] = [];
  for await (const chunk of allChunks(s)) parts.push(chunk);
  return convertAll(concatFloat(parts), s.sampleRate, tts.output, tts.volume);
}

export async function* progressiveBytes(s: StartedSynthesis, output: OutputFormat, volume: number): AsyncGenerator<Buffer> {
  const converter = createAudioConverter({ inputSampleRate: s.sampleRate, output, volume });
  let ended = false;
  try {
    const header = converter.header();
    if (header.length) yield header;
    for await (const pcm of allChunks(s)) {
      const out = converter.push(pcm);
      if (out.length) yield out;
    }
    ended = true;
    const tail = converter.end();
    if (tail.length) yield tail;
  } finally {
    // The client went away or the engine failed: free the resampler/encoder now.
    if (!ended) converter.close();
  }
}

const sse = (obj: unknown) => `data: ${JSON.stringify(obj)}\n\n`;

/** Cartesia-compatible events: {type:"chunk", data, done:false, status_code, step_time} ... {type:"done"}. */
async function* sseEvents(s: StartedSynthesis, tts: TtsRequest, requestId: string): AsyncGenerator<string> {
  let last = performance.now();
  const chunkEvent = (bytes: Buffer) => {
    const now = performance.now();
    const e = sse({ type: 'chunk', data: bytes.toString('base64'), done: false, status_code: 206, step_time: Math.round(now - last) });
    last = now;
    return e;
  };
  try {
    for await (const bytes of progressiveBytes(s, tts.output, tts.volume)) yield chunkEvent(bytes);
    yield sse({ type: 'done', done: true, status_code: 200 });
  } catch (e) {
    if (s.call.clientGone) return;
    const err = e instanceof ServiceError ? e : new ServiceError('upstream_error', 'The speech engine failed mid-stream.');
    yield sse({
      type: 'error',
      done: true,
      status_code: ERROR_TABLE[err.code].status,
      title: err.code,
      error_code: err.code,
      message: err.message,
      request_id: requestId,
    });
  }
}

/**
 * OpenAI's stream_format "sse" (platform.openai.com/docs/api-reference/audio/speech-audio-delta-event):
 * speech.audio.delta events with base64 audio, then speech.audio.done whose usage counts the
 * characters billed (no tokenizer here). An engine failing mid-stream ends it with OpenAI's
 * stream error event, `{"error": {message, type, code, param}}`, which OpenAI's SDKs raise.
 */
async function* openAiSseEvents(s: StartedSynthesis, tts: TtsRequest, requestId: string): AsyncGenerator<string> {
  try {
    for await (const bytes of progressiveBytes(s, tts.output, tts.volume)) yield sse({ type: 'speech.audio.delta', audio: bytes.toString('base64') });
  } catch (e) {
    if (s.call.clientGone) return;
    const err = e instanceof ServiceError ? e : new ServiceError('upstream_error', 'The speech engine failed mid-stream.');
    yield sse({ ...envelope(err).body, request_id: requestId });
    return;
  }
  const characters = [...tts.transcript].length;
  yield sse({ type: 'speech.audio.done', usage: { input_tokens: characters, output_tokens: 0, total_tokens: characters } });
}

function concatFloat(parts: PcmSamples[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(toFloat32(p), at);
    at += p.length;
  }
  return out;
}
