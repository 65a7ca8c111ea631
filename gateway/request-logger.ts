// Each request's logger (`request.log`), made into a pino child only when something logs
// through it. Fastify's default makes a child per request, with a new formatters object and
// its bindings serialised, though most requests log nothing but their access line, which
// AccessLog (app.ts) writes through the parent with the request id: the same line, without
// the child.
import type { FastifyBaseLogger } from 'fastify';
import type { FastifyChildLoggerFactory } from 'fastify/types/logger.js';
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino';

type AnyLog = (...args: unknown[]) => void;

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
