// Lint, and the import boundaries of ../shared/STYLE.md ("The picture"), so that a wrong-way
// import fails `npm test` rather than waiting for a reviewer. Syntax-level rules only (no
// type-aware ones): `tsc --noEmit` is the type check, and this stays fast.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const root = import.meta.dirname;

const TESTS = ['**/*.test.ts', '**/test-harness.ts', 'test/**', 'e2e/**'];

/**
 * Who may not import what. Paths are resolved (a relative `.js`, `.ts` or `@/` import all name
 * the same file), then matched against folders from the repository root. Tests are exempt: a
 * test may wire the layers together; the rules hold the code it tests.
 */
const zones = [
  {
    target: 'server/services',
    from: ['gateway', 'server/api', 'app', 'server/error-envelope.ts'],
    message: 'Services know no edge: no gateway, tRPC router, dashboard page or HTTP status table (STYLE.md). Throw a ServiceError; each edge maps it.',
  },
  {
    target: 'server/api',
    from: 'gateway',
    message: 'The tRPC edge does not import the gateway; what both need lives under server/ (e.g. server/error-envelope.ts).',
  },
  { target: 'server/auth', from: 'server/api', message: 'Auth sits below the tRPC edge, which imports it, not the other way round.' },
  {
    target: 'server/config',
    from: 'server/services',
    message: 'Config is read by the services, so it imports none of them (neutral helpers live beside it, e.g. server/money.ts).',
  },
  // gateway/audio is pure functions over buffers and streams: only its own folder.
  {
    target: 'gateway/audio',
    from: 'gateway',
    except: ['./audio'],
    message: 'gateway/audio is pure functions over buffers: it imports no other gateway module. Throw an AudioError; the gateway maps it.',
  },
  {
    target: 'gateway/audio',
    from: 'server',
    message: 'gateway/audio is pure functions over buffers: it imports nothing from server/. Throw an AudioError; the gateway maps it.',
  },
  // The seam an upstream protocol module may use: its own folder, the adapter toolkit in
  // gateway/upstreams/ (contract.ts, engine-http/ws, pcm-streams, async-queue, the local
  // engines' folders...) and gateway/audio. Not try-upstreams.ts, which is the gateway's side
  // of the seam (context, registry, admission), nor anything else of the gateway or server.
  {
    target: 'gateway/upstreams/protocols',
    from: 'gateway',
    except: ['./upstreams', './audio'],
    message: 'A protocol module uses only the seam: gateway/upstreams/ (contract.ts and its helpers) and gateway/audio.',
  },
  {
    target: 'gateway/upstreams/protocols',
    from: 'gateway/upstreams/try-upstreams.ts',
    message: "try-upstreams is the gateway's side of the seam; a protocol module does not call back into it.",
  },
  {
    target: 'gateway/upstreams/protocols',
    from: 'server',
    message: 'A protocol module knows no server: settings arrive through its zod schema, failures leave as UpstreamError.',
  },
  // A route parses the request, calls, and answers; what it calls lives in a room of its own, so
  // nothing but the app that registers the routes imports one. The OpenAPI document describes the
  // routes and reads their request schemas from them.
  {
    target: ['!(gateway)/**/*', 'gateway/!(routes|openapi)/**/*', 'gateway/!(app).ts'],
    from: 'gateway/routes',
    message:
      'Nothing imports a route file (only gateway/app.ts registers them): move what both need out of gateway/routes/ into the room it belongs to (docs/architecture.md#the-rooms).',
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
          paths: ['fastify', 'next', 'next-auth'].map((name) => ({ name, message: 'Services know nothing of Next, tRPC or Fastify (STYLE.md).' })),
          patterns: [{ group: ['@fastify/*', 'next/*', 'next-auth/*', '@trpc/*'], message: 'Services know nothing of Next, tRPC or Fastify (STYLE.md).' }],
        },
      ],
    },
  },
);
