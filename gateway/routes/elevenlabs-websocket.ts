// ElevenLabs' streaming-input sockets over the TTS stream session (gateway/tts/tts-stream-session.ts),
// for ElevenLabs' clients changed only in their base URL and key:
//   GET /v1/text-to-speech/{voice_id}/stream-input         one utterance a socket
//   GET /v1/text-to-speech/{voice_id}/multi-stream-input   several contexts (LiveKit's and pipecat's plugins)
// This file is the adapter: ElevenLabs' messages parsed into the session's commands, its events
// written in ElevenLabs' shapes. References: elevenlabs.io/docs/api-reference/text-to-speech/v-1-
// text-to-speech-voice-id-stream-input and …/v-1-text-to-speech-voice-id-multi-stream-input (read
// 2026-12-05; summarised in /work/shared/protocols.md). @elevenlabs/elevenlabs-js 2.73 has no
// client for these sockets.
//
// - The key is the `xi-api-key` header (or `?api_key=`, as every socket here takes it), read
//   before the upgrade; or, without one, `xi_api_key` in the first message, as ElevenLabs takes
//   it: the socket is upgraded and waits for that message (routes/tts-socket-route.ts); a wrong
//   or missing key is an error message and a 1008 close.
// - `voice_id` is a gateway voice id, `model_id` a registry model (ElevenLabs' own names get the
//   default model, as on the HTTP routes). `output_format` is pcm_<rate>, ulaw_8000 or alaw_8000:
//   sockets send raw audio, so mp3 (ElevenLabs' default) is refused with a 400 before the upgrade.
// - Alignment: no engine here reports character times yet, so every audio message carries
//   `alignment: null` and `normalizedAlignment: null` rather than made-up times.
// - `voice_settings.speed` other than 1 is refused (streamed speech is not time-stretched);
//   stability, similarity_boost and generation_config.chunk_length_schedule are accepted and have
//   no effect: text is cut where it can be spoken (span-speaker.ts). `auto_mode=true` speaks
//   each piece of text as it comes (no buffering delay).
// - `close_context` right after an empty flush (`{"text":"","flush":true}`) ends a context's
//   input: its text is spoken to its end, then its `isFinal` (as ElevenLabs finishes a flushed
//   context); right after text it stops the context at once (an interruption). `close_socket` ends every open context's input, then
//   closes the socket.
// - Errors: `{"message", "error": <code>, "code": <status>}` (with `contextId` on the multi-context
//   socket); on stream-input an error ends the socket (1008, or 1011 for the gateway's own).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import { parseInput, refuseNul } from '../../server/services/parse-input.ts';
import type { GatewayContext } from '../context.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { billedCharacters } from '../tts/synthesize.ts';
import type { TtsRequest } from '../tts/tts-request.ts';
import { TtsStreamSession, ttsSessionLimits, type TtsCommand, type TtsEvent } from '../tts/tts-stream-session.ts';
import { ElevenLabsVoiceParams, elevenLabsModelFor, parseElevenLabsOutputFormat, useElevenLabsErrorShape } from './elevenlabs.ts';
import { registerTtsSocketRoute, type KeyInFirstMessage, type TtsSocketAdmission } from './tts-socket-route.ts';

/** Usage rows of these sockets: per character, as every TTS route. */
const ROUTE = 'elevenlabs.tts.websocket';
/** ElevenLabs' limit of contexts on one multi-context socket. */
const MAX_CONTEXTS = 5;
/** The context of stream-input (one a socket), and of a multi-context message that names none. */
const SINGLE_CONTEXT = '0';
const DEFAULT_CONTEXT = 'default';

const bool = z.enum(['true', 'false']).transform((v) => v === 'true');

