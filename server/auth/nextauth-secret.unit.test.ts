import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SECRET_FILE, resolveNextAuthSecret } from './nextauth-secret.ts';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'svc-secret-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('resolveNextAuthSecret', () => {
  it('uses NEXTAUTH_SECRET when set, without touching the data directory', () => {
    const dir = tempDir();
    expect(resolveNextAuthSecret({ NEXTAUTH_SECRET: ' from-env ' }, dir)).toBe('from-env');
    expect(() => statSync(join(dir, SECRET_FILE))).toThrow();
  });

  it('otherwise generates one secret, stores it with mode 0600, and keeps returning it', () => {
    const dir = join(tempDir(), 'nested', 'data');
    const first = resolveNextAuthSecret({}, dir);
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const path = join(dir, SECRET_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, 'utf8').trim()).toBe(first);
    expect(resolveNextAuthSecret({}, dir)).toBe(first);
    expect(resolveNextAuthSecret({ NEXTAUTH_SECRET: '' }, dir)).toBe(first);
  });

  it('tightens the permissions of an existing secret file', () => {
    const dir = tempDir();
    const path = join(dir, SECRET_FILE);
    writeFileSync(path, 'kept-secret\n');
    chmodSync(path, 0o644);
    expect(resolveNextAuthSecret({}, dir)).toBe('kept-secret');
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('refuses an empty secret file instead of signing sessions with nothing', () => {
    const dir = tempDir();
    writeFileSync(join(dir, SECRET_FILE), '\n', { mode: 0o600 });
    expect(() => resolveNextAuthSecret({}, dir)).toThrow(/empty/);
  });
});
