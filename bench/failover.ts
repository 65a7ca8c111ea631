// Failover benchmarks (docs/failover.md): runs every bench/failover-*.ts beside this file in turn
// (LLM streams here; other modalities add their own file), each printing its table.
//
//   npx tsx bench/failover.ts [--runs 20]      (or one part: npx tsx bench/failover-llm.ts)
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const parts = readdirSync(here)
  .filter((f) => /^failover-[a-z0-9-]+\.ts$/.test(f))
  .sort();
for (const part of parts) {
  console.log(`\n# ${part}`);
  const mod = (await import(pathToFileURL(join(here, part)).href)) as { run?: (args: string[]) => Promise<void> };
  await mod.run?.(process.argv.slice(2));
}
