// The compiled form of a dictionary for synthesis (apply-pronunciation.ts), cached per process
// so that requests naming the same dictionary neither reload its entries nor recompile them.
//
// Every request still asks the database whether the dictionary is the org's and live (so
// deletion, another org's id and a move between orgs are seen at once) and for the id of its
// first entry, which is the version: entries are only ever written all at once (create, or a
// PATCH that replaces the list) with fresh random ids, so a new list always has a new first
// id. That holds even for two edits in the same millisecond, which updatedAt would not tell
// apart. An empty dictionary's version is ''.
import type { Prisma } from '../../db/database.ts';
import { compilePronunciation, type CompiledPronunciation } from './apply-pronunciation.ts';
import { dictNotFound } from './dict-record.ts';

/**
 * Least recently used first out, bounded by count and by weight (UTF-16 units of the
 * graphemes, their folds and the replacements held): the heaviest dictionary the limits
 * allow (10,000 entries of 200 + 1,000 characters) is about 14 M units, ~30 MB.
 */
export class DictMatcherCache {
  private readonly items = new Map<string, { version: string; dict: CompiledPronunciation }>();
  private weight = 0;

  constructor(
    private readonly maxItems = 1000,
    private readonly maxWeight = 32_000_000,
  ) {}

  get(dictId: string, version: string): CompiledPronunciation | undefined {
    const item = this.items.get(dictId);
    if (!item || item.version !== version) return undefined;
    this.items.delete(dictId);
    this.items.set(dictId, item);
    return item.dict;
  }

  set(dictId: string, version: string, dict: CompiledPronunciation): void {
    this.delete(dictId);
    // One heavier than the whole budget would only evict everything else and then itself.
    if (dict.weight > this.maxWeight) return;
    this.items.set(dictId, { version, dict });
    this.weight += dict.weight;
    for (const [id] of this.items) {
      if (this.items.size <= this.maxItems && this.weight <= this.maxWeight) break;
      this.delete(id);
    }
  }

  get size(): number {
    return this.items.size;
  }

  private delete(dictId: string): void {
    const item = this.items.get(dictId);
    if (!item) return;
    this.items.delete(dictId);
    this.weight -= item.dict.weight;
  }
}

const shared = new DictMatcherCache();

/** One of the org's live dictionaries, compiled; 404 dict_not_found otherwise. */
export async function getDictMatcher(
  prisma: Prisma,
  input: { orgId: string; dictId: string },
  cache: DictMatcherCache = shared,
): Promise<CompiledPronunciation> {
  const where = { id: input.dictId, orgId: input.orgId, deletedAt: null };
  const head = await prisma.pronunciationDict.findFirst({
    where,
    select: { entries: { orderBy: { position: 'asc' }, take: 1, select: { id: true } } },
  });
  if (!head) throw dictNotFound(input.dictId, 'pronunciation_dict_id');
  const cached = cache.get(input.dictId, head.entries[0]?.id ?? '');
  if (cached) return cached;
  const dict = await prisma.pronunciationDict.findFirst({
    where,
    select: { entries: { orderBy: { position: 'asc' }, select: { id: true, grapheme: true, alias: true, phoneme: true, caseSensitive: true } } },
  });
  if (!dict) throw dictNotFound(input.dictId, 'pronunciation_dict_id');
  // The version comes from the very rows compiled (one SELECT), so the two always agree.
  const compiled = compilePronunciation(dict.entries);
  cache.set(input.dictId, dict.entries[0]?.id ?? '', compiled);
  return compiled;
}
