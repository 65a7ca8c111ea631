// ElevenLabs' HTTP API over the registry's models, for ElevenLabs' clients changed only in their
// base URL and key (`xi-api-key`, read with the other key headers in gateway/core/gateway-core.ts):
//   POST /v1/text-to-speech/{voice_id}[/stream][/with-timestamps]   speech, on /tts/bytes' pipeline
//   GET  /v1/voices, GET /v2/voices                                  the org's voices, ElevenLabs' shapes
//   POST /v1/speech-to-text                                          batch transcription
// The voice id is a gateway voice id; `model_id` a registry model id. ElevenLabs' own model names
// (`eleven_…`, `scribe_…`: the clients' defaults) and no model at all get the default model
// (realtime/profiles.ts defaultModel: the shipped engine, else the registry's first). Errors are
// ElevenLabs' `{"detail": {"status", "message"}}` beside the gateway's own envelope.
// References: elevenlabs.io/docs/api-reference/text-to-speech/convert, …/stream,
// …/convert-with-timestamps, …/stream-with-timestamps, …/voices/search (v2), …/voices/get-all (v1),
// …/speech-to-text/convert; @elevenlabs/elevenlabs-js (api/resources/*, serialization/types/*).
import { useVendorErrorShape, type VendorErrorShape } from '../vendor-error-shape.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import { listVoices } from '../../server/services/voices/list-voices.ts';
import type { VoiceRecord } from '../../server/services/voices/present-voice.ts';
import { visibleVoiceWhere } from '../../server/services/voices/resolve-voice-profile.ts';
import type { OutputFormat } from '../audio/output-format.ts';
import { setSpendHeaders } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { sendStream } from '../metrics/metrics-http.ts';
import { acceptMultipart, readUpload } from '../multipart-upload.ts';
import { defaultModel } from '../realtime/profiles.ts';
import { decodeUploadedAudio } from '../stt/decode-upload.ts';
import { transcribeBilled } from '../stt/transcribe-billed.ts';
import { chargeSynthesis, startSynthesis } from '../tts/synthesize.ts';
import type { TtsRequest } from '../tts/tts-request.ts';
import { TRANSCRIPTION_BODY_LIMIT } from './transcriptions.ts';
import { progressiveBytes, sendAudio, wholeAudio } from './tts.ts';

/** Usage rows of these routes: billed as /tts/bytes is, per character. */
const TTS_ROUTE = 'elevenlabs.tts';
const DEFAULT_OUTPUT_FORMAT = 'mp3_44100_128';

/** ElevenLabs' model names, which a client sends by default: the default model here unless the registry has one so named. */
const isElevenLabsModelName = (model: string) => /^(eleven_|scribe_)/.test(model);

export function elevenLabsModelFor(ctx: GatewayContext, asked: string | undefined, modality: 'tts' | 'stt'): string {
  if (asked && !(isElevenLabsModelName(asked) && !ctx.registry.all().some((m) => m.id === asked))) return asked;
  return defaultModel(ctx.registry, modality);
}

/**
 * ElevenLabs' `output_format`: `mp3_<rate>_<kbps>`, `pcm_<rate>` (16-bit little-endian, no header),
 * `ulaw_8000`, `alaw_8000`. Opus and rates or bit rates the converter does not make are 400.
 */
export function parseElevenLabsOutputFormat(value: string): OutputFormat {
  const m = /^(mp3|pcm|ulaw|alaw)_(\d+)(?:_(\d+))?$/.exec(value);
  const rate = Number(m?.[2]);
  const rates = [8000, 16000, 22050, 24000, 44100, 48000];
  const mp3Kbps = [32, 64, 96, 128, 192];
  if (m && rates.includes(rate)) {
    const [, codec, , kbps] = m;
    const sampleRate = rate as OutputFormat['sampleRate'];
    if (codec === 'mp3' && kbps && mp3Kbps.includes(Number(kbps))) return { container: 'mp3', sampleRate, bitRate: Number(kbps) * 1000 };
    if (codec === 'pcm' && !kbps) return { container: 'raw', sampleRate, encoding: 'pcm_s16le' };
    if ((codec === 'ulaw' || codec === 'alaw') && !kbps && rate === 8000)
      return { container: 'raw', sampleRate, encoding: codec === 'ulaw' ? 'pcm_mulaw' : 'pcm_alaw' };
  }
  throw new ServiceError(
    'invalid_output_format',
    `output_format '${value}' is not supported; use mp3_<rate>_<kbps> (kbps ${mp3Kbps.join(', ')}), pcm_<rate> (rates ${rates.join(', ')}), ulaw_8000 or alaw_8000.`,
    'output_format',
  );
}

