import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * Application-generated ids, `<prefix>_<20 random base36 chars>` (~103 bits): readable in
 * logs, safe in URLs, and the same whether a row is written by Prisma or by raw SQL.
 */
export function newId(prefix: string): string {
  if (poolAt + ID_BYTES > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolAt = 0;
  }
  let out = '';
  for (let i = poolAt; i < poolAt + ID_BYTES; i++) out += ALPHABET[pool[i]! % 36];
  poolAt += ID_BYTES;
  return `${prefix}_${out}`;
}

// Random bytes are drawn in blocks: ids are made on every metered request, and one
// randomBytes call per id costs more than the rest of the id.
const ID_BYTES = 20;
const POOL_BYTES = ID_BYTES * 256;
let pool = Buffer.alloc(0);
let poolAt = 0;