export const ElevenLabsSocketQuery = z.looseObject({
  model_id: z.string().min(1).max(200).optional(),
  output_format: z.string().min(1).default('mp3_44100_128'),
  // ElevenLabs: default 20 s, at most 180 s.
  inactivity_timeout: z.coerce.number().int('must be an integer').min(1, 'must be between 1 and 180').max(180, 'must be between 1 and 180').default(20),
  auto_mode: bool.optional(),
  language_code: z
    .string()
    .regex(/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/, 'must be a language tag like en or en-US')
    .optional(),
});

const MessageSchema = z.looseObject({
  text: z
    .string()
    .refine((t) => billedCharacters(t) <= 5000, 'must be at most 5000 characters')
    .optional(),
  flush: z.boolean().nullish(),
  try_trigger_generation: z.boolean().nullish(),
  voice_settings: z.looseObject({ speed: z.number().min(0.7).max(1.2).nullish() }).nullish(),
  generation_config: z.looseObject({ chunk_length_schedule: z.array(z.number().min(5).max(500)).max(16).nullish() }).nullish(),
  pronunciation_dictionary_locators: z
    .array(z.object({ pronunciation_dictionary_id: z.string().min(1), version_id: z.string().nullish() }))
    .max(3)
    .nullish(),
  context_id: z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters').nullish(),
  close_context: z.boolean().nullish(),
  close_socket: z.boolean().nullish(),
});
type Message = z.infer<typeof MessageSchema>;

interface SocketSettings {
  voiceId: string;
  modelId: string;
  output: TtsRequest['output'];
  language: string | undefined;
  /** auto_mode: no buffering delay. */
  delayMs: number | undefined;
  /** inactivity_timeout. */
  idleMs: number;
}

function settingsOf(ctx: GatewayContext, request: FastifyRequest): SocketSettings {
  const { voice_id: voiceId } = parseInput(ElevenLabsVoiceParams, request.params, { body: false });
  const q = parseInput(ElevenLabsSocketQuery, request.query, { body: false });
  const output = parseElevenLabsOutputFormat(q.output_format);
  if (output.container !== 'raw') {
    throw new ServiceError(
      'invalid_output_format',
      `This socket sends raw audio: use output_format pcm_<rate>, ulaw_8000 or alaw_8000 (not '${q.output_format}').`,
      'output_format',
    );
  }
  return {
    voiceId,
    modelId: elevenLabsModelFor(ctx, q.model_id, 'tts'),
    output,
    language: q.language_code,
    delayMs: q.auto_mode ? 0 : undefined,
    idleMs: q.inactivity_timeout * 1000,
  };
}

/** A context's TtsRequest: the socket's settings and the message's own. */
function ttsRequestOf(s: SocketSettings, m: Message): TtsRequest {
  const speed = m.voice_settings?.speed ?? 1;
  if (speed !== 1)
    throw new ServiceError(
      'invalid_request',
      'voice_settings.speed: streamed speech is spoken at speed 1; use the HTTP route to change it.',
      'voice_settings.speed',
    );
  return {
    modelId: s.modelId,
    transcript: '',
    voiceId: s.voiceId,
    language: s.language,
    output: s.output,
    speed: 1,
    volume: 1,
    dictId: m.pronunciation_dictionary_locators?.[0]?.pronunciation_dictionary_id,
    stream: true,
  };
}

type Parsed = { ok: true; message: Message } | { ok: false; command: TtsCommand };

function parseMessage(data: Buffer, isBinary: boolean, multi: boolean): Parsed {
  const invalid = (error: ServiceError, contextId?: string): Parsed => ({ ok: false, command: { type: 'invalid', contextId, error } });
  if (isBinary) return invalid(new ServiceError('invalid_request', 'Send text as JSON text messages; this socket takes no binary frames.'));
  let raw: unknown;
  try {
    raw = JSON.parse(data.toString('utf8'));
  } catch {
    raw = undefined;
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return invalid(new ServiceError('invalid_json', 'Each message must be a JSON object such as {"text": "Hello "} (see the stream-input API reference).'));
  }
  const rawId = (raw as { context_id?: unknown }).context_id;
  const knownId = multi && typeof rawId === 'string' && rawId.length > 0 && rawId.length <= 256 ? rawId : undefined;
  try {
    refuseNul(raw);
  } catch (error) {
    return invalid(error as ServiceError, knownId);
  }
  const parsed = MessageSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = issue.path.join('.') || null;
    return invalid(new ServiceError('invalid_request', `${param ?? 'message'}: ${issue.message}`, param), knownId);
  }
  const m = parsed.data;
  if (m.text === undefined && !m.flush && !m.close_context && !m.close_socket) {
    return invalid(new ServiceError('invalid_request', 'text: required (a piece of text, " " to start, "" to end).', 'text'), knownId);
  }
  return { ok: true, message: m };
}