/**
 * ElevenLabs answers raw PCM as audio/pcm (clients check for audio/*: LiveKit's ElevenLabs plugin
 * refuses anything else as "non-audio data"); G.711 as its usual types.
 */
function contentTypeOf(output: OutputFormat): string {
  if (output.container === 'mp3') return 'audio/mpeg';
  return output.encoding === 'pcm_mulaw' ? 'audio/basic' : output.encoding === 'pcm_alaw' ? 'audio/x-alaw-basic' : 'audio/pcm';
}

export const ElevenLabsTtsBody = z.looseObject({
  text: z
    .string()
    .min(1, 'must not be empty')
    .refine((s) => [...s].length <= 5000, 'must be at most 5000 characters'),
  model_id: z.string().min(1).nullish(),
  language_code: z
    .string()
    .regex(/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/, 'must be a language tag like en or en-US')
    .nullish(),
  voice_settings: z.looseObject({ speed: z.number().min(0.7).max(1.2).nullish() }).nullish(),
  // The first locator's dictionary (a gateway dictionary id); its version is not pinned here.
  pronunciation_dictionary_locators: z
    .array(z.object({ pronunciation_dictionary_id: z.string().min(1), version_id: z.string().nullish() }))
    .max(3)
    .nullish(),
});

export const ElevenLabsTtsQuery = z.looseObject({
  output_format: z.string().min(1).default(DEFAULT_OUTPUT_FORMAT).meta({ description: 'mp3_<rate>_<kbps>, pcm_<rate>, ulaw_8000 or alaw_8000 (docs/tts.md).' }),
});
export const ElevenLabsVoiceParams = z.object({ voice_id: z.string().min(1).max(200) });

function ttsRequestOf(ctx: GatewayContext, request: FastifyRequest, streaming: boolean): TtsRequest {
  const { voice_id: voiceId } = parseInput(ElevenLabsVoiceParams, request.params, { body: false });
  const { output_format } = parseInput(ElevenLabsTtsQuery, request.query, { body: false });
  const body = parseInput(ElevenLabsTtsBody, request.body);
  const output = parseElevenLabsOutputFormat(output_format);
  const speed = body.voice_settings?.speed ?? 1;
  return {
    modelId: elevenLabsModelFor(ctx, body.model_id ?? undefined, 'tts'),
    transcript: body.text,
    voiceId,
    language: body.language_code ?? undefined,
    output,
    speed,
    volume: 1,
    dictId: body.pronunciation_dictionary_locators?.[0]?.pronunciation_dictionary_id,
    // Streams relay raw audio as it is made; mp3 (and a changed speed) is made whole first.
    stream: streaming && output.container === 'raw' && speed === 1,
  };
}

/**
 * The with-timestamps answers' alignment: character times derived from the engine's word times.
 * No engine behind the TTS pipeline reports word times yet (docs/tts.md), so it is null rather
 * than made up, as ElevenLabs' schema allows.
 */
const NO_ALIGNMENT = { alignment: null, normalized_alignment: null };

/** ElevenLabs' `{"detail": {"status", "message"}}` beside the envelope, on every path of ElevenLabs' API served here. */
export const ELEVENLABS_ERROR_SHAPE: VendorErrorShape = {
  fields: ({ code, message }) => ({ detail: { status: code, message } }),
  paths: /^\/(v1\/(text-to-speech|speech-to-text|voices)|v2\/voices)(\/|$)/,
};

