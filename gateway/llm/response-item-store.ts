// The output items of translated responses (gateway/llm/responses-via-chat.ts), kept so that a
// later request may name them by `item_reference` -- what the Vercel AI SDK sends for an
// assistant's earlier text when `store` is on (its default). In memory, per org, bounded by
// bytes and by age: a reference to an item this replica no longer has is refused with a 400
// that says to send the item itself. Engines that serve the Responses API keep their own.
import type { JsonObject } from './responses-via-chat.ts';

export interface ItemStoreLimits {
  /** Total JSON bytes kept; the oldest items go first. */
  maxBytes: number;
  ttlMs: number;
}

export const DEFAULT_ITEM_STORE_LIMITS: ItemStoreLimits = { maxBytes: 32 * 1024 * 1024, ttlMs: 60 * 60 * 1000 };

interface Entry {
  json: string;
  bytes: number;
  expiresAt: number;
}

export class ResponseItemStore {
  // Insertion order is age order (one TTL for all), so eviction walks from the front.
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly limits: ItemStoreLimits = DEFAULT_ITEM_STORE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get storedBytes(): number {
    return this.bytes;
  }

  /** Keeps each item that has an id, under its org; items larger than the whole budget are not kept. */
  put(orgId: string, items: readonly JsonObject[]): void {
    for (const item of items) {
      if (typeof item.id !== 'string') continue;
      const json = JSON.stringify(item);
      const bytes = Buffer.byteLength(json);
      if (bytes > this.limits.maxBytes) continue;
      const key = `${orgId}\u0000${item.id}`;
      this.remove(key);
      this.entries.set(key, { json, bytes, expiresAt: this.now() + this.limits.ttlMs });
      this.bytes += bytes;
    }
    this.evict();
  }

  /** The item, if this org stored it and it has not expired; a fresh copy each time. */
  get(orgId: string, id: string): JsonObject | undefined {
    const key = `${orgId}\u0000${id}`;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.remove(key);
      return undefined;
    }
    return JSON.parse(entry.json) as JsonObject;
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }

  private evict(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) {
      if (this.bytes <= this.limits.maxBytes && entry.expiresAt > now) break;
      this.remove(key);
    }
  }
}
