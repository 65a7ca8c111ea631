// URL redaction of the access log (gateway/redact-url.ts) against the regular expression it
// replaced (test/support/regex-redact-url.ts), on ordinary URLs and on the shapes that made the
// expression backtrack. Event-loop time per call; medians over --runs, after warm-up.
//   npx tsx bench/redact-url.ts [--runs 21]
import { parseArgs } from 'node:util';
import { redactUrl } from '../gateway/redact-url.ts';
import { redactUrlByRegex } from '../test/support/regex-redact-url.ts';
import { median, table } from './lib/load.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '21' } } });
const runs = Number(values.runs);

const URLS: [string, string][] = [
  ['no query', '/v1/chat/completions'],
  ['ws query with key', '/stt/websocket?model=local-stt&sample_rate=16000&api_key=sk_svc_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'],
  ['/health? + 16,000 "?"', `/health?${'?'.repeat(16_000)}`],
  ['/health? + 8,000 "a?"', `/health?${'a?'.repeat(8_000)}`],
  ['/health? + 16,000 "&"', `/health?${'&'.repeat(16_000)}`],
  ['/health?a=1& + 16,000 "?"', `/health?a=1&${'?'.repeat(16_000)}`],
  ['/health? + 8,000 "=&"', `/health?${'=&'.repeat(8_000)}`],
  ['/health? + 5,333 "a=&"', `/health?${'a=&'.repeat(5_333)}`],
  ['/health? + 2,000 "%61pi=&"', `/health?${'%61pi=&'.repeat(2_000)}`],
];

/** Milliseconds per call: enough calls per sample to take ~10 ms or more. */
function perCall(fn: (url: string) => string, url: string): number {
  let calls = 1;
  for (;;) {
    const start = performance.now();
    for (let i = 0; i < calls; i++) fn(url);
    const ms = performance.now() - start;
    if (ms >= 10) return ms / calls;
    calls *= 4;
  }
}

const rows = URLS.map(([label, url]) => {
  const sample = (fn: (u: string) => string) => {
    perCall(fn, url); // warm-up
    return median(Array.from({ length: runs }, () => perCall(fn, url)));
  };
  const regex = sample(redactUrlByRegex);
  const scan = sample(redactUrl);
  return { url: label, length: url.length, 'regex µs': regex * 1000, 'scan µs': scan * 1000 };
});
console.log(table(rows));
