// With tracing on, each request-log row carries its request's trace id, so an OpenTelemetry
// backend can be opened from a row: the real gateway runtime exporting to a scripted OTLP
// collector, a throw-away SQLite or PostgreSQL database.
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startOtlpCollector, type OtlpCollector } from '../../test/support/otlp-collector.ts';

let h: GatewayHarness;
let collector: OtlpCollector;

beforeAll(async () => {
  collector = await startOtlpCollector();
  h = await startGateway({ env: { SVC_LOG_FLUSH_MS: '60000', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } });
});

afterAll(async () => {
  await h?.close();
  await collector?.close();
});

it("a row's trace id is its request's trace: the caller's traceparent continued, and the server span's", async () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const requestId = `traced-${Date.now()}`;
  const res = await fetch(`${h.url}/v1/models`, {
    headers: { authorization: `Bearer ${h.key}`, 'x-request-id': requestId, traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
  });
  expect(res.status).toBe(200);
  await res.text();
  await h.runtime.ctx.requestLog!.flush();
  const [row] = await h.testDb.db.prisma.requestLog.findMany({ where: { requestId } });
  expect(row?.traceId).toBe(traceId);
  // The span the backend holds for it carries the same request id.
  await h.runtime.ctx.tracing!.shutdown(5_000);
  await vi.waitFor(() => expect(collector.spans.find((s) => s.attributes['svc.request_id'] === requestId)?.traceId).toBe(traceId), { timeout: 10_000 });
});
