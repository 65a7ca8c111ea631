// OpenAI's Responses API over a WebSocket ("WebSocket mode": GET /v1/responses upgraded), the
// session behind the socket; the route (gateway/routes/responses-websocket.ts) binds it to the
// WebSocket. References: developers.openai.com/api/docs/guides/websocket-mode and
// .../api/reference/resources/responses/websocket-events.
//
// Each `{"type":"response.create", ...}` is the body of POST /v1/responses (less `type`; `stream`
// is implied, `background` refused) and goes through the same pipeline (create-response.ts): the
// same checks, the same credit reserved and debited, the same engines; its Responses stream
// events are sent one message each, response.created to response.completed. One response runs
// at a time. The socket keeps its latest response (input and output items, bounded), so a
// `previous_response_id` naming it sends only the new items, `store: false` or not, as OpenAI
// keeps it in memory on the connection; any other id goes to the engine as over HTTP, except
// with `store: false`, where OpenAI answers previous_response_not_found and so does this socket.
// Errors are OpenAI's WebSocket error events: {"type":"error","status":<http status>,"error":
// {"type","code","message","param"}} (with `sequence_number` instead of `status` when the
// response's stream broke).
import type { FastifyBaseLogger } from 'fastify';
import { isServiceError, type ServiceError } from '../../server/services/errors.ts';
import type { EngineCall } from '../client-gone.ts';
import type { GatewayContext } from '../context.ts';
import type { RequestAuth } from '../core/gateway-core.ts';
import { ERROR_TABLE, envelope } from '../errors.ts';
import type { JsonObject } from '../json-body.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { LogRef } from '../request-log/request-log-types.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { SessionLife, type SessionLimits } from '../sessions/session-life.ts';
import { sseDataOf } from '../sse.ts';
import type { ResponseCreator } from './create-response.ts';
import type { LlmRun } from './llm-run.ts';

/** One message on the socket, either way: a JSON object with its `type`. */
export type WireEvent = Record<string, unknown>;

/** Idle: nothing from the client and no response running. OpenAI ends a connection at 60 minutes. */
export const RESPONSES_SOCKET_LIMITS: SessionLimits = { idleMs: 5 * 60_000, maxDurationMs: 60 * 60_000 };

/** The most the socket keeps of its latest response (its input and output items, as JSON) for previous_response_id. */
export const CHAIN_MAX_BYTES = 2 * 1024 * 1024;

/** The events that end a response with the response in them (its output is what the next one may continue). */
const KEPT_ENDINGS = new Set(['response.completed', 'response.incomplete']);
/** The events after which the client may create the next response. */
const ENDINGS = new Set([...KEPT_ENDINGS, 'response.failed', 'error']);

export interface ResponsesSocketSetup {
  ctx: GatewayContext;
  responses: ResponseCreator;
  auth: RequestAuth;
  /** The upgrade's request id: every response's debit and engine attempts are recorded under it. */
  requestId: string;
  log: FastifyBaseLogger;
  outbox: Outbox<WireEvent>;
  /** Aborted (reason: a ServiceError) when the key is revoked. */
  revoked: AbortSignal;
  /** The largest request, its item references expanded (POST /v1/responses' body limit). */
  maxRequestBytes: number;
}

/** An error event in OpenAI's WebSocket shape. */
function errorEvent(status: number, type: string, code: string, message: string, param: string | null = null): WireEvent {
  return { type: 'error', status, error: { type, code, message, param } };
}

const fromServiceError = (e: ServiceError): WireEvent => {
  const { status, body } = envelope(e);
  return { type: 'error', status, error: body.error };
};

/** A Responses stream's own `error` event (flat, with its sequence_number) in the WebSocket shape. */
function streamError(event: WireEvent): WireEvent {
  const code = typeof event.code === 'string' ? event.code : 'upstream_error';
  const type = (ERROR_TABLE as Record<string, { type: string } | undefined>)[code]?.type ?? 'api_error';
  const error = { type, code, message: event.message ?? 'The response failed.', param: event.param ?? null };
  return { type: 'error', ...(typeof event.sequence_number === 'number' ? { sequence_number: event.sequence_number } : {}), error };
}

/** `input` as a list of items: a string is one user message. */
function inputItems(input: unknown): unknown[] | null {
  if (input === undefined || input === null) return [];
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? input : null;
}

interface Chain {
  id: string;
  /** What the engine was sent as input, then what it answered: the next response's prefix. */
  items: unknown[];
}

/**
 * One response's engine call: ended by the socket closing (clientGone), the shutdown's grace
 * deadline (the lifecycle aborts it with the shutdown error) or the key's revocation.
 */
class ResponseEngineCall implements EngineCall {
  private readonly controller = new AbortController();
  private gone = false;
  private readonly release: () => void;

