// Each request's logger becomes a pino child only when something logs through it, and then
// writes what Fastify's per-request child would have written.
import { Writable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { LazyRequestLogger } from './request-logger.js';

function captured(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: pino({ level }, stream) as unknown as FastifyBaseLogger, lines };
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('LazyRequestLogger', () => {
  it('makes no child until something logs through it, then logs with the request id', async () => {
    const { logger, lines } = captured();
    const child = vi.spyOn(logger, 'child');
    const log = new LazyRequestLogger(logger, { reqId: 'req_1' }, {});
    expect(log.level).toBe('info');
    expect(child).not.toHaveBeenCalled();
    log.warn({ upstream: 'u1' }, 'upstream stream ended abnormally');
    log.info('second line');
    expect(child).toHaveBeenCalledTimes(1);
    await settled();
    expect(lines.map((l) => [l.reqId, l.level, l.msg, l.upstream])).toEqual([
      ['req_1', 40, 'upstream stream ended abnormally', 'u1'],
      ['req_1', 30, 'second line', undefined],
    ]);
  });

  it("keeps a route's own level and the parent's level filter", async () => {
    const { logger, lines } = captured('warn');
    const quiet = new LazyRequestLogger(logger, { reqId: 'req_2' }, {});
    quiet.info('not written at warn');
    const verbose = new LazyRequestLogger(logger, { reqId: 'req_3' }, { level: 'debug' });
    expect(verbose.level).toBe('debug');
    verbose.debug('written at the route level');
    await settled();
    expect(lines.map((l) => [l.reqId, l.msg])).toEqual([['req_3', 'written at the route level']]);
  });

  it("a child of it carries both bindings", async () => {
    const { logger, lines } = captured();
    new LazyRequestLogger(logger, { reqId: 'req_4' }, {}).child({ session: 's1' }).info('from a child');
    await settled();
    expect(lines[0]).toMatchObject({ reqId: 'req_4', session: 's1', msg: 'from a child' });
  });
});
