import { describe, expect, it } from 'vitest';
import { CSV_HEADER, csvLine, exportText, type RequestLogRecord } from './present-request-log.ts';

const record = (over: Partial<RequestLogRecord> = {}): RequestLogRecord => ({
  id: 'log_1',
  object: 'request_log',
  request_id: 'req_1',
  created_at: '2026-11-27T10:00:00.000Z',
  kind: 'http',
  method: 'POST',
  route: '/v1/chat/completions',
  model: 'm',
  status: 200,
  error_code: null,
  key: { id: 'key_1', name: 'laptop' },
  upstreams: [],
  served_by: null,
  failover_reason: null,
  user_agent: 'curl/8',
  trace_id: null,
  timings: { ttfb_ms: 1.5, first_audio_ms: null, first_audible_ms: null, total_ms: 2 },
  usage: { input_tokens: 1, output_tokens: 2, characters: 0, audio_ms: 0 },
  cost_usd: '0.000010',
  content: null,
  ...over,
});

describe('the CSV export', () => {
  it('one CRLF line per record, empty cells for nulls, in the header order', () => {
    const line = csvLine(record());
    expect(line.endsWith('\r\n')).toBe(true);
    const cells = line.trimEnd().split(',');
    expect(cells).toHaveLength(CSV_HEADER.trimEnd().split(',').length);
    expect(cells.slice(0, 9)).toEqual(['log_1', '2026-11-27T10:00:00.000Z', 'req_1', 'http', 'POST', '/v1/chat/completions', 'm', '200', '']);
  });

  it('quotes commas, quotes and line breaks, and defuses cells a spreadsheet would run as formulas', () => {
    const line = csvLine(record({ key: { id: 'k', name: '=HYPERLINK("x")' }, user_agent: 'a, "b"\nc', content: { request: '@SUM(1)', response: '-2' } }));
    expect(line).toContain(`"'=HYPERLINK(""x"")"`);
    expect(line).toContain('"a, ""b""\nc"');
    expect(line).toContain(",'@SUM(1),'-2\r\n");
  });

  it('JSON Lines: one record per line, parsed back as it was', () => {
    const text = exportText([record(), record({ id: 'log_2' })], 'jsonl');
    expect(text.split('\n')).toHaveLength(3);
    expect(JSON.parse(text.split('\n')[1]!)).toEqual(record({ id: 'log_2' }));
    expect(exportText([], 'csv')).toBe(CSV_HEADER);
  });
});
