// Writes SQL migrations for both providers: `npm run db:diff -- <name>`.
// Why this exists: `prisma migrate` needs the native schema engine, which the Prisma CLI
// downloads on first use, and there is no network here. @prisma/schema-engine-wasm runs the
// same engine in-process and its `diff` turns one data model into another as SQL without a
// database, so each provider keeps a snapshot of the schema it last migrated to
// (prisma/migrations/<provider>/schema.snapshot.prisma) and we diff snapshot -> current.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as glue from '@prisma/schema-engine-wasm/schema_engine_bg';
import type { DiffTarget, SchemaEngine } from '@prisma/schema-engine-wasm/schema_engine_bg';

export type Provider = 'sqlite' | 'postgresql';
const PROVIDERS: readonly Provider[] = ['sqlite', 'postgresql'];
const root = join(dirname(fileURLToPath(import.meta.url)), '..');

// The wasm reports Rust panics here before trapping with an opaque "unreachable".
let lastPanic = '';
(globalThis as { PRISMA_WASM_PANIC_REGISTRY?: unknown }).PRISMA_WASM_PANIC_REGISTRY ??= {
  set_message: (message: string) => void (lastPanic = message),
};

// schema_engine.js imports the .wasm as an ES module, which Node 22 cannot do without a flag,
// so instantiate it by hand against the JS glue (what that file does), once per process.
let loaded: Promise<void> | undefined;
function loadEngine(): Promise<void> {
  loaded ??= (async () => {
    const gluePath = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm/schema_engine_bg');
    const bytes = readFileSync(join(dirname(gluePath), 'schema_engine_bg.wasm'));
    const { instance } = await WebAssembly.instantiate(bytes, { './schema_engine_bg.js': glue });
    glue.__wbg_set_wasm(instance.exports);
    (instance.exports.__wbindgen_start as () => void)();
  })();
  return loaded;
}

// The engine insists on a driver adapter and connects at construction, though a diff between two
// data models never touches a database. PostgreSQL asks for the server version on connect, so that
// one query gets a canned answer; anything else fails loudly.
type Ok<T> = { ok: true; value: T };
const ok = <T>(value: T): Ok<T> => ({ ok: true, value });
function offlineAdapter(provider: Provider): object {
  const flavour = provider === 'postgresql' ? 'postgres' : 'sqlite';
  const offline = async (): Promise<never> => {
    throw new Error('make-migration: the diff engine tried to use a database');
  };
  const connection = {
    provider: flavour,
    adapterName: 'make-migration-offline',
    queryRaw: async ({ sql }: { sql: string }) => {
      if (!sql.includes('server_version_num')) return offline();
      // columns: schema exists (Boolean = 5), version() (Text = 7), numeric version (Int32 = 0)
      return ok({
        columnNames: ['exists', 'version', 'numeric_version'],
        columnTypes: [5, 7, 0],
        rows: [[true, 'PostgreSQL 16.0 (offline)', 160000]],
      });
    },
    executeRaw: offline,
    executeScript: offline,
    startTransaction: offline,
    dispose: async () => ok(undefined),
  };
  return {
    provider: flavour,
    adapterName: 'make-migration-offline',
    connect: async () => ok(connection),
    connectToShadowDb: async () => ok(connection),
  };
}

/** SQL that migrates a database from `fromSchema` (null = empty database) to `toSchema`; '' if none. */
export async function diffSchemas(provider: Provider, fromSchema: string | null, toSchema: string): Promise<string> {
  // The SQL dialect follows the schema's datasource, not the adapter, so check they agree.
  const declared = /datasource\s+\w+\s*\{[^}]*provider\s*=\s*"(\w+)"/.exec(toSchema)?.[1];
  if (declared !== provider) throw new Error(`schema declares provider ${declared ?? '(none)'}, not ${provider}`);
  await loadEngine();
  lastPanic = '';
  const model = (content: string): DiffTarget => ({
    tag: 'schemaDatamodel',
    files: [{ path: 'schema.prisma', content }],
  });
  let engine: SchemaEngine | undefined;
  try {
    engine = await glue.SchemaEngine.new({ datamodels: undefined }, () => {}, offlineAdapter(provider));
    const result = await engine.diff({
      from: fromSchema === null ? { tag: 'empty' } : model(fromSchema),
      to: model(toSchema),
      script: true,
      exitCode: true, // 2 = there are changes, 0 = none ("-- This is an empty migration.")
      filters: { externalTables: [], externalEnums: [] },
    });
    return result.exitCode === 2 ? (result.stdout ?? '') : '';
  } catch (error) {
    if (lastPanic) throw new Error(`schema engine panicked: ${lastPanic}`, { cause: error });
    throw error;
  } finally {
    engine?.free();
  }
}

async function main(rawName: string | undefined): Promise<void> {
  const name = (rawName ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  if (!name) throw new Error('usage: tsx scripts/make-migration.ts <name>');
  for (const provider of PROVIDERS) {
    const schemaPath = join(root, 'prisma/generated', provider, 'schema.prisma');
    const dir = join(root, 'prisma/migrations', provider);
    const snapshotPath = join(dir, 'schema.snapshot.prisma');
    if (!existsSync(schemaPath)) throw new Error(`${schemaPath} is missing: run npm run db:generate first`);
    const previous = existsSync(snapshotPath) ? readFileSync(snapshotPath, 'utf8') : null;
    const sql = await diffSchemas(provider, previous, readFileSync(schemaPath, 'utf8'));
    if (!sql.trim()) {
      console.log(`no changes for ${provider}`);
      continue;
    }
    const taken = existsSync(dir) ? readdirSync(dir).flatMap((entry) => (/^(\d{4})_/.exec(entry) ? [Number(entry.slice(0, 4))] : [])) : [];
    const folder = join(dir, `${String(Math.max(0, ...taken) + 1).padStart(4, '0')}_${name}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'migration.sql'), sql);
    copyFileSync(schemaPath, snapshotPath);
    console.log(`wrote ${join(folder, 'migration.sql').slice(root.length + 1)}`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  main(process.argv[2]).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
