// Each request's logger becomes a pino child only when something logs through it, and then
// writes what Fastify's per-request child would have written.
import { Writable } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { gatewayLoggerOptions } from './app.ts';
import { LazyRequestLogger, lazyRequestLoggers, writeAccessLine } from './request-logger.ts';

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

  it('a child of it carries both bindings', async () => {
    const { logger, lines } = captured();
    new LazyRequestLogger(logger, { reqId: 'req_4' }, {}).child({ session: 's1' }).info('from a child');
    await settled();
    expect(lines[0]).toMatchObject({ reqId: 'req_4', session: 's1', msg: 'from a child' });
  });
});

/** Fastify's own request lines off: only what the tests write. */
const quiet = () => new LogController({ disableRequestLogging: true });

describe('writeAccessLine', () => {
  it("writes the line pino writes for the same fields, with the gateway's serializers", async () => {
    const out: string[] = [];
    const stream = { write: (line: string) => void out.push(line) };
    const app = Fastify({ logger: gatewayLoggerOptions('info', stream), childLoggerFactory: lazyRequestLoggers, logController: quiet() });
    app.get('/v1/voices', async () => ({ ok: true }));
    app.addHook('onResponse', (request, reply, done) => {
      const log = (reply.log as unknown as LazyRequestLogger).parent;
      writeAccessLine(log, request, reply);
      log.info({ reqId: request.id, req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
      done();
    });
    for (const url of ['/v1/voices', '/v1/voices?api_key=sk_svc_secret&limit="2"', '/v1/voices?q=\u00e9t\u00e9%20%E2%9C%93']) {
      out.length = 0;
      await app.inject({ method: 'GET', url, remoteAddress: '10.1.2.3' });
      expect(out).toHaveLength(2);
      const [ours, pinos] = out.map((line) => line.replace(/"time":\d+/, '"time":0').replace(/"responseTime":[\d.e-]+/, '"responseTime":0'));
      expect(ours).toBe(pinos);
      expect(JSON.parse(out[0]!)).toMatchObject({
        level: 30,
        req: { method: 'GET', remoteAddress: '10.1.2.3' },
        res: { statusCode: 200 },
        msg: 'request completed',
      });
    }
    expect(out[0]).not.toContain('sk_svc_secret');
    await app.close();
  });

  it('writes nothing, and does not throw, under a Fastify without a logger', async () => {
    const errors: unknown[] = [];
    const app = Fastify({ logger: false, childLoggerFactory: lazyRequestLoggers });
    app.get('/', async () => 'ok');
    app.addHook('onResponse', (request, reply, done) => {
      try {
        writeAccessLine((reply.log as unknown as LazyRequestLogger).parent, request, reply);
      } catch (e) {
        errors.push(e);
      }
      done();
    });
    expect((await app.inject({ method: 'GET', url: '/' })).statusCode).toBe(200);
    expect(errors).toEqual([]);
    await app.close();
  });

  it('writes nothing when info is off', async () => {
    const out: string[] = [];
    const app = Fastify({
      logger: gatewayLoggerOptions('warn', { write: (line: string) => void out.push(line) }),
      childLoggerFactory: lazyRequestLoggers,
      logController: quiet(),
    });
    app.get('/', async () => 'ok');
    app.addHook('onResponse', (request, reply, done) => {
      writeAccessLine((reply.log as unknown as LazyRequestLogger).parent, request, reply);
      done();
    });
    await app.inject({ method: 'GET', url: '/' });
    expect(out).toEqual([]);
    await app.close();
  });
});
