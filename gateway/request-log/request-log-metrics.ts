import { Counter, Gauge, type Registry } from 'prom-client';

/** The request log's own series, on the gateway's registry (docs/logs.md, "Operating it"). */
export class RequestLogMetrics {
  private readonly rows: Counter<'table'>;
  private readonly drops: Counter<'reason'>;
  private readonly failures: Counter;
  private readonly prunedRows: Counter;

  constructor(registry: Registry, buffered: () => number) {
    this.rows = new Counter({
      name: 'svc_request_log_rows_written_total',
      help: 'Request-log rows written, by table.',
      labelNames: ['table'],
      registers: [registry],
    });
    this.drops = new Counter({
      name: 'svc_request_log_rows_dropped_total',
      help: 'Request-log rows never written: buffer_full (more waiting than SVC_LOG_BUFFER_ROWS), write_failed (the database refused them until the buffer overflowed or the process stopped).',
      labelNames: ['reason'],
      registers: [registry],
    });
    this.failures = new Counter({
      name: 'svc_request_log_write_failures_total',
      help: 'Request-log batches the database refused (kept and retried).',
      registers: [registry],
    });
    this.prunedRows = new Counter({
      name: 'svc_request_log_rows_pruned_total',
      help: 'Request-log rows deleted by retention and the size cap.',
      registers: [registry],
    });
    new Gauge({
      name: 'svc_request_log_buffered_rows',
      help: 'Request-log rows and turns waiting to be written.',
      registers: [registry],
      collect() {
        this.set(buffered());
      },
    });
  }

  written(rows: number, turns: number): void {
    if (rows > 0) this.rows.labels('requests').inc(rows);
    if (turns > 0) this.rows.labels('turns').inc(turns);
  }

  dropped(reason: 'buffer_full' | 'write_failed', n = 1): void {
    this.drops.labels(reason).inc(n);
  }

  writeFailed(): void {
    this.failures.inc();
  }

  pruned(n: number): void {
    if (n > 0) this.prunedRows.inc(n);
  }
}
