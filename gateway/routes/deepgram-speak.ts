// Deepgram's text-to-speech (Aura), for Deepgram's clients changed only in their base URL:
//   POST /v1/speak?model=&encoding=&sample_rate=&container=&bit_rate=&speed=   {"text"} → audio
//   GET  /v1/speak (WebSocket)?model=&encoding=&sample_rate=   Speak / Flush / Clear / Close
// References: developers.deepgram.com/reference/text-to-speech/speak-request and
// …/speak-streaming (read 2026-12-05; summarised in /work/shared/protocols.md), and the message
// types of @deepgram/sdk 5.x `speak.v1`. The socket is an adapter over the TTS stream session
// (gateway/tts/tts-stream-session.ts), set up as every TTS socket is (tts-socket-route.ts).
//
// `model` names what speaks (Deepgram's names carry the voice, `aura-2-thalia-en`; ours are a
// model and a voice): a registry tts model id → that model with its default voice; a voice id →
// the default model (realtime/profiles.ts defaultModel) with that voice; `<model id>:<voice id>`
// → both; Deepgram's own names (`aura-…`) and no model → the default model and its default voice.
// Errors: on HTTP, the gateway's envelope with Deepgram's `err_code`, `err_msg`, `request_id`;
// on the socket, `{"type": "Warning", "description", "code"}` (the socket stays open).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import { defaultVoiceFor } from '../../server/services/voices/default-voice.ts';
import type { Encoding, OutputFormat, SampleRate } from '../audio/output-format.ts';
import { SAMPLE_RATES } from '../audio/output-format.ts';
import type { GatewayContext } from '../context.ts';
import { defaultModel } from '../realtime/profiles.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { deepgramErrorFields } from '../stt/dialects/deepgram.ts';
import { billedCharacters, chargeSynthesis, startSynthesis } from '../tts/synthesize.ts';
import type { TtsRequest } from '../tts/tts-request.ts';
import { TtsStreamSession, ttsSessionLimits, type TtsCommand, type TtsEvent } from '../tts/tts-stream-session.ts';
import { useDeepgramErrorShape } from './listen.ts';
import { registerTtsSocketRoute, type TtsSocketAdmission } from './tts-socket-route.ts';
import { sendAudio } from './tts.ts';

const HTTP_ROUTE = 'deepgram.speak';
const SOCKET_ROUTE = 'deepgram.speak.websocket';
/** Deepgram's limit of one request's text (and of one Speak message's). */
const MAX_TEXT = 2000;
const ENCODINGS: Record<string, Encoding> = { linear16: 'pcm_s16le', mulaw: 'pcm_mulaw', alaw: 'pcm_alaw' };
/** Deepgram's mp3: 22050 Hz; its 48 kbps default is made at the nearest rate above that the encoder makes. */
const MP3 = { sampleRate: 22050, bitRates: [32000, 64000], defaultBitRate: 64000 } as const;

const rate = z.coerce
  .number()
  .refine((v): v is SampleRate => (SAMPLE_RATES as readonly number[]).includes(v), `must be one of ${SAMPLE_RATES.join(', ')}`)
  .optional();

export const SpeakQuery = z.looseObject({
  model: z.string().min(1).max(200).optional(),
  encoding: z.enum(['linear16', 'mulaw', 'alaw', 'mp3']).optional(),
  sample_rate: rate,
  container: z.enum(['none', 'wav']).optional(),
  bit_rate: z.coerce.number().int().optional(),
  speed: z.coerce.number().min(0.7, 'must be between 0.7 and 1.5').max(1.5, 'must be between 0.7 and 1.5').optional(),
});
type SpeakQuery = z.infer<typeof SpeakQuery>;

export const SpeakBody = z.looseObject({
  text: z
    .string()
    .min(1, 'must not be empty')
    .refine((t) => billedCharacters(t) <= MAX_TEXT, `must be at most ${MAX_TEXT} characters`),
});