/** Error answers of a scope's routes carry ElevenLabs' `{"detail": {"status", "message"}}` beside the envelope. */
export function useElevenLabsErrorShape(scope: FastifyInstance): void {
  useVendorErrorShape(scope, ELEVENLABS_ERROR_SHAPE);
}

export async function registerElevenLabsRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const { prisma } = ctx.db;
  // A scope of its own: ElevenLabs' error shape is for these routes only.
  await app.register(async (eleven) => {
    await acceptMultipart(eleven, TRANSCRIPTION_BODY_LIMIT);
    useElevenLabsErrorShape(eleven);

    const metered = { config: { metered: true } };
    const speak = (streaming: boolean) => async (request: FastifyRequest, reply: FastifyReply) => {
      const tts = ttsRequestOf(ctx, request, streaming);
      const s = await startSynthesis(ctx, request, reply, tts, TTS_ROUTE);
      return sendAudio(ctx, reply, s, tts, () => chargeSynthesis(ctx, request, s, tts, TTS_ROUTE), contentTypeOf(tts.output));
    };
    eleven.post('/v1/text-to-speech/:voice_id', metered, speak(false));
    eleven.post('/v1/text-to-speech/:voice_id/stream', metered, speak(true));

    eleven.post('/v1/text-to-speech/:voice_id/with-timestamps', metered, async (request, reply) => {
      const tts = ttsRequestOf(ctx, request, false);
      const s = await startSynthesis(ctx, request, reply, tts, TTS_ROUTE);
      const audio = await wholeAudio(s, tts);
      const c = await chargeSynthesis(ctx, request, s, tts, TTS_ROUTE);
      setSpendHeaders(reply, c.costMicros, c.remainingMicros);
      return { audio_base64: audio.toString('base64'), ...NO_ALIGNMENT };
    });

    // Newline-delimited JSON chunks, as ElevenLabs streams them.
    eleven.post('/v1/text-to-speech/:voice_id/stream/with-timestamps', metered, async (request, reply) => {
      const tts = ttsRequestOf(ctx, request, true);
      const s = await startSynthesis(ctx, request, reply, tts, TTS_ROUTE);
      const c = await chargeSynthesis(ctx, request, s, tts, TTS_ROUTE);
      setSpendHeaders(reply, c.costMicros, c.remainingMicros);
      reply.code(200).header('content-type', 'application/json');
      async function* chunks() {
        if (!tts.stream) {
          yield `${JSON.stringify({ audio_base64: (await wholeAudio(s, tts)).toString('base64'), ...NO_ALIGNMENT })}\n`;
          return;
        }
        for await (const bytes of progressiveBytes(s, tts.output, tts.volume))
          yield `${JSON.stringify({ audio_base64: bytes.toString('base64'), ...NO_ALIGNMENT })}\n`;
      }
      return sendStream(reply, ctx.metrics, chunks());
    });

    eleven.get('/v1/voices', metered, async (request) => {
      const voices: ReturnType<typeof elevenLabsVoice>[] = [];
      let cursor: string | undefined;
      // Every voice the org sees, in pages; bounded as ElevenLabs' v1 list is by an account's voices.
      do {
        const page = await listVoices(prisma, request.auth.orgId, {
          scope: 'all',
          limit: 200,
          cursor,
          gender: undefined,
          language: undefined,
          tag: undefined,
          q: undefined,
        });
        voices.push(...page.voices.map(elevenLabsVoice));
        cursor = page.next_cursor ?? undefined;
      } while (cursor && voices.length < V1_MAX_VOICES);
      return { voices };
    });

    eleven.get('/v2/voices', metered, async (request) => {
      const q = parseInput(ElevenLabsV2VoicesQuery, request.query, { body: false });
      const search = q.search || undefined;
      const [page, total] = await Promise.all([
        listVoices(prisma, request.auth.orgId, {
          scope: q.voice_type === 'personal' ? 'mine' : 'all',
          limit: q.page_size,
          cursor: q.next_page_token,
          q: search,
          gender: undefined,
          language: undefined,
          tag: undefined,
        }),
        prisma.voice.count({
          where: {
            AND: [
              visibleVoiceWhere(request.auth.orgId),
              ...(q.voice_type === 'personal' ? [{ orgId: request.auth.orgId }] : []),
              ...(search
                ? search
                    .toLowerCase()
                    .split(/\s+/)
                    .filter(Boolean)
                    .slice(0, 8)
                    .map((w) => ({ searchText: { contains: w } }))
                : []),
            ],
          },
        }),
      ]);
      return { voices: page.voices.map(elevenLabsVoice), has_more: page.next_cursor !== null, total_count: total, next_page_token: page.next_cursor };
    });

    eleven.post('/v1/speech-to-text', { ...metered, bodyLimit: TRANSCRIPTION_BODY_LIMIT + 1024 * 1024 }, async (request, reply) => {
      if (!request.isMultipart()) throw new ServiceError('unsupported_media_type', 'Send the audio as multipart/form-data with a file field.');
      const upload = await readUpload(request, {
        fileField: 'file',
        sizeLabel: '25 MB',
        fieldNames: 'file, model_id, language_code, timestamps_granularity, tag_audio_events, diarize, num_speakers, file_format and keyterms',
      });
      const fields = upload.fields;
      if (fields.cloud_storage_url)
        throw new ServiceError('invalid_request', 'This gateway does not fetch audio from a URL: send it in the field file.', 'cloud_storage_url');
      if (!upload.file) throw new ServiceError('invalid_request', "Missing the audio: send it in the multipart field 'file'.", 'file');
      const model = ctx.registry.resolve(elevenLabsModelFor(ctx, fields.model_id || undefined, 'stt'), 'stt', request.auth);
      request.modelId = model.id;
      // `file_format: pcm_s16le_16` is 16 kHz 16-bit raw; anything else is a file whose header says its format.
      const audio = decodeUploadedAudio(upload.file, fields.file_format === 'pcm_s16le_16' ? 16000 : undefined, model.sampleRates);
      upload.file = undefined;
      const language = fields.language_code || undefined;
      const transcript = await transcribeBilled(ctx, request, reply, model, audio, {
        language,
        keyterms: (upload.values.keyterms ?? []).slice(0, 100),
        usageRoute: 'elevenlabs.stt',
      });
      const withWords = fields.timestamps_granularity !== 'none';
      const words: { text: string; start: number; end: number; type: 'word' | 'spacing'; logprob: number }[] = [];
      if (withWords) {
        transcript.words.forEach((w, i) => {
          const previous = transcript.words[i - 1];
          if (previous) words.push({ text: ' ', start: previous.end, end: w.start, type: 'spacing', logprob: 0 });
          words.push({ text: w.word, start: w.start, end: w.end, type: 'word', logprob: 0 });
        });
      }
      // The engines here do not detect the language: the caller's, with certainty 1, else "" and 0.
      return { language_code: language ?? '', language_probability: language ? 1 : 0, text: transcript.text, words };
    });
  });
}

/** More voices than an org has in practice: /v1/voices has no pages. */
const V1_MAX_VOICES = 1000;

export const ElevenLabsV2VoicesQuery = z.looseObject({
  page_size: z.coerce.number().int().min(1).max(100).default(10),
  next_page_token: z.string().min(1).max(200).optional(),
  search: z.string().trim().max(200).optional(),
  voice_type: z.string().optional(),
});

const CATEGORY: Record<string, string> = { library: 'premade', instant_clone: 'cloned', pro_clone: 'professional', localized: 'generated' };

/** A voice in ElevenLabs' shape (its required fields, and the labels clients show). */
function elevenLabsVoice(v: VoiceRecord) {
  return {
    voice_id: v.id,
    name: v.name,
    category: CATEGORY[v.kind] ?? 'premade',
    description: v.description,
    labels: { ...(v.gender ? { gender: v.gender } : {}), language: v.language },
    preview_url: null,
    available_for_tiers: [],
    high_quality_base_model_ids: v.profiles.filter((p) => p.status === 'ready').map((p) => p.model_id),
    verified_languages: [],
    is_owner: v.is_owner,
    created_at_unix: Math.floor(new Date(v.created_at).getTime() / 1000),
  };
}
