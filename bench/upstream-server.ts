// A fast loopback OpenAI-compatible upstream for the benchmarks (the scripted server).
import { startScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';

const mode = process.env.BENCH_UPSTREAM_MODE ?? 'ok';
const upstream = await startScriptedUpstream(
  mode === 'stream'
    ? {
        kind: 'stream',
        chunks: process.env.BENCH_STREAM_CHUNKS ? (JSON.parse(process.env.BENCH_STREAM_CHUNKS) as string[]) : ['Hello', ' there', '!'],
        delayMs: Number(process.env.BENCH_STREAM_DELAY_MS ?? 0),
        firstDelayMs: Number(process.env.BENCH_FIRST_DELAY_MS ?? 0),
      }
    : { kind: 'ok' },
);
console.log(`listening ${upstream.baseUrl}`);
