// The import boundaries of eslint.config.mjs, checked through ESLint's own API on one-line
// files that are never written: a wrong-way import is reported once, with a message that points
// at a page of the repository; the same module imported from where it belongs is not.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const BOUNDARY_RULES = new Set(['import-x/no-restricted-paths', 'no-restricted-imports']);
/** What every boundary message points at. */
const ROOMS = 'docs/architecture.md#the-rooms';

let eslint: ESLint;
beforeAll(() => {
  eslint = new ESLint({ cwd: root });
});

/** The boundary errors ESLint reports for `code` as if it were the file at `path`. */
async function boundaryErrors(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${code}\nexport const used = [probe];\n`, { filePath: `${root}${path}` });
  const messages = result!.messages;
  expect(messages.filter((m) => m.fatal)).toEqual([]);
  return messages.filter((m) => m.ruleId !== null && BOUNDARY_RULES.has(m.ruleId)).map((m) => `${m.ruleId}: ${m.message}`);
}

describe('import boundaries', () => {
  it.each([
    [
      'a service importing the gateway',
      'server/services/keys/probe.ts',
      "import { envelope as probe } from '../../../gateway/errors.ts';",
      /no-restricted-paths.*server\/ imports nothing from gateway\//,
    ],
    [
      'a service importing a tRPC router through the alias',
      'server/services/probe.ts',
      "import { appRouter as probe } from '@/server/api/root';",
      /no-restricted-paths.*Services know no edge/,
    ],
    ['a service importing Fastify', 'server/services/probe.ts', "import probe from 'fastify';", /no-restricted-imports.*Fastify/],
    ['a service importing tRPC', 'server/services/probe.ts', "import { TRPCError as probe } from '@trpc/server';", /no-restricted-imports.*tRPC/],
    [
      'the tRPC edge importing the gateway',
      'server/api/probe.ts',
      "import { envelope as probe } from '../../gateway/errors.ts';",
      /no-restricted-paths.*server\/ imports nothing from gateway\//,
    ],
    [
      'the tRPC edge loading the engines on use',
      'server/api/routers/probe.ts',
      "const probe = () => import('../../../gateway/voices/engine-catalogue.ts');",
      /no-restricted-paths.*server\/ imports nothing from gateway\//,
    ],
    [
      'the sign-in throttle importing the gateway core',
      'server/auth/probe.ts',
      "import { createGatewayCore as probe } from '../../gateway/core/gateway-core.ts';",
      /no-restricted-paths.*server\/ imports nothing from gateway\//,
    ],
    [
      'auth importing the tRPC edge',
      'server/auth/probe.ts',
      "import { createTRPCRouter as probe } from '../api/trpc.ts';",
      /no-restricted-paths.*Auth sits below/,
    ],
    [
      'config importing a service',
      'server/config/probe.ts',
      "import { ServiceError as probe } from '../services/errors.ts';",
      /no-restricted-paths.*Config is read by the services/,
    ],
    [
      'audio importing ServiceError',
      'gateway/audio/probe.ts',
      "import { ServiceError as probe } from '../../server/services/errors.ts';",
      /no-restricted-paths.*imports nothing from server/,
    ],
    [
      'audio importing the gateway',
      'gateway/audio/probe.ts',
      "import { toServiceError as probe } from '../errors.ts';",
      /no-restricted-paths.*no other gateway module/,
    ],
    [
      'a protocol importing the gateway outside the seam',
      'gateway/upstreams/protocols/probe.ts',
      "import { envelope as probe } from '../../errors.ts';",
      /no-restricted-paths.*uses only gateway\/upstreams\//,
    ],
    [
      "a protocol importing try-upstreams, the gateway's side of the seam",
      'gateway/upstreams/protocols/cartesia/probe.ts',
      "import { tryUpstreams as probe } from '../../../core/try-upstreams.ts';",
      /no-restricted-paths.*uses only gateway\/upstreams\//,
    ],
    [
      'a protocol importing the server',
      'gateway/upstreams/protocols/probe.ts',
      "import { loadConfig as probe } from '../../../server/config/env.ts';",
      /no-restricted-paths.*knows no server/,
    ],
    [
      'a gateway module importing a route',
      'gateway/realtime/probe.ts',
      "import { LLM_BODY_LIMIT as probe } from '../routes/chat-completions.ts';",
      /no-restricted-paths.*Nothing imports a route file/,
    ],
    [
      'a top-level gateway module importing a route',
      'gateway/probe.ts',
      "import { registerTtsRoutes as probe } from './routes/tts.ts';",
      /Nothing imports a route file/,
    ],
    [
      'a benchmark importing a route',
      'bench/probe.ts',
      "import { registerTtsRoutes as probe } from '../gateway/routes/tts.ts';",
      /Nothing imports a route file/,
    ],
    [
      "a local engine importing the gateway's voices",
      'gateway/upstreams/local-tts/probe.ts',
      "import { voiceEngines as probe } from '../../voices/voice-engines.ts';",
      /no-restricted-paths.*uses only gateway\/upstreams\//,
    ],
    [
      'a local engine importing the server',
      'gateway/upstreams/pocketsphinx/probe.ts',
      "import { PROJECT_ROOT as probe } from '../../../server/project-root.ts';",
      /no-restricted-paths.*knows no server/,
    ],
    [
      'an adapter helper importing the gateway context',
      'gateway/upstreams/probe.ts',
      "import type { GatewayContext as probe } from '../context.ts';",
      /no-restricted-paths.*uses only gateway\/upstreams\//,
    ],
  ])('refuses %s', async (_name, path, code, expected) => {
    const errors = await boundaryErrors(path, code);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(expected);
    expect(errors[0]).toContain(`See ${ROOMS}.`);
  });

  it.each([
    ['the gateway importing its error handler', 'gateway/routes/probe.ts', "import { envelope as probe } from '../errors.ts';"],
    ['the gateway importing a service', 'gateway/routes/probe.ts', "import { ServiceError as probe } from '../../server/services/errors.ts';"],
    ['the tRPC edge importing the shared envelope', 'server/api/probe.ts', "import { envelope as probe } from '../error-envelope.ts';"],
    ['audio importing audio', 'gateway/audio/probe.ts', "import { parseWav as probe } from './wav.ts';"],
    ['a protocol importing the contract', 'gateway/upstreams/protocols/cartesia/probe.ts', "import { UpstreamError as probe } from '../../contract.ts';"],
    ['a protocol importing an adapter helper', 'gateway/upstreams/protocols/probe.ts', "import { engineRequest as probe } from '../engine-http.ts';"],
    ['a protocol importing audio', 'gateway/upstreams/protocols/probe.ts', "import { encodeWav as probe } from '../../audio/wav.ts';"],
    ['a route importing a route', 'gateway/routes/probe.ts', "import { LLM_BODY_LIMIT as probe } from './chat-completions.ts';"],
    ['the app registering a route', 'gateway/app.ts', "import { registerTtsRoutes as probe } from './routes/tts.ts';"],
    ['the OpenAPI document reading a route schema', 'gateway/openapi/probe.ts', "import { VoiceIdParams as probe } from '../routes/voices.ts';"],
    ['a test importing a route', 'gateway/realtime/probe.test.ts', "import { LLM_BODY_LIMIT as probe } from '../routes/chat-completions.ts';"],
    ["a local engine importing the seam's helpers", 'gateway/upstreams/local-tts/probe.ts', "import { Slots as probe } from '../slots.ts';"],
    ['the gateway core calling into the seam', 'gateway/core/probe.ts', "import { asUpstreamError as probe } from '../upstreams/engine-http.ts';"],
    ['the gateway using the rate limiter', 'gateway/core/probe.ts', "import { WINDOW_MS as probe } from '../../server/rate-limit/rate-limiter.ts';"],
    ['auth using the rate limiter', 'server/auth/probe.ts', "import { WINDOW_MS as probe } from '../rate-limit/rate-limiter.ts';"],
    ['a test wiring a service to the gateway', 'server/services/keys/probe.test.ts', "import { envelope as probe } from '../../../gateway/errors.ts';"],
    [
      'a test of the tRPC edge starting a gateway',
      'server/api/probe.test.ts',
      "import { startGateway as probe } from '../../test/support/gateway-harness.ts';",
    ],
  ])('allows %s', async (_name, path, code) => {
    expect(await boundaryErrors(path, code)).toEqual([]);
  });

  it('points at a page that is in the repository', () => {
    const [file, anchor] = ROOMS.split('#');
    expect(readFileSync(`${root}${file}`, 'utf8')).toMatch(new RegExp(`^## ${anchor!.replace(/-/g, ' ')}$`, 'im'));
  });
});