/** The output format Deepgram's parameters ask for. REST's default is mp3; the socket's linear16 at 24 kHz, raw. */
function outputOf(q: SpeakQuery, socket: boolean): OutputFormat {
  const encoding = q.encoding ?? (socket ? 'linear16' : 'mp3');
  if (encoding === 'mp3') {
    if (socket) throw new ServiceError('invalid_output_format', 'The socket sends linear16, mulaw or alaw; mp3 is for POST /v1/speak.', 'encoding');
    if (q.container !== undefined) throw new ServiceError('invalid_output_format', 'container applies to linear16, mulaw and alaw, not mp3.', 'container');
    const bitRate = q.bit_rate ?? MP3.defaultBitRate;
    if (!(MP3.bitRates as readonly number[]).includes(bitRate))
      throw new ServiceError('invalid_output_format', `bit_rate for mp3 must be one of ${MP3.bitRates.join(', ')}.`, 'bit_rate');
    if (q.sample_rate !== undefined && q.sample_rate !== MP3.sampleRate)
      throw new ServiceError('invalid_output_format', `mp3 is made at ${MP3.sampleRate} Hz only.`, 'sample_rate');
    return { container: 'mp3', sampleRate: MP3.sampleRate, bitRate };
  }
  if (q.bit_rate !== undefined) throw new ServiceError('invalid_output_format', 'bit_rate applies to mp3 only.', 'bit_rate');
  const sampleRate = q.sample_rate ?? (encoding === 'linear16' ? 24000 : 8000);
  if (socket && q.container === 'wav') throw new ServiceError('invalid_output_format', 'The socket sends raw audio: container none.', 'container');
  // REST answers a WAV file unless container=none (Deepgram's default for these encodings).
  return { container: socket || q.container === 'none' ? 'raw' : 'wav', sampleRate, encoding: ENCODINGS[encoding]! };
}

/** The gateway model and voice a Deepgram `model` names (see the head of this file). */
async function speakerOf(ctx: GatewayContext, asked: string | undefined): Promise<{ modelId: string; voiceId: string }> {
  const tts = ctx.registry.all().filter((m) => m.modality === 'tts');
  const [first, second] = asked?.split(':') ?? [];
  let modelId: string;
  let voiceId: string | undefined;
  if (second !== undefined) [modelId, voiceId] = [first!, second];
  else if (asked && tts.some((m) => m.id === asked)) modelId = asked;
  else if (asked && !asked.startsWith('aura')) [modelId, voiceId] = [defaultModel(ctx.registry, 'tts'), asked];
  else modelId = defaultModel(ctx.registry, 'tts');
  voiceId ??= (await defaultVoiceFor(ctx.db.prisma, modelId)) ?? undefined;
  if (!voiceId) {
    throw new ServiceError('voice_not_found', `Model '${modelId}' has no voice of its own to speak with: name one as model=${modelId}:<voice id>.`, 'model');
  }
  return { modelId, voiceId };
}

export async function registerDeepgramSpeakRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  // A scope of its own: Deepgram's error fields are for these routes only.
  await app.register(async (speak) => {
    useDeepgramErrorShape(speak);

    speak.post('/v1/speak', { config: { metered: true } }, async (request, reply) => {
      reply.header('dg-request-id', request.id);
      const q = parseInput(SpeakQuery, request.query, { body: false });
      const { text } = parseInput(SpeakBody, request.body);
      const output = outputOf(q, false);
      const { modelId, voiceId } = await speakerOf(ctx, q.model);
      const speed = q.speed ?? 1;
      const tts: TtsRequest = {
        modelId,
        transcript: text,
        voiceId,
        language: undefined,
        output,
        speed,
        volume: 1,
        dictId: undefined,
        // Raw audio streams as it is made; a file (its header says its length) and mp3 are made whole.
        stream: output.container === 'raw' && speed === 1,
      };
      const s = await startSynthesis(ctx, request, reply, tts, HTTP_ROUTE);
      reply.header('dg-model-name', q.model ?? modelId).header('dg-char-count', String(billedCharacters(text)));
      return sendAudio(ctx, reply, s, tts, () => chargeSynthesis(ctx, request, s, tts, HTTP_ROUTE), contentTypeOf(output));
    });

    registerTtsSocketRoute(speak, ctx, {
      url: '/v1/speak',
      check: async (request) => {
        const q = parseInput(SpeakQuery, request.query, { body: false });
        if (q.speed !== undefined && q.speed !== 1)
          throw new ServiceError('invalid_request', 'speed: streamed speech is spoken at speed 1; use POST /v1/speak to change it.', 'speed');
        const output = outputOf(q, true);
        request.deepgramSpeak = { ...(await speakerOf(ctx, q.model)), output, modelName: q.model };
      },
      bind: (socket, request, admission) => bindSpeakSocket(ctx, socket, request, admission),
    });
  });
}

function contentTypeOf(output: OutputFormat): string {
  if (output.container === 'mp3') return 'audio/mpeg';
  if (output.container === 'wav') return 'audio/wav';
  return 'application/octet-stream';
}

interface SpeakSettings {
  modelId: string;
  voiceId: string;
  output: OutputFormat;
  /** The `model` as the client asked (Metadata's model_name). */
  modelName: string | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A /v1/speak socket's model, voice and format, read from its URL before the upgrade. */
    deepgramSpeak?: SpeakSettings;
  }
}

