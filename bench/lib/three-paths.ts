// The gateway process and its three request paths (LLM chat, TTS speech, STT batch), each
// with its own fast loopback upstream in its own process, for bench/load.ts and bench/soak.ts.
// Every path is given twice: straight to its upstream, and through the gateway.
import { randomBytes } from 'node:crypto';
import { wavHeader } from '../../gateway/audio/wav.ts';
import { openDatabase } from '../../server/db/database.ts';
import { newId } from '../../server/db/ids.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { benchFixture, CHAT_BODY } from './bench-fixture.ts';
import type { RequestSpec } from './load.ts';
import { startBundled, startTs } from './processes.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

export interface BenchPath {
  name: string;
  direct: { origin: string; spec: RequestSpec };
  gateway: { origin: string; spec: RequestSpec };
}

export const SPEECH_TEXT = 'The quick brown fox jumps over the lazy dog.';

/** Starts the upstreams and the gateway; `metricsPort` also serves the gateway's /metrics there (loopback). */
export async function startThreePaths(options: { metricsPort?: number } = {}) {
  const llm = await startTs('bench/upstream-server.ts');
  const llmStream = await startTs('bench/upstream-server.ts', { BENCH_UPSTREAM_MODE: 'stream', BENCH_STREAM_DELAY_MS: '20' });
  const tts = await startTs('bench/voice-upstream-server.ts', { BENCH_VOICE: 'tts' });
  const stt = await startTs('bench/voice-upstream-server.ts', { BENCH_VOICE: 'stt' });
  const fx = await benchFixture(llm.url);

  // The speech models, a streaming LLM, and a platform voice whose profile names the upstream's voice.
  const db = openDatabase(fx.databaseUrl);
  await upsertModel(db.prisma, checkProtocol, {
    id: 'bench-stream',
    modality: 'llm',
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url: llmStream.url, protocol: 'openai' },
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: 'bench-tts',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: tts.url, protocol: 'openai' },
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: 'bench-stt',
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: stt.url, protocol: 'openai' },
  });
  const voiceId = newId('voice');
  await db.prisma.voice.create({
    data: {
      id: voiceId,
      orgId: null,
      name: 'bench voice',
      tags: [],
      profiles: { create: { id: newId('vpr'), modelId: 'bench-tts', upstreamId: 'alloy', status: 'ready' } },
    },
  });
  await db.close();

  const gateway = await startBundled('bench/gateway-server.ts', {
    SVC_DATA_DIR: fx.dataDir,
    DATABASE_URL: fx.databaseUrl,
    SVC_MODELS_FILE: '/nonexistent',
    ...(options.metricsPort ? { SVC_METRICS_PORT: String(options.metricsPort) } : {}),
  });
  await new Promise((r) => setTimeout(r, 1500)); // first health check of the upstreams

  const auth = { authorization: `Bearer ${fx.key}` };
  const json = { 'content-type': 'application/json' };
  // One second of 16 kHz 16-bit mono noise, as a multipart upload.
  const pcm = randomBytes(32000);
  const wav = Buffer.concat([wavHeader({ sampleRate: 16000, channels: 1, encoding: 'pcm_s16le', dataByteLength: pcm.length }), pcm]);
  const boundary = `----svcbench${randomBytes(8).toString('hex')}`;
  const multipart = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nbench-stt\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
    ),
    wav,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const form = { 'content-type': `multipart/form-data; boundary=${boundary}` };
  const origin = (u: string) => u.replace(/\/v1$/, '');
  const streamBody = JSON.stringify({ model: 'bench-stream', stream: true, messages: [{ role: 'user', content: 'Say hello.' }] });

  const paths: Record<'llm' | 'llmStream' | 'tts' | 'stt', BenchPath> = {
    llm: {
      name: 'LLM chat',
      direct: { origin: origin(llm.url), spec: { path: '/v1/chat/completions', method: 'POST', headers: json, body: CHAT_BODY } },
      gateway: { origin: gateway.url, spec: { path: '/v1/chat/completions', method: 'POST', headers: { ...json, ...auth }, body: CHAT_BODY } },
    },
    llmStream: {
      name: 'LLM chat stream',
      direct: { origin: origin(llmStream.url), spec: { path: '/v1/chat/completions', method: 'POST', headers: json, body: streamBody } },
      gateway: { origin: gateway.url, spec: { path: '/v1/chat/completions', method: 'POST', headers: { ...json, ...auth }, body: streamBody } },
    },
    tts: {
      name: 'TTS speech (pcm)',
      direct: {
        origin: origin(tts.url),
        spec: {
          path: '/v1/audio/speech',
          method: 'POST',
          headers: json,
          body: JSON.stringify({ model: 'bench-tts', input: SPEECH_TEXT, voice: 'alloy', response_format: 'pcm' }),
        },
      },
      gateway: {
        origin: gateway.url,
        spec: {
          path: '/v1/audio/speech',
          method: 'POST',
          headers: { ...json, ...auth },
          body: JSON.stringify({ model: 'bench-tts', input: SPEECH_TEXT, voice: voiceId, response_format: 'pcm' }),
        },
      },
    },
    stt: {
      name: 'STT batch (1 s WAV)',
      direct: { origin: origin(stt.url), spec: { path: '/v1/audio/transcriptions', method: 'POST', headers: form, body: multipart } },
      gateway: { origin: gateway.url, spec: { path: '/v1/audio/transcriptions', method: 'POST', headers: { ...form, ...auth }, body: multipart } },
    },
  };

  return {
    gateway,
    paths,
    databaseUrl: fx.databaseUrl,
    stop() {
      for (const p of [gateway, llm, llmStream, tts, stt]) p.child.kill('SIGTERM');
    },
  };
}

/** One request, to check a path works before it is measured. */
export async function checkPath(name: string, side: BenchPath['direct']): Promise<void> {
  const { spec } = side;
  const res = await fetch(side.origin + spec.path, {
    method: spec.method,
    headers: spec.headers,
    body: typeof spec.body === 'string' ? spec.body : spec.body && new Uint8Array(spec.body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${name}: ${side.origin} answered ${res.status}: ${text.slice(0, 300)}`);
}
