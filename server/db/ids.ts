import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * Application-generated ids, `<prefix>_<20 random base36 chars>` (~103 bits): readable in
 * logs, safe in URLs, and the same whether a row is written by Prisma or by raw SQL.
 */
export function newId(prefix: string): string {
  return `${prefix}_${randomChars(ID_CHARS)}`;
}

/**
 * The same shape, but the first 9 characters are the time in milliseconds (base 36, so ids
 * sort by creation) and 11 random ones follow (~57 bits per millisecond). For rows written on
 * every request (ledger entries): each new key lands at the end of the primary-key index
 * instead of on a random page, so a commit of N rows dirties a few pages rather than N,
 * which more than halves the cost of a debit's INSERT (docs/performance.md, "Gateway core").
 */
export function newTimeOrderedId(prefix: string): string {
  const now = Date.now();
  // Several ids are made per request (its id, its debit's, its log row's): the time part once a millisecond.
  if (now !== timeAt) {
    timeAt = now;
    timePart = now.toString(36).padStart(TIME_CHARS, '0');
  }
  return `${prefix}_${timePart}${randomChars(ID_CHARS - TIME_CHARS)}`;
}

let timeAt = -1;
let timePart = '';

function randomChars(n: number): string {
  if (poolAt + n > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolAt = 0;
  }
  // Characters written into a scratch buffer and read out as one string (appending them
  // one by one makes a string per character: ids are made on every request).
  for (let i = 0; i < n; i++) scratch[i] = ALPHABET_CODES[pool[poolAt + i]! % 36]!;
  poolAt += n;
  return scratch.toString('latin1', 0, n);
}

const ALPHABET_CODES = Buffer.from(ALPHABET, 'latin1');

// Random bytes are drawn in blocks: ids are made on every metered request, and one
// randomBytes call per id costs more than the rest of the id.
const ID_CHARS = 20;
/** Date.now() in base 36 fits 9 characters until the year 5188. */
const TIME_CHARS = 9;
const POOL_BYTES = ID_CHARS * 256;
const scratch = Buffer.alloc(ID_CHARS);
let pool = Buffer.alloc(0);
let poolAt = 0;

/**
 * Names one process's credit reservations (CreditHold.ownerId): host and pid for whoever reads
 * the table, and random characters so that a restarted process with the same pid is another owner.
 */
export function holdOwnerId(): string {
  return `${hostname()}:${process.pid}:${randomChars(8)}`;
}
