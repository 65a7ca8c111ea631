// The per-answer series are counted by hand but must be scraped exactly as prom-client's own
// Counter and Histogram would expose the same observations.
import { Counter, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestSeries } from './request-series.ts';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const observations: [string, string, string, string, number][] = [
  ['/v1/chat/completions', 'POST', '200', 'llama', 0.0004],
  ['/v1/chat/completions', 'POST', '200', 'llama', 0.001],
  ['/v1/chat/completions', 'POST', '200', 'qwen', 0.02],
  ['/v1/chat/completions', 'POST', '402', '', 0.0021],
  ['/v1/models', 'GET', '200', '', 3.5],
  ['unmatched', 'GET', '404', '', 0.00005],
];

describe('RequestSeries', () => {
  it("exposes what prom-client's Counter and Histogram expose for the same observations", async () => {
    const ours = new Registry();
    const series = new RequestSeries(ours, BUCKETS);
    const theirs = new Registry();
    const counter = new Counter({
      name: 'svc_http_requests_total',
      help: 'HTTP requests answered, by route pattern, method, status and model (empty when none was resolved).',
      labelNames: ['route', 'method', 'status', 'model'],
      registers: [theirs],
    });
    const histogram = new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'Time from request arrival to the end of the response (whole stream for streaming responses).',
      labelNames: ['route', 'method', 'status'],
      buckets: BUCKETS,
      registers: [theirs],
    });
    for (const [route, method, status, model, seconds] of observations) {
      series.observe(route, method, status, model, seconds);
      counter.labels(route, method, status, model).inc();
      histogram.labels(route, method, status).observe(seconds);
    }
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
    const series = new RequestSeries(registry, BUCKETS);
    series.observe('/v1/models', 'GET', '200', '', 0.002);
    registry.resetMetrics();
    series.observe('/v1/models', 'GET', '200', '', 0.002);
    expect(await registry.metrics()).toContain('svc_http_requests_total{route="/v1/models",method="GET",status="200",model=""} 1');
  });
});
