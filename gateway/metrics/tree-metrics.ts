// Counters and histograms for series updated on every request, frame or span, kept as plain
// numbers in nested maps (one level per label value: label-tree.ts) and turned into
// prom-client's values only when /metrics is scraped. Counting through prom-client costs a label
// object, a hash string and its validation per call, even through a cached label child
// (docs/performance.md). prom-client's registry still formats the exposition, so the output is
// the same as its own Counter's and Histogram's (tree-metrics.unit.test.ts).
import type { Registry } from 'prom-client';
import { LabelTree } from './label-tree.ts';

interface Definition {
  name: string;
  help: string;
  labelNames: readonly string[];
}

interface CountEntry {
  labels: Record<string, string>;
  count: number;
}

interface BucketsEntry {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative); the last slot is above the highest bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/** The labels object of one combination of label values. */
const labelsOf = (names: readonly string[], values: readonly string[]) => Object.fromEntries(names.map((n, i) => [n, values[i]!]));

/** A counter; `inc` takes the label values in the order of `labelNames`. */
export class TreeCounter {
  private readonly entries: LabelTree<CountEntry>;

  constructor(registry: Registry, { name, help, labelNames }: Definition) {
    const entries = (this.entries = new LabelTree((values) => ({ labels: labelsOf(labelNames, values), count: 0 })));
    // Objects prom-client's registry accepts as metrics: a name, get() and reset().
    registry.registerMetric({
      name,
      get: async () => ({ name, help, type: 'counter', aggregator: 'sum', values: [...entries.entries()].map((e) => ({ labels: e.labels, value: e.count })) }),
      reset: () => entries.clear(),
    } as never);
  }

  inc(values: readonly string[], by = 1): void {
    this.entries.get(values).count += by;
  }
}

/** A histogram; `observe` takes the label values in the order of `labelNames`. */
export class TreeHistogram {
  private readonly entries: LabelTree<BucketsEntry>;
  private readonly bounds: readonly number[];

  constructor(registry: Registry, { name, help, labelNames, buckets }: Definition & { buckets: readonly number[] }) {
    this.bounds = buckets;
    const entries = (this.entries = new LabelTree((values) => ({
      labels: labelsOf(labelNames, values),
      buckets: new Array<number>(buckets.length + 1).fill(0),
      sum: 0,
      count: 0,
    })));
    registry.registerMetric({
      name,
      get: async () => ({
        name,
        help,
        type: 'histogram',
        aggregator: 'sum',
        values: [...entries.entries()].flatMap((e) => {
          let cumulative = 0;
          return [
            // `le` first, as prom-client orders a bucket's labels.
            ...buckets.map((le, i) => ({ labels: { le, ...e.labels }, value: (cumulative += e.buckets[i]!), metricName: `${name}_bucket` })),
            { labels: { le: '+Inf', ...e.labels }, value: e.count, metricName: `${name}_bucket` },
            { labels: e.labels, value: e.sum, metricName: `${name}_sum` },
            { labels: e.labels, value: e.count, metricName: `${name}_count` },
          ];
        }),
      }),
      reset: () => entries.clear(),
    } as never);
  }

  observe(values: readonly string[], value: number): void {
    const e = this.entries.get(values);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    e.buckets[i]!++;
    e.sum += value;
    e.count++;
  }
}
