// Lint, and the import boundaries of docs/architecture.md ("The rooms"), so that a wrong-way
// import fails `npm test` rather than waiting for a reviewer. Syntax-level rules only (no
// type-aware ones): `tsc --noEmit` is the type check, and this stays fast.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const root = import.meta.dirname;

const TESTS = ['**/*.test.ts', '**/test-harness.ts', 'test/**', 'e2e/**'];

/** Where every boundary message sends the reader: the rooms, what each may import, and why. */
const ROOMS = 'docs/architecture.md#the-rooms';

/**
 * Who may not import what. Paths are resolved (a relative `.js`, `.ts` or `@/` import all name
 * the same file), then matched against folders from the repository root. Tests are exempt: a
 * test may wire the layers together; the rules hold the code it tests. No two zones cover the
 * same import, so a wrong one is reported once.
 */
const zones = [
  // server/ is below the gateway: the gateway imports it, never the other way round.
  {
    target: 'server',
    from: 'gateway',
    message: `server/ imports nothing from gateway/: what both need lives under server/ (server/error-envelope.ts, server/rate-limit/), and engine work is asked of the gateway over HTTP (server/api/gateway-proxy.ts). See ${ROOMS}.`,
  },
  {
    target: 'server/services',
    from: ['server/api', 'app', 'server/error-envelope.ts'],
    message: `Services know no edge: no tRPC router, dashboard page or HTTP status table. Throw a ServiceError; each edge maps it. See ${ROOMS}.`,
  },
  { target: 'server/auth', from: 'server/api', message: `Auth sits below the tRPC edge, which imports it, not the other way round. See ${ROOMS}.` },
  {
    target: 'server/config',
    from: 'server/services',
    message: `Config is read by the services, so it imports none of them (neutral helpers live beside it, e.g. server/money.ts). See ${ROOMS}.`,
  },
  // gateway/audio is pure functions over buffers and streams: only its own folder.
  {
    target: 'gateway/audio',
    from: 'gateway',
    except: ['./audio'],
    message: `gateway/audio is pure functions over buffers: it imports no other gateway module. Throw an AudioError; the gateway maps it. See ${ROOMS}.`,
  },
  {
    target: 'gateway/audio',
    from: 'server',
    message: `gateway/audio is pure functions over buffers: it imports nothing from server/. Throw an AudioError; the gateway maps it. See ${ROOMS}.`,
  },
  // The upstream seam: the protocols, the local engines and the adapter toolkit they share
  // (contract.ts, engine-http/ws, pcm-streams, async-queue...) use only gateway/upstreams/ and
  // gateway/audio. The gateway's side of the seam (try-upstreams, the registry, admission) is
  // outside it and calls into it.
  {
    target: 'gateway/upstreams',
    from: 'gateway',
    except: ['./upstreams', './audio'],
    message: `The upstream seam uses only gateway/upstreams/ (contract.ts and its helpers) and gateway/audio; what an engine needs of the gateway is passed in. See ${ROOMS}.`,
  },
  {
    target: 'gateway/upstreams',
    from: 'server',
    message: `The upstream seam knows no server: settings arrive through the protocol's zod schema, engine settings through create(engines), failures leave as UpstreamError. See ${ROOMS}.`,
  },
  // A route parses the request, calls, and answers; what it calls lives in a room of its own, so
  // nothing but the app that registers the routes imports one. The OpenAPI document describes the
  // routes and reads their request schemas from them.
  {
    target: ['!(gateway)/**/*', 'gateway/!(routes|openapi)/**/*', 'gateway/!(app).ts'],
    from: 'gateway/routes',
    message: `Nothing imports a route file (only gateway/app.ts registers them): move what both need out of gateway/routes/ into the room it belongs to. See ${ROOMS}.`,
  },
];

export default defineConfig(
  {
    ignores: ['node_modules/', '.build/', '.next/', '.tools/', 'data/', 'server/db/generated/', 'prisma/generated/', 'next-env.d.ts', '**/*.{js,cjs,mjs}'],
  },
  {
    files: ['**/*.{ts,tsx,mts}'],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // `_` names what is left out on purpose (`const { secret: _, ...rest } = row`).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Refusing control characters in names and entries is done with a regex on purpose.
      'no-control-regex': 'off',
    },
  },
  {
    // One import style: a relative import names the TypeScript file itself (`./x.ts`), as every
    // tool here resolves it (tsx, esbuild, vitest, Next); a `.js` suffix for a .ts file is the old style.
    files: ['**/*.{ts,tsx,mts}'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['ImportDeclaration', 'ExportNamedDeclaration', 'ExportAllDeclaration', 'ImportExpression'].map((node) => ({
          selector: `${node}[source.value=/^\\.{1,2}\\/.*\\.js$/]`,
          message: 'Import the TypeScript file by its own name (./file.ts), not ./file.js.',
        })),
      ],
    },
  },
  {
    // Tests and benches read untyped JSON bodies; `any` keeps their assertions short.
    files: [...TESTS, 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.{ts,tsx,mts}'],
    ignores: TESTS,
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [
        createNodeResolver({
          extensions: ['.ts', '.tsx', '.mts', '.js', '.mjs', '.cjs', '.json'],
          tsconfig: { configFile: `${root}/tsconfig.json` },
        }),
      ],
    },
    rules: { 'import-x/no-restricted-paths': ['error', { basePath: root, zones }] },
  },
  {
    files: ['server/services/**/*.ts'],
    ignores: TESTS,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['fastify', 'next', 'next-auth'].map((name) => ({ name, message: `Services know nothing of Next, tRPC or Fastify. See ${ROOMS}.` })),
          patterns: [{ group: ['@fastify/*', 'next/*', 'next-auth/*', '@trpc/*'], message: `Services know nothing of Next, tRPC or Fastify. See ${ROOMS}.` }],
        },
      ],
    },
  },
);
