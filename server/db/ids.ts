import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * Application-generated ids, `<prefix>_<20 random base36 chars>` (~103 bits): readable in
 * logs, safe in URLs, and the same whether a row is written by Prisma or by raw SQL.
 */
export function newId(prefix: string): string {
  const bytes = randomBytes(20);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % 36];
  return `${prefix}_${out}`;
}
