// The output items of translated responses (gateway/llm/responses-via-chat.ts), kept so that a
// later request may name them by `item_reference` -- what the Vercel AI SDK sends for an
// assistant's earlier text when `store` is on (its default). In memory, per org, bounded by age
// and by bytes: each org within its own quota (its oldest items make room for its new ones; no
// org's items ever make room for another's), and all orgs within a total (past it, expired items
// go first, then new items are not kept). A reference to an item this replica no longer has is
// refused with a 400 that says to send the item itself. Engines that serve the Responses API
// keep their own.
import type { JsonObject } from './responses-via-chat.ts';

export interface ItemStoreLimits {
  /** JSON bytes one org's items may take; its oldest go first. */
  maxBytesPerOrg: number;
  /** JSON bytes of every org's items together. */
  maxBytes: number;
  ttlMs: number;
}

export const DEFAULT_ITEM_STORE_LIMITS: ItemStoreLimits = { maxBytesPerOrg: 2 * 1024 * 1024, maxBytes: 64 * 1024 * 1024, ttlMs: 60 * 60 * 1000 };

interface Entry {
  json: string;
  bytes: number;
  expiresAt: number;
}

/** One org's items; insertion order is age order (one TTL for all), so eviction walks from the front. */
interface OrgItems {
  entries: Map<string, Entry>;
  bytes: number;
}

export class ResponseItemStore {
  private readonly orgs = new Map<string, OrgItems>();
  private bytes = 0;
  private count = 0;

  constructor(
    private readonly limits: ItemStoreLimits = DEFAULT_ITEM_STORE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.count;
  }

  get storedBytes(): number {
    return this.bytes;
  }

  /** Keeps each item that has an id, under its org; an item larger than the org's quota, or for which the whole store has no room, is not kept. */
  put(orgId: string, items: readonly JsonObject[]): void {
    for (const item of items) {
      if (typeof item.id !== 'string') continue;
      const json = JSON.stringify(item);
      const bytes = Buffer.byteLength(json);
      if (bytes > this.limits.maxBytesPerOrg) continue;
      const org = this.orgs.get(orgId) ?? { entries: new Map<string, Entry>(), bytes: 0 };
      this.remove(org, item.id);
      this.evict(org, this.limits.maxBytesPerOrg - bytes);
      if (this.bytes + bytes > this.limits.maxBytes) {
        this.dropExpired();
        if (this.bytes + bytes > this.limits.maxBytes) continue;
      }
      this.orgs.set(orgId, org);
      org.entries.set(item.id, { json, bytes, expiresAt: this.now() + this.limits.ttlMs });
      org.bytes += bytes;
      this.bytes += bytes;
      this.count += 1;
    }
    if (this.orgs.get(orgId)?.entries.size === 0) this.orgs.delete(orgId);
  }

  /** The item, if this org stored it and it has not expired; a fresh copy each time. */
  get(orgId: string, id: string): JsonObject | undefined {
    const entry = this.entry(orgId, id);
    return entry && (JSON.parse(entry.json) as JsonObject);
  }

  /** The JSON size of the item, if this org has it (what a reference to it expands to), without reading it. */
  bytesOf(orgId: string, id: string): number | undefined {
    return this.entry(orgId, id)?.bytes;
  }

  private entry(orgId: string, id: string): Entry | undefined {
    const org = this.orgs.get(orgId);
    const entry = org?.entries.get(id);
    if (!org || !entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.remove(org, id);
      if (org.entries.size === 0) this.orgs.delete(orgId);
      return undefined;
    }
    return entry;
  }

  /** Takes out one item (its org stays in the map: whoever removes the last one drops the org). */
  private remove(org: OrgItems, id: string): void {
    const entry = org.entries.get(id);
    if (!entry) return;
    org.entries.delete(id);
    org.bytes -= entry.bytes;
    this.bytes -= entry.bytes;
    this.count -= 1;
  }

  /** The org's expired items, then its oldest, until it holds at most `bytes`. */
  private evict(org: OrgItems, bytes: number): void {
    const now = this.now();
    for (const [id, entry] of org.entries) {
      if (org.bytes <= bytes && entry.expiresAt > now) break;
      this.remove(org, id);
    }
  }

  private dropExpired(): void {
    for (const [orgId, org] of this.orgs) {
      this.evict(org, Infinity);
      if (org.entries.size === 0) this.orgs.delete(orgId);
    }
  }
}
