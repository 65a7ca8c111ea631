// GET /tts/websocket: streaming speech over a WebSocket, wire-compatible with Cartesia's TTS
// WebSocket. This file is the adapter: Cartesia's messages parsed into commands, the session's
// events written in Cartesia's shapes, the socket bound through the one WebSocket life cycle
// (gateway/sessions/websocket-link.ts: pings, a bounded outgoing buffer). The session itself,
// its contexts and its metering: gateway/tts/tts-stream-session.ts.
//
// Checked before the upgrade is accepted (tts-socket-route.ts), as for /stt/websocket: the key
// (Authorization, X-API-Key or ?api_key=) or an access token with the tts grant (?access_token=,
// what a browser has: POST /access-token), the rate limit and a positive balance, the session
// caps; a refusal is a plain HTTP response carrying the error envelope. The model, voice and format come with each context's first
// message, so they are checked then (an error event), not before the upgrade.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import { refuseNul } from '../../server/services/parse-input.ts';
import { jsonWithBase64 } from '../audio-json.ts';
import type { GatewayContext } from '../context.ts';
import { accessTokenCredential } from '../core/access-token-credential.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { billedCharacters } from '../tts/synthesize.ts';
import { parseTtsRequest, type TtsRequest } from '../tts/tts-request.ts';
import { registerTtsSocketRoute } from './tts-socket-route.ts';
import { TtsStreamSession, ttsSessionLimits, type TtsCommand, type TtsEvent } from '../tts/tts-stream-session.ts';

/** Cartesia's API version (`Cartesia-Version: 2025-04-16`, or `?cartesia_version=`; the query wins): a date. */
const VERSION = /^\d{4}-\d{2}-\d{2}$/;