/** An event in ElevenLabs' shape (`contextId` on the multi-context socket). */
export function elevenLabsEvent(event: TtsEvent, multi: boolean, requestId: string): object {
  const context = multi && event.contextId !== undefined ? { contextId: event.contextId } : {};
  switch (event.type) {
    case 'audio':
      return { audio: event.audio.toString('base64'), isFinal: false, normalizedAlignment: null, alignment: null, ...context };
    case 'done':
      return { isFinal: true, ...context };
    case 'error':
      return { message: event.error.message, error: event.error.code, code: event.error.status, param: event.error.param, request_id: requestId, ...context };
    case 'flushed':
      return {}; // ElevenLabs sends nothing for a flush beyond its audio (filtered out below)
  }
}

/** One socket: its commands to the session, its events out, and its end (after the utterance, or on close_socket). */
function bindSocket(ctx: GatewayContext, socket: WebSocket, request: FastifyRequest, admission: TtsSocketAdmission, multi: boolean): void {
  const settings = request.elevenLabsSocket!;
  /** Contexts not over yet; `ending`: those of them whose input ended (close_context, close_socket), being spoken to their end. */
  const open = new Set<string>();
  const ending = new Set<string>();
  /** Contexts whose last message was an empty flush (the end of their text): a close then lets it finish. */
  const flushedLast = new Set<string>();
  let closingSocket = false;
  const link = new WebSocketLink(socket, ctx.clock, {
    message: (data, isBinary) => {
      for (const command of commands(parseMessage(data, isBinary, multi))) session.receive(command);
    },
    closed: () => session.transportClosed(),
  });
  const wire = link.outbox((event: TtsEvent) => (event.type === 'flushed' ? [] : [elevenLabsEvent(event, multi, request.id)]));
  const ended = (contextId: string | undefined, failed: boolean, status = 400) => {
    if (contextId !== undefined) {
      open.delete(contextId);
      ending.delete(contextId);
      flushedLast.delete(contextId);
    }
    if (!multi) wire.close(failed ? (status >= 500 ? 1011 : 1008) : 1000, failed ? 'error' : 'done');
    else if (closingSocket && open.size === 0) wire.close(1000, 'close_socket');
  };
  const outbox: Outbox<TtsEvent> = {
    send(event, options) {
      wire.send(event, options);
      if (event.type === 'done') ended(event.contextId, false);
      else if (event.type === 'error') ended(event.contextId, true, event.error.status);
    },
    drained: () => wire.drained(),
    close: (code, reason) => wire.close(code, reason),
    get open() {
      return wire.open;
    },
  };
  const generate = (contextId: string, m: Message, last: boolean): TtsCommand => {
    // A context's first text " " (ElevenLabs' beginning of stream) marks its start: not spoken, not billed.
    const opening = !open.has(contextId) && m.text !== undefined && m.text.trim() === '';
    open.add(contextId);
    return {
      type: 'generate',
      contextId,
      input: { transcript: last || opening ? '' : (m.text ?? ''), continue: !last, flush: m.flush === true, maxBufferDelayMs: settings.delayMs },
      settings: () => ttsRequestOf(settings, m),
    };
  };
  /** The end of a context's input: what it was given is spoken to its end, then its isFinal. */
  const end = (id: string): TtsCommand[] => {
    if (ending.has(id)) return [];
    ending.add(id);
    return [generate(id, { text: '' }, true)];
  };
  const commands = (parsed: Parsed): TtsCommand[] => {
    if (!parsed.ok) return [parsed.command];
    const m = parsed.message;
    // stream-input: "" ends the utterance; anything else (" " first) is more text.
    if (!multi) return [generate(SINGLE_CONTEXT, m, m.text === '')];
    if (m.close_socket) {
      // Every open context is spoken to its end; the socket closes after the last.
      closingSocket = true;
      const ends = [...open].flatMap(end);
      if (open.size === 0) wire.close(1000, 'close_socket');
      return ends;
    }
    const id = m.context_id ?? DEFAULT_CONTEXT;
    if (m.close_context) {
      if (!open.has(id)) return [{ type: 'cancel', contextId: id }];
      // Closed right after an empty flush, a context's text is still spoken, then its isFinal
      // (LiveKit's plugin ends every context with {"text": "", "flush": true} and then
      // close_context, and reads its audio until the isFinal). Closed after text, it stops at once
      // (an interruption, as pipecat's): nothing more is made or billed.
      if (flushedLast.has(id)) return end(id);
      open.delete(id);
      wire.send({ type: 'done', contextId: id });
      return [{ type: 'cancel', contextId: id }];
    }
    if (m.text?.trim()) flushedLast.delete(id);
    else if (m.flush === true) flushedLast.add(id);
    return [generate(id, m, false)];
  };
  const session = new TtsStreamSession({
    ctx,
    auth: request.auth,
    requestId: request.id,
    route: ROUTE,
    hold: admission.hold,
    limits: { ...ttsSessionLimits, idleMs: settings.idleMs, maxContexts: multi ? MAX_CONTEXTS : 1 },
    outbox,
    revoked: admission.revoked,
    log: request.log,
  });
}

