// Each request's logger (`request.log`), made into a pino child only when something logs
// through it. Fastify's default makes a child per request, with a new formatters object and
// its bindings serialised, though most requests log nothing but their access line, which
// AccessLog (app.ts) writes through the parent with the request id: the same line, without
// the child.
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyChildLoggerFactory } from 'fastify/types/logger.js';
import { symbols, type Bindings, type ChildLoggerOptions, type LevelWithSilentOrString, type Logger } from 'pino';
import { redactUrl } from './redact-url.ts';

type AnyLog = (...args: unknown[]) => void;

/** The pino internals an access line is put together from (pino's `symbols`). */
interface PinoInternals {
  [symbols.streamSym]?: { write(line: string): void };
  [symbols.lsCacheSym]: Record<number, string>;
  [symbols.timeSym]: () => string;
  [symbols.chindingsSym]: string;
}

export class LazyRequestLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    /** The logger the child is made from; AccessLog writes through it directly. */
    readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get made(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  get level(): LevelWithSilentOrString {
    return this.#child?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: LevelWithSilentOrString) {
    this.made.level = level;
  }

  fatal(...args: unknown[]): void {
    (this.made.fatal as AnyLog)(...args);
  }
  error(...args: unknown[]): void {
    (this.made.error as AnyLog)(...args);
  }
  warn(...args: unknown[]): void {
    (this.made.warn as AnyLog)(...args);
  }
  info(...args: unknown[]): void {
    (this.made.info as AnyLog)(...args);
  }
  debug(...args: unknown[]): void {
    (this.made.debug as AnyLog)(...args);
  }
  trace(...args: unknown[]): void {
    (this.made.trace as AnyLog)(...args);
  }
  silent(...args: unknown[]): void {
    (this.made.silent as AnyLog)(...args);
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.made.child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory`: a LazyRequestLogger per request. */
export const lazyRequestLoggers: FastifyChildLoggerFactory = (logger, bindings, options) =>
  new LazyRequestLogger(logger, bindings, options) as unknown as FastifyBaseLogger;

const INFO = 30;

/**
 * The access line of an answered request, as pino would write it for
 * `log.info({ reqId, req, res, responseTime }, 'request completed')` with the gateway's
 * serializers (request-logger.unit.test.ts compares the two), put together directly: it is written
 * for every request, and pino's general path (serializers, a stringifier per value) was ~4 %
 * of the gateway's CPU per request. Uses the logger's own level prefix, time and bindings.
 */
export function writeAccessLine(log: FastifyBaseLogger, request: FastifyRequest, reply: FastifyReply): void {
  const logger = log as unknown as Logger & PinoInternals;
  // Fastify without a logger hands out a no-op one, which has no pino stream.
  const stream = logger[symbols.streamSym];
  if (stream === undefined || !logger.isLevelEnabled('info')) return;
  const line =
    `${logger[symbols.lsCacheSym][INFO]}${logger[symbols.timeSym]()}${logger[symbols.chindingsSym]}` +
    `,"reqId":${JSON.stringify(request.id)}` +
    `,"req":{"method":${JSON.stringify(request.method)},"url":${JSON.stringify(redactUrl(request.url))}` +
    // A socket already closed has no address: pino leaves an undefined member out.
    (request.ip === undefined ? '}' : `,"remoteAddress":${JSON.stringify(request.ip)}}`) +
    `,"res":{"statusCode":${reply.statusCode}},"responseTime":${reply.elapsedTime},"msg":"request completed"}\n`;
  stream.write(line);
}
