// Series counted by hand (tree-metrics.ts) must be scraped exactly as prom-client's own Counter
// and Histogram would expose the same observations.
import { Counter, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { TreeCounter, TreeHistogram } from './tree-metrics.ts';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const observations: [string, string, string, string, number][] = [
  ['/v1/chat/completions', 'POST', '200', 'llama', 0.0004],
  ['/v1/chat/completions', 'POST', '200', 'llama', 0.001],
  ['/v1/chat/completions', 'POST', '200', 'qwen', 0.02],
  ['/v1/chat/completions', 'POST', '402', '', 0.0021],
  ['/v1/models', 'GET', '200', '', 3.5],
  ['unmatched', 'GET', '404', '', 0.00005],
];

const COUNTER = {
  name: 'svc_http_requests_total',
  help: 'HTTP requests answered, by route pattern, method, status and model (empty when none was resolved).',
  labelNames: ['route', 'method', 'status', 'model'],
};
const HISTOGRAM = {
  name: 'svc_http_request_duration_seconds',
  help: 'Time from request arrival to the end of the response (whole stream for streaming responses).',
  labelNames: ['route', 'method', 'status'],
  buckets: BUCKETS,
};

describe('TreeCounter and TreeHistogram', () => {
  it("expose what prom-client's Counter and Histogram expose for the same observations", async () => {
    const ours = new Registry();
    const tree = { counter: new TreeCounter(ours, COUNTER), histogram: new TreeHistogram(ours, HISTOGRAM) };
    const theirs = new Registry();
    const counter = new Counter({ ...COUNTER, registers: [theirs] });
    const histogram = new Histogram({ ...HISTOGRAM, registers: [theirs] });
    // One array for every call, as the gateway passes them: nothing may keep it.
    const four = ['', '', '', ''];
    const three = ['', '', ''];
    for (const [route, method, status, model, seconds] of observations) {
      four.splice(0, 4, route, method, status, model);
      three.splice(0, 3, route, method, status);
      tree.counter.inc(four);
      tree.histogram.observe(three, seconds);
      counter.labels(route, method, status, model).inc();
      histogram.labels(route, method, status).observe(seconds);
    }
    // Counted by more than one at a time (micro-USD debited).
    tree.counter.inc(['/v1/models', 'GET', '200', ''], 2500);
    counter.labels('/v1/models', 'GET', '200', '').inc(2500);
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    // And as JSON (exemplars, which these series never have, left aside).
    const withoutExemplars = (metrics: MetricObjectWithValues<MetricValue<string>>[]) =>
      metrics.map((m) => ({ ...m, values: m.values.map((v) => Object.fromEntries(Object.entries(v).filter(([k]) => k !== 'exemplar'))) }));
    expect(withoutExemplars(await ours.getMetricsAsJSON())).toEqual(withoutExemplars(await theirs.getMetricsAsJSON()));
    expect(text).toContain('svc_http_request_duration_seconds_bucket{le="0.001",route="/v1/chat/completions",method="POST",status="200"} 2');
    expect(text).toContain('svc_http_requests_total{route="/v1/chat/completions",method="POST",status="200",model="llama"} 2');
  });

  it('starts again from zero when the registry is reset', async () => {
    const registry = new Registry();
    const counter = new TreeCounter(registry, COUNTER);
    const histogram = new TreeHistogram(registry, HISTOGRAM);
    counter.inc(['/v1/models', 'GET', '200', '']);
    histogram.observe(['/v1/models', 'GET', '200'], 0.002);
    registry.resetMetrics();
    counter.inc(['/v1/models', 'GET', '200', '']);
    histogram.observe(['/v1/models', 'GET', '200'], 0.002);
    const text = await registry.metrics();
    expect(text).toContain('svc_http_requests_total{route="/v1/models",method="GET",status="200",model=""} 1');
    expect(text).toContain('svc_http_request_duration_seconds_count{route="/v1/models",method="GET",status="200"} 1');
  });
});
