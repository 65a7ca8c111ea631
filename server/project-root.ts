// The project's root directory, for the files the code reads or runs beside itself
// (config/models.json, prisma/migrations/, helper scripts, the dashboard's build).
//
// Paths cannot be taken relative to a module's own import.meta.url: where the code runs from
// depends on how it runs. Under tsx and vitest this module is server/project-root.ts; in the
// bundle `svc` runs it is inlined into .build/<name>.mjs; in the dashboard's Next.js server bundle
// Turbopack gives it its source path under the directory the server runs from. In every case the
// nearest directory above it with a package.json is the root (.build/ has none, and .next/'s own
// package.json is not on the way up from a source path).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json in ${start} or above it`);
  }
}

export const PROJECT_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));
