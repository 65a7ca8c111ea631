// "Copy as code" runs: each snippet the playground shows is written to a file and run as a user
// would paste it — curl in bash, the JavaScript under Node, the Python under python3 with
// requests — with SVC_API_KEY set, against a real gateway (flite, pocketsphinx, a scripted
// OpenAI-compatible LLM). The Python socket sample needs the `websockets` package, which this
// machine does not have: it is compiled, not run.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWav } from '../../../gateway/audio/wav.ts';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';
import { upsertModel } from '../../../server/services/models/upsert-model.ts';
import type { GatewayHarness } from '../../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../../test/support/scripted-openai-upstream.ts';
import { STT_PRICE, settleRecognizers } from '../../../test/support/stt-routes.ts';
import { startTtsGateway } from '../../../test/support/tts-routes.ts';
import { codeFor, KEY_VARIABLE, type CodeRequest, type Language } from './code-samples.ts';

let h: GatewayHarness;
let llm: ScriptedUpstream;
let dir: string;

beforeAll(async () => {
  h = await startTtsGateway();
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['It ', 'is ', 'sunny.'], usage: { prompt_tokens: 9, completion_tokens: 3 } });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'chat-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  dir = mkdtempSync(join(tmpdir(), 'svc-code-samples-'));
  // The recording a transcription sample sends, made by flite.
  const flite = spawnSync('flite', ['-voice', 'slt', '-o', join(dir, 'recording.wav'), 'Hello world, this is a test.']);
  expect(flite.status).toBe(0);
}, 60_000);

afterAll(async () => {
  await llm?.close();
  await settleRecognizers();
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const FILES: Record<Language, { file: string; command: string[] }> = {
  curl: { file: 'sample.sh', command: ['bash', 'sample.sh'] },
  javascript: { file: 'sample.mjs', command: [process.execPath, 'sample.mjs'] },
  python: { file: 'sample.py', command: ['python3', 'sample.py'] },
};

/**
 * Runs the snippet in `dir` as pasted, with the key in SVC_API_KEY; its stdout. Asynchronously:
 * the gateway answering it runs in this process.
 */
async function run(request: CodeRequest, language: Language): Promise<string> {
  const code = codeFor(request, language);
  expect(code).not.toContain(h.key);
  const { file, command } = FILES[language];
  writeFileSync(join(dir, file), code);
  const child = spawn(command[0]!, command.slice(1), {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', [KEY_VARIABLE]: h.key },
    timeout: 30_000,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const status = await new Promise<number | null>((resolve) => child.once('close', resolve));
  expect(status, `${language} failed:\n${code}\n${stderr}`).toBe(0);
  return stdout;
}

const LANGUAGES: Language[] = ['curl', 'javascript', 'python'];

describe('copy as code', () => {
  it.each(LANGUAGES)('%s: a synthesis saved to speech.wav', async (language) => {
    rmSync(join(dir, 'speech.wav'), { force: true });
    await run(
      {
        kind: 'json',
        url: `${h.url}/tts/bytes`,
        body: {
          model_id: 'local-flite',
          transcript: "It's a test: \"quotes\", 'apostrophes' and $dollars.",
          voice: { mode: 'id', id: 'flite-slt' },
          output_format: { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' },
        },
        saveAs: 'speech.wav',
      },
      language,
    );
    expect(parseWav(readFileSync(join(dir, 'speech.wav'))).frameCount).toBeGreaterThan(8000);
  });

  it.each(LANGUAGES)('%s: a streamed chat completion, printed as its events', async (language) => {
    const out = await run(
      {
        kind: 'json',
        url: `${h.url}/v1/chat/completions`,
        body: { model: 'chat-llm', messages: [{ role: 'user', content: 'Weather?' }], stream: true, stream_options: { include_usage: true } },
        stream: true,
      },
      language,
    );
    expect(out).toContain('"content":"sunny."');
    expect(out).toContain('data: [DONE]');
  });

  it.each(LANGUAGES)('%s: a transcription of recording.wav', async (language) => {
    const out = await run(
      { kind: 'form', url: `${h.url}/v1/audio/transcriptions`, fields: { model: 'local-stt', language: 'en' }, file: { field: 'file', path: 'recording.wav' } },
      language,
    );
    expect(out.toLowerCase()).toMatch(/hello|world|test/);
  });

  const socketRequest = (): CodeRequest => ({
    kind: 'tts-socket',
    saveAs: 'speech.pcm',
    url: `${h.url.replace(/^http/, 'ws')}/tts/websocket`,
    sseUrl: `${h.url}/tts/sse`,
    message: {
      context_id: 'playground',
      model_id: 'local-flite',
      transcript: 'Streaming speech, as it is made.',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
    },
  });

  it('javascript: streaming speech over /tts/websocket, saved to speech.pcm', async () => {
    rmSync(join(dir, 'speech.pcm'), { force: true });
    await run(socketRequest(), 'javascript');
    expect(readFileSync(join(dir, 'speech.pcm')).length).toBeGreaterThan(16000);
  });

  it('curl: the same speech over POST /tts/sse (curl speaks no WebSocket)', async () => {
    const out = await run(socketRequest(), 'curl');
    expect(out).toContain('"type":"chunk"');
    expect(out).toContain('"type":"done"');
  });

  it('python: the socket sample compiles (websockets is not installed here)', () => {
    writeFileSync(join(dir, 'socket.py'), codeFor(socketRequest(), 'python'));
    const compiled = spawnSync('python3', ['-m', 'py_compile', 'socket.py'], { cwd: dir, encoding: 'utf8' });
    expect(compiled.status, compiled.stderr).toBe(0);
  });
});
