// The key that signs and encrypts session tokens: NEXTAUTH_SECRET when set, otherwise a random
// secret generated on first start and kept in the data directory (mode 0600), so sessions
// survive restarts and every dashboard process sharing the data directory agrees on it.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const SECRET_FILE = 'nextauth-secret';

export function resolveNextAuthSecret(env: { NEXTAUTH_SECRET?: string | undefined }, dataDir: string): string {
  const fromEnv = env.NEXTAUTH_SECRET?.trim();
  if (fromEnv) return fromEnv;
  const path = join(dataDir, SECRET_FILE);
  const existing = readSecret(path);
  if (existing) return existing;
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  try {
    // 'wx': when two processes start at once, exactly one creates the file; the other reads it.
    writeFileSync(path, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    return secret;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const raced = readSecret(path);
    if (!raced) throw new Error(`${path} exists but is empty; delete it or set NEXTAUTH_SECRET`, { cause: e });
    return raced;
  }
}

function readSecret(path: string): string | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  // Tighten a copy restored with looser permissions rather than refuse to start.
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  return text.trim() || null;
}
