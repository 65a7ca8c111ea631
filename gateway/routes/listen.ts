// Deepgram-compatible listen: WS /v1/listen (live, the session in Deepgram's dialect:
// gateway/stt/dialects/deepgram.ts) and POST /v1/listen (pre-recorded: raw audio body, Deepgram's
// response shape), so that Deepgram's clients (@deepgram/sdk, LiveKit's and pipecat's Deepgram
// plugins) work by changing their base URL only. Metered like /stt/websocket and
// /v1/audio/transcriptions; the key may come as `Authorization: Token <key>` (Deepgram's), Bearer,
// X-API-Key, ?api_key= / ?access_token= or the subprotocols `token, <key>` (presentedKey).
//
// Query parameters (reference: developers.deepgram.com/reference/speech-to-text/listen-streaming
// and listen-pre-recorded): `model` is a model id of this gateway's registry (a Deepgram name such
// as nova-3 works once a model of that id is registered); `encoding` linear16 | mulaw | alaw;
// `sample_rate`; `channels` 1; `interim_results`, `vad_events`, `punctuate`, `smart_format`
// (true/false); `endpointing` (ms of silence that end an utterance with speech_final, at least
// 200 here, or false; default Deepgram's 10, so 200); `utterance_end_ms`; `keyterm` / `keywords`
// (repeatable; hints); `language`; batch only: `utterances`, `utt_split`. Others (diarize,
// numerals, filler_words, ...) are accepted and have no effect.
//
// Errors are the gateway's envelope with Deepgram's fields added (`err_code`, `err_msg`,
// `request_id`; the `dg-error` header on refusals), so either kind of client can read them.
import { createHash, randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { useVendorErrorShape, type VendorErrorShape } from '../vendor-error-shape.ts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import type { Encoding } from '../audio/output-format.ts';
import { decodeSamples } from '../audio/sample-encoding.ts';
import { sniffAudioFormat } from '../audio/sniff.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { decodeUploadedAudio, measureUploadedAudio, parseSampleRateParam, type DecodedAudio } from '../stt/decode-upload.ts';
import { deepgramDialect, deepgramErrorFields, deepgramTranscript, deepgramWords } from '../stt/dialects/deepgram.ts';
import { streamingModel, sttSessionRoute, type SessionPlan } from '../stt/open-session.ts';
import { transcribeBilled } from '../stt/transcribe-billed.ts';
import { MAX_END_TIMEOUT_MS, parseMillis, presetSettings } from '../stt/turn-params.ts';
import type { Word } from '../upstreams/contract.ts';
import { TRANSCRIPTION_BODY_LIMIT } from './transcriptions.ts';

/** Deepgram's encodings of raw audio that the gateway decodes (the others are codecs or containers it does not). */
const ENCODINGS: Record<string, Encoding> = { linear16: 'pcm_s16le', mulaw: 'pcm_mulaw', alaw: 'pcm_alaw' };
/** Deepgram's default endpointing: an utterance ends (speech_final) after this much silence. */
const DEFAULT_ENDPOINTING_MS = 10;
/**
 * The least silence that ends an utterance here. The gateway's VAD (32 ms frames) hears the gaps
 * between words as silence, and each end of an utterance finalizes the recognizer: at Deepgram's
 * 10 ms (LiveKit sends 25) sentences were cut between words and lost words; from 200 ms on each
 * sentence gets one final.
 */
const MIN_ENDPOINTING_MS = 200;
/** Deepgram's default gap between words that splits utterances (batch `utt_split`, seconds). */
const DEFAULT_UTT_SPLIT = 0.8;
const MAX_HINTS = 100;

type Query = Record<string, string | string[] | undefined>;

/** The parameters both /v1/listen routes read. */
interface ListenParams {
  modelId: string | undefined;
  encoding: Encoding;
  rawRate: string | undefined;
  punctuate: boolean;
  keyterms: string[];
  language: string | undefined;
}

const one = (q: Query, name: string) => (Array.isArray(q[name]) ? q[name][0] : q[name]);
const all = (q: Query, name: string) => [q[name] ?? []].flat();

/** true / false (any case: Python clients may send True). */
function bool(q: Query, name: string, fallback: boolean): boolean {
  const raw = one(q, name);
  if (raw === undefined || raw === '') return fallback;
  const value = raw.toLowerCase();
  if (value === 'true' || value === 'false') return value === 'true';
  throw new ServiceError('invalid_request', `${name} must be true or false (got ${JSON.stringify(raw)}).`, name);
}

/**
 * A hint as sent: LiveKit's Deepgram plugin percent-encodes values before its URL encodes them
 * again, so a term with a space arrives as "hello%20world". Keywords carry a boost (`word:2`),
 * which is dropped.
 */
function hint(raw: string, isKeyword: boolean): string {
  let term = raw;
  if (/%[0-9a-f]{2}/i.test(term)) {
    try {
      term = decodeURIComponent(term);
    } catch {
      // Not an encoding after all: kept as it is.
    }
  }
  if (isKeyword) term = term.replace(/:-?\d+(\.\d+)?$/, '');
  return term.trim();
}

function listenParams(q: Query): ListenParams {
  const rawEncoding = one(q, 'encoding');
  const encoding = rawEncoding === undefined || rawEncoding === '' ? 'pcm_s16le' : ENCODINGS[rawEncoding];
  if (!encoding) {
    throw new ServiceError(
      'invalid_request',
      `encoding must be one of ${Object.keys(ENCODINGS).join(', ')} (got ${JSON.stringify(rawEncoding)}); the gateway decodes raw PCM and G.711 only.`,
      'encoding',
    );
  }
  const channels = one(q, 'channels');
  if (channels !== undefined && channels !== '' && channels !== '1') {
    throw new ServiceError('invalid_request', `This gateway transcribes mono audio only: channels must be 1 (got ${JSON.stringify(channels)}).`, 'channels');
  }
  const hints = [...all(q, 'keyterm').map((t) => hint(t, false)), ...all(q, 'keywords').map((t) => hint(t, true))];
  return {
    modelId: one(q, 'model'),
    encoding,
    rawRate: one(q, 'sample_rate'),
    // smart_format implies punctuation at Deepgram too.
    punctuate: bool(q, 'punctuate', false) || bool(q, 'smart_format', false),
    keyterms: [...new Set(hints.filter(Boolean))].slice(0, MAX_HINTS),
    language: one(q, 'language') || undefined,
  };
}

/** The model of a /v1/listen request; an unknown one says how a Deepgram name is made to work. */
function listenModel(modelId: string | undefined, resolve: (id: string | undefined) => ModelEntry): ModelEntry {
  try {
    return resolve(modelId);
  } catch (err) {
    if (isServiceError(err) && err.code === 'model_not_found') {
      throw new ServiceError(
        'model_not_found',
        `${err.message} Pass the id of one of this gateway's stt models (GET /v1/models), or register a model with the id '${modelId}' to use that name.`,
        'model',
      );
    }
    throw err;
  }
}

/** `endpointing`: milliseconds of silence, or false (no speech_final); absent: Deepgram's default. */
function parseEndpointing(raw: string | undefined): number | false {
  const value = raw?.toLowerCase();
  if (value === 'false') return false;
  if (value === undefined || value === '' || value === 'true') return DEFAULT_ENDPOINTING_MS;
  return parseMillis(raw, 'endpointing', 0, MAX_END_TIMEOUT_MS)!;
}

/** The upgrade request ids, for the `dg-request-id` header of the 101 answer. */
const upgradeIds = new WeakMap<IncomingMessage, string>();

function planLive(ctx: GatewayContext, request: FastifyRequest): SessionPlan {
  const q = request.query as Query;
  const p = listenParams(q);
  const model = listenModel(p.modelId, (id) => streamingModel(ctx, id, request.auth));
  const sampleRate = parseSampleRateParam(p.rawRate === undefined || p.rawRate === '' ? '16000' : p.rawRate, model.sampleRates)!;
  const endpointing = parseEndpointing(one(q, 'endpointing'));
  const utteranceEndMs = parseMillis(one(q, 'utterance_end_ms'), 'utterance_end_ms', 1000, MAX_END_TIMEOUT_MS);
  // An utterance (the gateway's turn) ends after `endpointing` ms of silence (at least
  // MIN_ENDPOINTING_MS); with endpointing off, after utterance_end_ms of it if given, else when the
  // gateway's own detection (the balanced preset) says so.
  const fixedSilenceMs = endpointing === false ? utteranceEndMs : Math.max(endpointing, MIN_ENDPOINTING_MS);
  const turns = presetSettings('balanced', { eager: false, fixedSilenceMs });
  upgradeIds.set(request.raw, request.id);
  return {
    model,
    sampleRate,
    encoding: p.encoding,
    // The client's endpointing decides, not an engine's own.
    turnSource: 'gateway',
    turns,
    keyterms: p.keyterms,
    language: p.language,
    dialect: deepgramDialect({
      interimResults: bool(q, 'interim_results', false),
      speechFinal: endpointing !== false,
      utteranceEnd: utteranceEndMs !== undefined,
      vadEvents: bool(q, 'vad_events', false),
      punctuate: p.punctuate,
    }),
  };
}

/**
 * A pre-recorded body: WAV (its header says how to read it), else raw audio in `encoding` at
 * `sample_rate` (default 16000), as Deepgram reads headerless audio.
 */
function decodeBody(body: Buffer, p: ListenParams, model: ModelEntry): DecodedAudio {
  const declaredRate = parseSampleRateParam(p.rawRate, model.sampleRates);
  if (p.encoding === 'pcm_s16le' || sniffAudioFormat(body) === 'wav') return decodeUploadedAudio(body, declaredRate, model.sampleRates);
  // Raw G.711: refused as any upload is when it is compressed or not audio at all.
  const { sampleRate } = measureUploadedAudio(body, declaredRate);
  const samples = decodeSamples(body, p.encoding);
  return { samples, sampleRate, durationSeconds: samples.length / sampleRate };
}

/** Deepgram's utterances: the words split where the gap between two exceeds `split` seconds; each with its own id (a UUID, as Deepgram's). */
function utterancesOf(words: Word[], split: number, punctuate: boolean) {
  const groups: Word[][] = [];
  for (const w of words) {
    const group = groups.at(-1);
    if (group && w.start - group.at(-1)!.end <= split) group.push(w);
    else groups.push([w]);
  }
  return groups.map((g) => {
    const transcript = deepgramTranscript(g.map((w) => w.word).join(' '), punctuate);
    return { start: g[0]!.start, end: g.at(-1)!.end, confidence: 1, channel: 0, transcript, words: deepgramWords(g, punctuate), id: randomUUID() };
  });
}

function bodyMissing(body: unknown): ServiceError {
  if (body !== null && typeof body === 'object' && !Buffer.isBuffer(body) && 'url' in body) {
    return new ServiceError(
      'invalid_request',
      'This gateway does not fetch audio from a URL: send the audio itself as the request body (Content-Type audio/wav, audio/* or application/octet-stream).',
      'url',
    );
  }
  return new ServiceError('invalid_request', 'Send the audio as the request body (Content-Type audio/wav, audio/* or application/octet-stream).', 'file');
}

/** Deepgram's fields (`err_code`, `err_msg`, `request_id`, the `dg-error` header) beside the envelope, on every path of Deepgram's API served here. */
export const DEEPGRAM_ERROR_SHAPE: VendorErrorShape = {
  fields: (error, request, reply) => {
    const fields = deepgramErrorFields(error, request.id);
    // Deepgram names a refused upgrade's cause in `dg-error` (a header carries ASCII only).
    reply.header('dg-error', fields.err_msg.replace(/[^\x20-\x7e]/g, '?'));
    return fields;
  },
  paths: /^\/(v1\/(listen|speak)|v2\/listen)(\/|$)/,
};

/** Error answers of a scope's routes carry Deepgram's fields beside the envelope. */
export function useDeepgramErrorShape(scope: FastifyInstance): void {
  useVendorErrorShape(scope, DEEPGRAM_ERROR_SHAPE);
}

/** Registers both routes; must be called in the scope where @fastify/websocket is (registerSttWebSocketRoutes). */
export async function registerListenRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  app.websocketServer.on('headers', (headers: string[], req: IncomingMessage) => {
    const id = upgradeIds.get(req);
    if (id) headers.push(`dg-request-id: ${id}`);
  });
  // A scope of its own: the error fields, the body parser and the header are for these routes only.
  await app.register(async (listen) => {
    useDeepgramErrorShape(listen);
    // Any body but JSON is the audio (Deepgram reads what it gets; the SDK sends application/octet-stream).
    listen.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: TRANSCRIPTION_BODY_LIMIT }, (_request, body, done) => done(null, body));

    listen.route(sttSessionRoute(ctx, { url: '/v1/listen', plan: (request) => planLive(ctx, request), usageRoute: 'listen.websocket' }));

    listen.post('/v1/listen', { bodyLimit: TRANSCRIPTION_BODY_LIMIT, config: { metered: true } }, async (request, reply) => {
      reply.header('dg-request-id', request.id);
      const q = request.query as Query;
      const p = listenParams(q);
      const model = listenModel(p.modelId, (id) => ctx.registry.resolve(id, 'stt', request.auth));
      request.modelId = model.id;
      const wantUtterances = bool(q, 'utterances', false);
      const rawSplit = one(q, 'utt_split');
      const split = rawSplit === undefined || rawSplit === '' ? DEFAULT_UTT_SPLIT : Number(rawSplit);
      if (!Number.isFinite(split) || split < 0)
        throw new ServiceError('invalid_request', `utt_split must be a number of seconds (got ${JSON.stringify(rawSplit)}).`, 'utt_split');
      if (!Buffer.isBuffer(request.body) || request.body.length === 0) throw bodyMissing(request.body);
      const sha256 = createHash('sha256').update(request.body).digest('hex');
      const audio = decodeBody(request.body, p, model);
      const transcript = await transcribeBilled(ctx, request, reply, model, audio, { language: p.language, keyterms: p.keyterms, usageRoute: 'listen' });
      const text = deepgramTranscript(transcript.text, p.punctuate);
      return {
        metadata: {
          transaction_key: 'deprecated',
          request_id: request.id,
          sha256,
          created: new Date().toISOString(),
          duration: audio.durationSeconds,
          channels: 1,
          models: [model.id],
          model_info: { [model.id]: { name: model.id, version: '', arch: '' } },
        },
        results: {
          channels: [{ alternatives: [{ transcript: text, confidence: text ? 1 : 0, words: deepgramWords(transcript.words, p.punctuate) }] }],
          ...(wantUtterances ? { utterances: utterancesOf(transcript.words, split, p.punctuate) } : {}),
        },
      };
    });
  });
}
