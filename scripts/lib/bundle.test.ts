// The bundler `svc` and the benches run the gateway from (scripts/lib/bundle.mjs), on a small
// project in a temporary directory: the bundle runs, a source edit is in the next bundle, a
// stack trace points at the TypeScript source once source maps are on (as `svc` turns them
// on), and processes bundling at once leave a complete bundle and no temporary files.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundle } from './bundle.mjs';

let root: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'svc-bundle-'));
  writeFileSync(join(root, 'package.json'), '{"type":"module"}\n');
  writeFileSync(join(root, 'main.ts'), "import { answer, fail } from './lib.ts';\nif (process.argv.includes('fail')) fail();\nconsole.log(answer());\n");
  writeLib(42);
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

function writeLib(answer: number): void {
  writeFileSync(join(root, 'lib.ts'), `export const answer = (): number => ${answer};\n\nexport function fail(): never {\n  throw new Error('boom');\n}\n`);
}

/** Runs the bundle with source maps on, as bin/svc.mjs does before importing it. */
function run(file: string, ...args: string[]): string {
  const script = `import { enableSourceMaps } from ${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'runtime-flags.mjs')).href)};
enableSourceMaps();
try { await import(${JSON.stringify(pathToFileURL(file).href)}); } catch (e) { console.log(e.stack); }`;
  return execFileSync(process.execPath, ['--input-type=module', '-e', script, '--', ...args], { encoding: 'utf8' });
}

describe('bundle', () => {
  it('writes .build/<name>.mjs, which runs, and picks up an edit on the next build', () => {
    const out = bundle(root, { app: 'main.ts' });
    expect(out).toEqual({ app: join(root, '.build/app.mjs') });
    expect(run(out.app!).trim()).toBe('42');
    writeLib(43);
    bundle(root, { app: 'main.ts' });
    expect(run(out.app!).trim()).toBe('43');
  });

  it('maps stack traces to the TypeScript source', () => {
    const { app } = bundle(root, { app: 'main.ts' });
    const stack = run(app!, 'fail');
    expect(stack).toContain('Error: boom');
    expect(stack).toContain(`${join(root, 'lib.ts')}:4:9`);
    expect(stack).toContain(`${join(root, 'main.ts')}:2:`);
  });

  it('reports a compile error with its place', () => {
    writeFileSync(join(root, 'broken.ts'), 'export const x = ;\n');
    expect(() => bundle(root, { broken: 'broken.ts' })).toThrow(/broken\.ts:1:\d+/);
  });

  it('leaves a complete bundle and no temporary files when several processes build at once', async () => {
    const bundler = pathToFileURL(join(import.meta.dirname, 'bundle.mjs')).href;
    const script = `import { bundle } from ${JSON.stringify(bundler)}; bundle(${JSON.stringify(root)}, { app: 'main.ts' });`;
    writeLib(7);
    const codes = await Promise.all(
      Array.from(
        { length: 4 },
        () => new Promise<number | null>((resolve) => spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' }).on('exit', resolve)),
      ),
    );
    expect(codes).toEqual([0, 0, 0, 0]);
    expect(run(join(root, '.build/app.mjs')).trim()).toBe('7');
    expect(readdirSync(join(root, '.build')).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
