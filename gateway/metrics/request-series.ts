// The two series every answer updates: svc_http_requests_total and
// svc_http_request_duration_seconds. Kept as plain counters in nested maps (one level per
// label value) and turned into prom-client's values only when /metrics is scraped: counting
// through prom-client costs a label object, a hash string and its validation per call (~5 %
// of the gateway's maximum throughput on the chat route, bench/ab-gateway.ts). prom-client's
// registry still formats the exposition, so the output is the same as with its own metrics.
import type { Registry } from 'prom-client';
import { LabelTree } from './label-tree.ts';

interface CountEntry {
  labels: Record<string, string>;
  count: number;
}

interface DurationEntry {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative); the last slot is above the highest bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/** The labels object of one combination of label values. */
const labelsOf = (names: readonly string[], values: readonly string[]) => Object.fromEntries(names.map((n, i) => [n, values[i]!]));

export class RequestSeries {
  private readonly counts = new LabelTree<CountEntry>((values) => ({ labels: labelsOf(['route', 'method', 'status', 'model'], values), count: 0 }));
  private readonly durations: LabelTree<DurationEntry>;
  private readonly key4: string[] = ['', '', '', ''];
  private readonly key3: string[] = ['', '', ''];

  constructor(
    registry: Registry,
    private readonly buckets: readonly number[],
  ) {
    this.durations = new LabelTree((values) => ({
      labels: labelsOf(['route', 'method', 'status'], values),
      buckets: new Array<number>(buckets.length + 1).fill(0),
      sum: 0,
      count: 0,
    }));
    const counts = this.counts;
    const durations = this.durations;
    // Objects prom-client's registry accepts as metrics: a name, get() and reset().
    registry.registerMetric({
      name: 'svc_http_requests_total',
      get: async () => ({
        name: 'svc_http_requests_total',
        help: 'HTTP requests answered, by route pattern, method, status and model (empty when none was resolved).',
        type: 'counter',
        aggregator: 'sum',
        values: [...counts.entries()].map((e) => ({ labels: e.labels, value: e.count })),
      }),
      reset: () => counts.clear(),
    } as never);
    const name = 'svc_http_request_duration_seconds';
    registry.registerMetric({
      name,
      get: async () => ({
        name,
        help: 'Time from request arrival to the end of the response (whole stream for streaming responses).',
        type: 'histogram',
        aggregator: 'sum',
        values: [...durations.entries()].flatMap((e) => {
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
      reset: () => durations.clear(),
    } as never);
  }

  observe(route: string, method: string, status: string, model: string, seconds: number): void {
    const k4 = this.key4;
    k4[0] = route;
    k4[1] = method;
    k4[2] = status;
    k4[3] = model;
    this.counts.get(k4).count++;
    const k3 = this.key3;
    k3[0] = route;
    k3[1] = method;
    k3[2] = status;
    const d = this.durations.get(k3);
    let i = 0;
    while (i < this.buckets.length && seconds > this.buckets[i]!) i++;
    d.buckets[i]!++;
    d.sum += seconds;
    d.count++;
  }
}