  constructor(
    lifecycle: Lifecycle,
    private readonly revoked: AbortSignal,
    readonly timeoutMs: number,
    readonly ref: LogRef,
  ) {
    this.release = lifecycle.holdEngineCall(this.controller);
    if (revoked.aborted) this.onRevoked();
    else revoked.addEventListener('abort', this.onRevoked, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get clientGone(): boolean {
    return this.gone;
  }

  private readonly onRevoked = (): void => this.controller.abort(this.revoked.reason);

  /** Nobody reads the answer any more: the engine stops, and the stream ends without an error of its own. */
  clientLeft(): void {
    this.gone = true;
    this.controller.abort();
  }

  done(): void {
    this.release();
    this.revoked.removeEventListener('abort', this.onRevoked);
  }
}

export class ResponsesSocketSession {
  private closed = false;
  /** The response running, if one is. */
  private current: ResponseEngineCall | null = null;
  private chain: Chain | null = null;
  private readonly life: SessionLife;

  constructor(private readonly s: ResponsesSocketSetup) {
    const { ctx } = s;
    this.life = new SessionLife(
      ctx.clock,
      RESPONSES_SOCKET_LIMITS,
      { shutdown: ctx.lifecycle.streamsEnded, revoked: s.revoked },
      {
        // A response running is the socket in use, however long the client stays silent.
        idle: () =>
          this.current
            ? this.life.touch()
            : this.close(
                1000,
                'idle_timeout',
                errorEvent(408, 'invalid_request_error', 'idle_timeout', `Nothing was sent on this socket for ${RESPONSES_SOCKET_LIMITS.idleMs / 1000} s.`),
              ),
        maxDuration: () =>
          this.close(
            1000,
            'max_duration',
            errorEvent(
              400,
              'invalid_request_error',
              'websocket_connection_limit_reached',
              `Responses websocket connection limit reached (${RESPONSES_SOCKET_LIMITS.maxDurationMs / 60_000} minutes). Create a new websocket connection to continue.`,
            ),
          ),
        shutdown: (e) => this.close(1001, 'shutdown', fromServiceError(e)),
        revoked: (e) => this.close(1008, e.code, fromServiceError(e)),
      },
    );
  }

  /** One message from the client. */
  receive(data: Buffer, isBinary: boolean): void {
    if (this.closed) return;
    this.life.touch();
    const event = parseClientEvent(data, isBinary);
    if (!('body' in event)) return this.s.outbox.send(event.error);
    if (this.current) {
      // One response at a time (OpenAI's Realtime API answers a second one so, with this code).
      return this.s.outbox.send(
        errorEvent(
          400,
          'invalid_request_error',
          'conversation_already_has_active_response',
          'A response is already in progress on this socket; wait for its response.completed (or error) before creating another.',
        ),
      );
    }
    const { ctx, auth, requestId } = this.s;
    const call = new ResponseEngineCall(ctx.lifecycle, this.s.revoked, ctx.config.upstreamTimeoutMs, { orgId: auth.orgId, requestId });
    this.current = call;
    const running = this.respond(event.body, call).finally(() => {
      call.done();
      this.ended(call);
    });
    // Held by the lifecycle until it is done: a shutdown does not close the database under its debit.
    ctx.lifecycle.track(running);
  }

  /** The transport is gone (whoever closed it): the running response's engine stops; its debit is still written. */
  transportClosed(): void {
    this.closed = true;
    this.life.dispose();
    this.current?.clientLeft();
  }

  /**
   * The response of `call` is over for the client (its ending event is out): the next may start,
   * while this one's debit may still be being written.
   */
  private ended(call: ResponseEngineCall): void {
    if (this.current !== call) return;
    this.current = null;
    this.life.touch();
  }

  private close(code: number, reason: string, error: WireEvent): void {
    if (this.closed) return;
    this.s.outbox.send(error);
    this.closed = true;
    this.life.dispose();
    this.current?.clientLeft();
    this.s.outbox.close(code, reason);
  }

  private async respond(body: JsonObject, engine: ResponseEngineCall): Promise<void> {
    const { ctx, responses, auth, requestId, log, outbox } = this.s;
    const started = performance.now();
    let run: LlmRun | undefined;
    try {
      const previous = body.previous_response_id;
      if (previous !== undefined && previous !== null && previous !== this.chain?.id && body.store === false) {
        // Nothing stored, and not the response this socket holds: OpenAI's answer.
        return this.send(
          engine,
          errorEvent(
            400,
            'invalid_request_error',
            'previous_response_not_found',
            `Previous response with id '${String(previous)}' not found.`,
            'previous_response_id',
          ),
          null,
        );
      }
      const input = this.continueChain(body);
      const raw = Buffer.from(JSON.stringify(body));
      const model = ctx.registry.resolve(body.model, 'llm', auth);
      run = await responses.reserve(ctx, { auth, requestId }, model, raw, body, this.s.maxRequestBytes);
      const firstOutput = () => ctx.metrics.firstOutput('llm_first_token', model.id, (performance.now() - started) / 1000);
      const answer = await responses.create(run, { raw, body, engine, log, firstOutput });
      if (!answer) return;
      if (answer.kind === 'whole') {
        // An engine that answered the stream with the whole Response: its ending event alone.
        const response = JSON.parse(answer.body) as WireEvent;
        const type = response.status === 'incomplete' ? 'response.incomplete' : response.status === 'failed' ? 'response.failed' : 'response.completed';
        return this.send(engine, { type, sequence_number: 0, response }, input);
      }
      // The same stream POST /v1/responses sends as server-sent events, one message per event.
      // Read to its end whatever happens: its end writes the debit.
      for await (const data of sseDataOf(answer.events)) {
        // Past its ending, nothing more of this response goes out (the next one may be running).
        if (data === '[DONE]' || this.current !== engine) continue;
        let event: WireEvent;
        try {
          event = JSON.parse(data) as WireEvent;
        } catch {
          continue; // not an event a Responses client could read
        }
        this.send(engine, event.type === 'error' ? streamError(event) : event, input);
        await outbox.drained();
      }
    } catch (e) {
      if (engine.clientGone || this.closed) return;
      if (this.current !== engine) return; // its ending is out: the error is the log's alone
      if (isServiceError(e)) return this.send(engine, fromServiceError(e), null);
      log.error({ err: e }, 'responses websocket: response failed');
      this.send(
        engine,
        errorEvent(
          500,
          'api_error',
          'internal_error',
          'The server had an error while processing this response. Retry once; if it persists, report the request id.',
        ),
        null,
      );
    } finally {
      // A stream settles its reservation itself, after its debit.
      run?.releaseUnlessStreaming();
    }
  }

  /** Sends one event of the response of `call`; its ending lets the next start, and keeps the response for it to continue. */
  private send(call: ResponseEngineCall, event: WireEvent, input: unknown[] | null): void {
    this.s.outbox.send(event);
    if (!ENDINGS.has(event.type as string)) return;
    this.ended(call);
    const response = event.response as { id?: unknown; output?: unknown } | undefined;
    if (!KEPT_ENDINGS.has(event.type as string) || input === null || typeof response?.id !== 'string' || !Array.isArray(response.output)) return;
    const items = [...input, ...response.output];
    this.chain = Buffer.byteLength(JSON.stringify(items)) <= CHAIN_MAX_BYTES ? { id: response.id, items } : null;
  }

  /**
   * A previous_response_id naming the socket's latest response: its items put before the new
   * input (and the id taken out, as the engine need not know it). Returns what the engine is sent
   * as input (null when `input` is not a list the socket can keep).
   */
  private continueChain(body: JsonObject): unknown[] | null {
    const previous = body.previous_response_id;
    const input = inputItems(body.input);
    if (previous === undefined || previous === null) return input;
    if (this.chain && previous === this.chain.id && input) {
      body.input = [...this.chain.items, ...input];
      delete body.previous_response_id;
      return body.input as unknown[];
    }
    return null; // the engine's to find, as over HTTP; not kept (its prefix is the engine's)
  }
}

type Parsed = { body: JsonObject } | { error: WireEvent };

/** A client message as the body of a response, or the error event it gets. */
function parseClientEvent(data: Buffer, isBinary: boolean): Parsed {
  const invalid = (code: string, message: string, param: string | null = null): Parsed => ({
    error: errorEvent(400, 'invalid_request_error', code, message, param),
  });
  if (isBinary) return invalid('invalid_request', 'Send each event as a JSON text message; this socket takes no binary frames.');
  let event: unknown;
  try {
    event = JSON.parse(data.toString('utf8'));
  } catch {
    return invalid('invalid_json', 'Each message must be a JSON object such as {"type": "response.create", "model": "…", "input": "…"}.');
  }
  if (event === null || typeof event !== 'object' || Array.isArray(event)) {
    return invalid('invalid_json', 'Each message must be a JSON object such as {"type": "response.create", "model": "…", "input": "…"}.');
  }
  const { type, ...body } = event as JsonObject;
  if (type !== 'response.create') {
    return invalid('invalid_request', `Unknown event type ${JSON.stringify(type)}: this socket takes response.create.`, 'type');
  }
  if (body.background === true) return invalid('invalid_request', 'background is not supported over a WebSocket: responses stream on it.', 'background');
  // Streamed, whatever the client said (OpenAI: `stream` is implicit): events are what the socket carries.
  body.stream = true;
  return { body };
}