export function registerTtsWebSocketRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  registerTtsSocketRoute(app, ctx, {
    url: '/tts/websocket',
    credential: accessTokenCredential(ctx, 'tts', true),
    check: (request) => {
      // Every version is served alike; one that is not a date is a client's mistake worth naming.
      const q = request.query as Record<string, unknown>;
      const version = q.cartesia_version ?? request.headers['cartesia-version'];
      if (version !== undefined && (typeof version !== 'string' || !VERSION.test(version))) {
        throw new ServiceError('invalid_request', 'Cartesia-Version (or cartesia_version) must be a date like 2025-04-16.', 'cartesia_version');
      }
    },
    bind: (socket, request, { revoked, hold, arrivedAt }) => {
      const settings = lastSettings();
      const link = new WebSocketLink(socket, ctx.clock, {
        message: (data, isBinary) => session.receive(parseMessage(data, isBinary, settings)),
        closed: () => session.transportClosed(),
      });
      const session = new TtsStreamSession({
        ctx,
        auth: request.auth,
        requestId: request.id,
        hold,
        limits: { ...ttsSessionLimits },
        outbox: link.outbox((event: TtsEvent) => [cartesiaEvent(event, request.id)]),
        revoked,
        log: request.log,
        arrivedAt,
      });
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Cartesia's wire

/** The socket's own fields of a generation request (the rest is a TtsRequest, read at a context's first request). */
interface Control {
  context_id?: string;
  cancel?: boolean;
  continue?: boolean;
  flush?: boolean;
  max_buffer_delay_ms?: number;
  transcript?: string;
}

const FLAGS = ['cancel', 'continue', 'flush', 'add_timestamps', 'add_phoneme_timestamps', 'use_normalized_timestamps'] as const;

/**
 * The control fields of a message, checked by hand: they are read from every message a socket
 * gets, and a schema library's parse was a measurable part of a stream's CPU (docs/performance.md,
 * "TTS sockets"). Absent or null means not given; anything else must have its type and range.
 */
function readControl(msg: Record<string, unknown>): Control {
  const refuse = (param: string, message: string) => new ServiceError('invalid_request', `${param}: ${message}`, param);
  const control: Control = {};
  const id = msg.context_id;
  if (id !== undefined) {
    if (typeof id !== 'string') throw refuse('context_id', 'must be a string');
    if (id.length === 0) throw refuse('context_id', 'must not be empty');
    if (id.length > 256) throw refuse('context_id', 'must be at most 256 characters');
    control.context_id = id;
  }
  for (const name of FLAGS) {
    const flag = msg[name];
    if (flag === undefined || flag === null) continue;
    if (typeof flag !== 'boolean') throw refuse(name, 'must be true or false');
    if (name === 'cancel' || name === 'continue' || name === 'flush') control[name] = flag;
  }
  const delay = msg.max_buffer_delay_ms;
  if (delay !== undefined && delay !== null) {
    if (typeof delay !== 'number' || !Number.isInteger(delay)) throw refuse('max_buffer_delay_ms', 'must be an integer');
    if (delay < 0 || delay > 5000) throw refuse('max_buffer_delay_ms', 'must be between 0 and 5000');
    control.max_buffer_delay_ms = delay;
  }
  const transcript = msg.transcript;
  if (transcript !== undefined) {
    if (typeof transcript !== 'string') throw refuse('transcript', 'must be a string');
    if (billedCharacters(transcript) > 5000) throw refuse('transcript', 'must be at most 5000 characters');
    control.transcript = transcript;
  }
  return control;
}

type SettingsOf = (msg: Record<string, unknown>, transcript: string) => TtsRequest;

const SETTINGS_KEPT_MAX_CHARS = 4096;

/**
 * A context's settings (model, voice, format, language, generation config, dictionary), checked
 * as POST /tts/sse checks them; a socket's contexts nearly always repeat the settings of the one
 * before, which are then taken as they were checked (the transcript is the message's own, checked
 * by readControl). One per socket.
 */
export function lastSettings(): SettingsOf {
  let lastKey: string | undefined;
  let last: TtsRequest | undefined;
  return (msg, transcript) => {
    // JSON.stringify leaves out an absent member but keeps a null one, which the check refuses.
    const key = JSON.stringify({
      model_id: msg.model_id,
      voice: msg.voice,
      language: msg.language,
      output_format: msg.output_format,
      generation_config: msg.generation_config,
      pronunciation_dict_id: msg.pronunciation_dict_id,
      stream: msg.stream,
    });
    if (key === lastKey && last !== undefined) return { ...last, transcript };
    const checked = parseTtsRequest(msg, 'websocket');
    // Settings of a usual size are kept for the next context; a client's outsized ones are not held.
    [lastKey, last] = key.length <= SETTINGS_KEPT_MAX_CHARS ? [key, checked] : [undefined, undefined];
    return { ...checked, transcript };
  };
}

/** One message from the client: a generation request, a cancel, or what is wrong with it. */
export function parseMessage(data: Buffer, isBinary: boolean, settingsOf: SettingsOf = lastSettings()): TtsCommand {
  if (isBinary) {
    const error = new ServiceError('invalid_request', 'Send generation requests as JSON text messages; this socket takes no binary frames.');
    return { type: 'invalid', contextId: undefined, error };
  }
  let msg: unknown;
  try {
    msg = JSON.parse(data.toString('utf8'));
  } catch {
    msg = undefined;
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
    const error = new ServiceError(
      'invalid_json',
      'Each message must be a JSON object: a generation request {"context_id", "transcript", "continue", ...} or {"context_id", "cancel": true}.',
    );
    return { type: 'invalid', contextId: undefined, error };
  }
  const rawId = (msg as { context_id?: unknown }).context_id;
  const knownId = typeof rawId === 'string' && rawId.length > 0 && rawId.length <= 256 ? rawId : undefined;
  let control: Control;
  try {
    refuseNul(msg);
    control = readControl(msg as Record<string, unknown>);
  } catch (error) {
    return { type: 'invalid', contextId: knownId, error };
  }
  if (control.cancel === true) return { type: 'cancel', contextId: control.context_id };
  return {
    type: 'generate',
    contextId: control.context_id,
    input: {
      transcript: control.transcript ?? '',
      continue: control.continue === true,
      flush: control.flush === true,
      maxBufferDelayMs: control.max_buffer_delay_ms ?? undefined,
    },
    settings: () => settingsOf(msg as Record<string, unknown>, control.transcript ?? ''),
  };
}

/**
 * An event as Cartesia sends it (a chunk as JSON text: audio-json.ts); errors carry Cartesia's
 * fields (type, error, title, error_code, status_code, done) and our envelope's (code, message, param).
 */
export function cartesiaEvent(event: TtsEvent, requestId: string): object | string {
  switch (event.type) {
    case 'audio':
      return jsonWithBase64(
        { type: 'chunk', done: false, status_code: 206, step_time: event.stepMs, context_id: event.contextId, flush_id: event.part },
        'data',
        event.audio,
      );
    case 'flushed':
      return { type: 'flush_done', done: false, flush_done: true, flush_id: event.part, status_code: 200, context_id: event.contextId };
    case 'done':
      return { type: 'done', done: true, status_code: 200, context_id: event.contextId };
    case 'error': {
      const e = event.error;
      return {
        type: 'error',
        ...(event.contextId === undefined ? {} : { context_id: event.contextId }),
        status_code: e.status,
        done: true,
        error: e.message,
        title: e.code,
        error_code: e.code,
        code: e.code,
        message: e.message,
        param: e.param,
        request_id: requestId,
      };
    }
  }
}