// ---------------------------------------------------------------------------------------------
// The socket

const ClientMessage = z.discriminatedUnion('type', [
  z.looseObject({
    type: z.literal('Speak'),
    text: z.string().refine((t) => billedCharacters(t) <= MAX_TEXT, `must be at most ${MAX_TEXT} characters`),
  }),
  z.looseObject({ type: z.literal('Flush') }),
  z.looseObject({ type: z.literal('Clear') }),
  z.looseObject({ type: z.literal('Close') }),
]);
type ClientMessage = z.infer<typeof ClientMessage>;

function parseClientMessage(data: Buffer, isBinary: boolean): ClientMessage | ServiceError {
  const expected = 'Messages are JSON text: {"type":"Speak","text":"…"}, {"type":"Flush"}, {"type":"Clear"} or {"type":"Close"}.';
  if (isBinary) return new ServiceError('invalid_request', `This socket takes no binary frames. ${expected}`);
  let raw: unknown;
  try {
    raw = JSON.parse(data.toString('utf8'));
  } catch {
    return new ServiceError('invalid_json', expected);
  }
  const parsed = ClientMessage.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = issue.path.join('.') || null;
  return new ServiceError('invalid_request', issue.code === 'invalid_union' || param === 'type' ? expected : `${param}: ${issue.message}`, param);
}

/**
 * One utterance at a time: Speak adds text to it, Flush speaks what waits (Flushed once its audio
 * is sent, sequence_id counting from 0), Clear drops it (Cleared; the next Speak starts another),
 * Close speaks what is left and closes.
 */
function bindSpeakSocket(ctx: GatewayContext, socket: WebSocket, request: FastifyRequest, admission: TtsSocketAdmission): void {
  const settings = request.deepgramSpeak!;
  let utterance = 0;
  let open = false;
  let closing = false;
  let flushes = 0;
  const id = () => `u${utterance}`;
  const link = new WebSocketLink(socket, ctx.clock, {
    message: (data, isBinary) => {
      const command = commandOf(parseClientMessage(data, isBinary));
      if (command) session.receive(command);
    },
    closed: () => session.transportClosed(),
  });
  const json = (message: object) => link.send(JSON.stringify(message));
  const warn = (e: { code: string; message: string }) => {
    const { err_code } = deepgramErrorFields(e, request.id);
    json({ type: 'Warning', description: e.message, code: err_code });
  };
  const outbox: Outbox<TtsEvent> = {
    send(event) {
      if (event.type === 'audio') link.send(event.audio);
      else if (event.type === 'flushed') json({ type: 'Flushed', sequence_id: flushes++ });
      else {
        if (event.type === 'error') warn(event.error);
        // The utterance is over (spoken, or failed): the next Speak starts another.
        if (event.contextId === id()) {
          open = false;
          utterance++;
        }
        if (closing) link.close(1000, 'close');
      }
    },
    drained: () => link.drained(),
    close: (code, reason) => link.close(code, reason),
    get open() {
      return link.open;
    },
  };
  const generate = (transcript: string, flush: boolean, last: boolean): TtsCommand => {
    open = true;
    return {
      type: 'generate',
      contextId: id(),
      input: { transcript, continue: !last, flush, maxBufferDelayMs: undefined },
      settings: () => ({ ...settings, transcript: '', language: undefined, speed: 1, volume: 1, dictId: undefined, stream: true }),
    };
  };
  const commandOf = (m: ClientMessage | ServiceError): TtsCommand | undefined => {
    if (m instanceof ServiceError) {
      warn(m);
      return undefined;
    }
    switch (m.type) {
      case 'Speak':
        return generate(m.text, false, false);
      case 'Flush':
        return generate('', true, false);
      case 'Clear': {
        const cancel: TtsCommand | undefined = open ? { type: 'cancel', contextId: id() } : undefined;
        if (open) utterance++;
        open = false;
        json({ type: 'Cleared', sequence_id: flushes });
        return cancel;
      }
      case 'Close':
        closing = true;
        if (!open) {
          link.close(1000, 'close');
          return undefined;
        }
        return generate('', false, true);
    }
  };
  const session = new TtsStreamSession({
    ctx,
    auth: request.auth,
    requestId: request.id,
    route: SOCKET_ROUTE,
    hold: admission.hold,
    limits: { ...ttsSessionLimits, maxContexts: 2 },
    outbox,
    revoked: admission.revoked,
    log: request.log,
  });
  json({ type: 'Metadata', request_id: request.id, model_name: settings.modelName ?? settings.modelId, model_version: '', model_uuid: settings.modelId });
}