/** ElevenLabs' other way to give the key: `xi_api_key` in the first (initializing) message. */
function keyInFirstMessage(multi: boolean): KeyInFirstMessage {
  return {
    field: 'xi_api_key',
    read(data, isBinary) {
      if (isBinary) return null;
      let message: unknown;
      try {
        message = JSON.parse(data.toString('utf8'));
      } catch {
        return null;
      }
      if (message === null || typeof message !== 'object' || Array.isArray(message)) return null;
      const { xi_api_key: key, ...rest } = message as Record<string, unknown>;
      if (typeof key !== 'string' || key.trim() === '') return null;
      // The key goes no further than its check.
      return { key: key.trim(), rest: Object.keys(rest).length > 0 ? Buffer.from(JSON.stringify(rest)) : null };
    },
    refuse(socket, error, request) {
      const status = ERROR_TABLE[error.code].status;
      const event = elevenLabsEvent(
        { type: 'error', contextId: undefined, error: { code: error.code, message: error.message, status, param: error.param } },
        multi,
        request.id,
      );
      socket.send(JSON.stringify(event));
      socket.close(status >= 500 ? 1011 : 1008, 'error');
    },
  };
}

export async function registerElevenLabsWebSocketRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  // A scope of its own: refusals before the upgrade carry ElevenLabs' error shape.
  await app.register(async (eleven) => {
    useElevenLabsErrorShape(eleven);
    for (const [path, multi] of [
      ['stream-input', false],
      ['multi-stream-input', true],
    ] as const) {
      registerTtsSocketRoute(eleven, ctx, {
        url: `/v1/text-to-speech/:voice_id/${path}`,
        check: (request) => {
          request.elevenLabsSocket = settingsOf(ctx, request);
        },
        bind: (socket, request, admission) => bindSocket(ctx, socket, request, admission, multi),
        keyInFirstMessage: keyInFirstMessage(multi),
      });
    }
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** An ElevenLabs socket's settings, read from its URL before the upgrade. */
    elevenLabsSocket?: SocketSettings;
  }
}
