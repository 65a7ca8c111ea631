// The operators' files over the gateway's metrics: the Grafana dashboard (ops/grafana/svc.json)
// and the alerting rules (ops/prometheus/svc-alerts.yml) name only series the gateway exports,
// so a renamed metric fails here instead of drawing an empty panel or an alert that never fires.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { GatewayMetrics } from '../gateway/metrics/gateway-metrics.ts';
import { RequestLogMetrics } from '../gateway/request-log/request-log-metrics.ts';

const ROOT = join(import.meta.dirname, '..');
const dashboard = JSON.parse(readFileSync(join(ROOT, 'ops/grafana/svc.json'), 'utf8')) as {
  uid: string;
  panels: { id: number; type: string; title: string; gridPos: { x: number; w: number }; targets?: { expr: string }[] }[];
};
const rules = readFileSync(join(ROOT, 'ops/prometheus/svc-alerts.yml'), 'utf8');
const alertExprs = [...rules.matchAll(/^\s+expr: (.+)$/gm)].map((m) => m[1]!);
const alertNames = [...rules.matchAll(/^\s+- alert: (\w+)$/gm)].map((m) => m[1]!);

/** Every series name the gateway exports (a histogram's _bucket, _sum and _count included). */
async function exportedSeries(): Promise<Set<string>> {
  const metrics = new GatewayMetrics();
  const registry: Registry = metrics.registry;
  new RequestLogMetrics(registry, () => 0);
  const names = new Set<string>();
  for (const m of await registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${m.name}${suffix}`);
  }
  return names;
}

const seriesIn = (expr: string) => [...expr.matchAll(/\b((?:svc|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]!);

describe('ops/grafana/svc.json', () => {
  it('charts only series the gateway exports, each panel within the 24-column grid, ids unique', async () => {
    const exported = await exportedSeries();
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    expect(exprs.length).toBeGreaterThan(20);
    for (const expr of exprs) for (const series of seriesIn(expr)) expect(exported, `${series} in ${expr}`).toContain(series);
    for (const p of dashboard.panels) expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    expect(dashboard.uid).toBe('svc-gateway');
  });

  it('has the request log, upstream health, first audio and credit panels the alerts watch', () => {
    const all = JSON.stringify(dashboard);
    for (const series of ['svc_request_log_rows_dropped_total', 'svc_upstream_up', 'tts_first_audio', 'svc_credit_debit_failures_total'])
      expect(all).toContain(series);
  });
});

describe('ops/prometheus/svc-alerts.yml', () => {
  it('alerts on the error rate, p95 first audio, credit holds, upstreams down and dropped log rows, over exported series only', async () => {
    expect(alertNames).toEqual([
      'SvcHighErrorRate',
      'SvcSlowFirstAudio',
      'SvcSlowRealtimeFirstAudio',
      'SvcUpstreamDown',
      'SvcCreditDebitsFailing',
      'SvcCreditHoldsRefusing',
      'SvcRequestLogDropping',
    ]);
    expect(alertExprs).toHaveLength(alertNames.length);
    const exported = await exportedSeries();
    for (const expr of alertExprs) for (const series of seriesIn(expr)) expect(exported, `${series} in ${expr}`).toContain(series);
  });
});
