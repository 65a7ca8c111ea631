// The dashboard build (`next build`, Turbopack). Relative imports name the TypeScript file
// itself (`./database.ts`), so the bundler resolves them as they are written.
// Native and driver packages stay out of the bundle and load from node_modules at run time.
// Nothing from the environment is read at build time: DATABASE_URL, SVC_DATA_DIR and the session
// secret are resolved by the server on first use (server/db/dashboard-db.ts, server/auth/).
import { dirname } from 'node:path';
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
  turbopack: { root },
};

export default nextConfig;
