/**
 * Values kept per label-value combination in nested maps, one level per label: a lookup on
 * the per-request path builds no key string (prom-client's own lookups hash a label object).
 */
export class LabelTree<E> {
  private readonly root = new Map<string, unknown>();

  /** `make` gives the value for a combination seen for the first time. */
  constructor(private readonly make: (values: readonly string[]) => E) {}

  get(values: readonly string[]): E {
    let level = this.root;
    for (let i = 0; i < values.length - 1; i++) {
      let next = level.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    const last = values[values.length - 1]!;
    let entry = level.get(last) as E | undefined;
    if (entry === undefined) {
      entry = this.make(values);
      level.set(last, entry);
    }
    return entry;
  }

  /** Every value, in insertion order (values are never Maps, the inner levels always are). */
  *entries(level: Map<string, unknown> = this.root): Generator<E> {
    for (const value of level.values()) {
      if (value instanceof Map) yield* this.entries(value as Map<string, unknown>);
      else yield value as E;
    }
  }

  clear(): void {
    this.root.clear();
  }
}
