// The dashboard build (`next build`, Turbopack). Two things are particular to this repository:
// - Server code imports TypeScript NodeNext-style, with `.js`-suffixed relative paths
//   (`./database.js` for database.ts). Turbopack has no `resolve.extensionAlias` yet, so a
//   small loader drops those suffixes in the project's own .ts files (next-ts-imports-loader.cjs);
//   `next build --webpack` gets the equivalent `extensionAlias`.
// - Native and driver packages stay out of the bundle and load from node_modules at run time.
//   Nothing from the environment is read at build time: DATABASE_URL, SVC_DATA_DIR and the
//   session secret are resolved by the server on first use (server/db/dashboard-db.ts, server/auth/).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));

/** @type {import('next').NextConfig} */
const nextConfig = {
  reactStrictMode: true,
  poweredByHeader: false,
  // The dashboard's own TypeScript program: app/ and what it imports. `next build` then does not
  // depend on the typing of unrelated gateway code, tests and scripts; `tsc` covers those.
  typescript: { tsconfigPath: 'tsconfig.dashboard.json' },
  serverExternalPackages: [
    'better-sqlite3',
    'pg',
    '@prisma/client',
    '@prisma/adapter-better-sqlite3',
    '@prisma/adapter-pg',
    '@prisma/driver-adapter-utils',
    'bcryptjs',
    'koffi',
    // The engines' code reached by the Models page's voice import (the gateway's protocols).
    'node-llama-cpp',
  ],
  turbopack: {
    root,
    rules: {
      '*.ts': { condition: { not: 'foreign' }, loaders: [join(root, 'next-ts-imports-loader.cjs')], as: '*.ts' },
    },
  },
  webpack(config) {
    config.resolve.extensionAlias = { '.js': ['.ts', '.tsx', '.js'], '.mjs': ['.mts', '.mjs'] };
    return config;
  },
};

export default nextConfig;
