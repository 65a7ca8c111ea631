// Derives one schema per provider from prisma/schema.prisma and generates a client for each.
// The Prisma CLI tries to download its native schema engine first, which cannot be reached
// offline; pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing file lets `generate` run
// (it does not need the engine). Migrations are made by scripts/make-migration.ts instead.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROVIDERS = ['sqlite', 'postgresql'] as const;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export function schemaFor(provider: (typeof PROVIDERS)[number]): string {
  const source = readFileSync(join(root, 'prisma/schema.prisma'), 'utf8');
  const schemaDir = join(root, 'prisma/generated', provider);
  const output = relative(schemaDir, join(root, 'server/db/generated', provider));
  return source.replace('__PROVIDER__', provider).replace('__OUTPUT__', output);
}

function main(): void {
  const prismaBin = join(root, 'node_modules/.bin/prisma');
  for (const provider of PROVIDERS) {
    const schemaPath = join(root, 'prisma/generated', provider, 'schema.prisma');
    mkdirSync(dirname(schemaPath), { recursive: true });
    writeFileSync(schemaPath, schemaFor(provider));
    execFileSync(prismaBin, ['generate', '--schema', schemaPath], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        PRISMA_SCHEMA_ENGINE_BINARY: process.execPath,
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
        CHECKPOINT_DISABLE: '1',
      },
    });
    console.log(`generated prisma client for ${provider}`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
