// The recognizer's settings (SVC_STT_WORKERS, SVC_STT_SPARE_DECODERS, SVC_POCKETSPHINX_*) come
// from the validated configuration and reach the pool, its worker threads (workerData) and their
// decoders; the health check looks in the configured model directory. Against real pocketsphinx.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../server/config/env.ts';
import { until } from '../../../test/support/poll.ts';
import type { TargetOf } from '../contract.ts';
import { pocketsphinx } from '../protocols/pocketsphinx.ts';
import { NOT_INSTALLED } from './ffi.ts';
import {
  configureRecognizer,
  createRecognizer,
  recognizerSettings,
  recognizerStats,
  shutdownRecognizers,
  transcribeAll,
  type Recognizer,
  type RecognizerSettings,
} from './recognizer.ts';

const settingsFrom = (env: Record<string, string>) => loadConfig(env).engines.pocketsphinx;

describe('configuration', () => {
  it('has the defaults the recognizer had', () => {
    expect(settingsFrom({})).toEqual({
      workers: Math.max(1, availableParallelism() - 1),
      spareDecoders: 1,
      modelDir: '/usr/share/pocketsphinx/model/en-us',
      logFile: '/dev/null',
      extraArgs: '',
      keytermBonus: 20000,
    });
    // An unconfigured recognizer (benches, tests) uses the same.
    expect(recognizerSettings()).toEqual(settingsFrom({}));
  });

  it('takes the variables', () => {
    expect(
      settingsFrom({
        SVC_STT_WORKERS: '3',
        SVC_STT_SPARE_DECODERS: '0',
        SVC_POCKETSPHINX_MODEL: '/opt/model',
        SVC_POCKETSPHINX_LOG: '/dev/stderr',
        SVC_POCKETSPHINX_ARGS: ' -maxhmmpf 5000  -wip -0.5 ',
        SVC_POCKETSPHINX_KEYTERM_BONUS: '0',
      }),
    ).toEqual({ workers: 3, spareDecoders: 0, modelDir: '/opt/model', logFile: '/dev/stderr', extraArgs: ' -maxhmmpf 5000  -wip -0.5 ', keytermBonus: 0 });
  });

  it.each([
    ['SVC_STT_WORKERS', '0'],
    ['SVC_STT_WORKERS', 'many'],
    ['SVC_STT_WORKERS', '1.5'],
    ['SVC_STT_SPARE_DECODERS', '-1'],
    ['SVC_STT_SPARE_DECODERS', '65'],
    ['SVC_POCKETSPHINX_MODEL', ''],
    ['SVC_POCKETSPHINX_LOG', ''],
    ['SVC_POCKETSPHINX_ARGS', '-maxhmmpf'],
    ['SVC_POCKETSPHINX_ARGS', 'maxhmmpf 5000'],
    ['SVC_POCKETSPHINX_KEYTERM_BONUS', '-1'],
    ['SVC_POCKETSPHINX_KEYTERM_BONUS', 'lots'],
  ])('refuses %s=%j, naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });
});

describe('settings reach the worker threads', () => {
  let dir: string;
  const defaults = recognizerSettings();
  const configure = (s: Partial<RecognizerSettings>) => configureRecognizer({ ...defaults, ...s });
  const target: TargetOf<typeof pocketsphinx> = {
    id: 'local-stt',
    modelId: 'local-stt',
    url: 'local:pocketsphinx',
    protocol: 'pocketsphinx',
    upstreamModel: '',
    apiKey: undefined,
    settings: {},
  };

  /** Stats once the threads have loaded every spare decoder due (they load in the background). */
  const settled = () =>
    until(
      'the spare decoders to load',
      async () => {
        const stats = await recognizerStats();
        return stats.every((s) => !s.loadingSpare) && stats;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-stt-settings-'));
  });
  // A new pool per test: settings take effect for threads started after they are set.
  afterEach(async () => {
    await shutdownRecognizers();
    configureRecognizer(defaults);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('workers, spare decoders and the log file', async () => {
    const logFile = join(dir, 'pocketsphinx.log');
    configureRecognizer(settingsFrom({ SVC_STT_WORKERS: '2', SVC_STT_SPARE_DECODERS: '2', SVC_POCKETSPHINX_LOG: logFile }));
    const recognizers: Recognizer[] = [];
    for (let k = 0; k < 3; k++) recognizers.push(await createRecognizer({ sampleRate: 16000 }));
    for (const r of recognizers) r.close();
    const stats = await settled();
    expect(stats).toHaveLength(2);
    expect(stats.map((s) => s.spares)).toEqual([2, 2]);
    // pocketsphinx's log of the decoders it loaded.
    expect(readFileSync(logFile, 'utf8')).toContain(defaults.modelDir);
  }, 60_000);

  it('no spare decoders', async () => {
    configure({ workers: 1, spareDecoders: 0 });
    (await createRecognizer({ sampleRate: 16000 })).close();
    // The thread answers in order: after the open and the close, none is loaded and none is due.
    expect((await recognizerStats()).map(({ spares, loadingSpare }) => ({ spares, loadingSpare }))).toEqual([{ spares: 0, loadingSpare: false }]);
  }, 30_000);

  it('extra decoder arguments', async () => {
    configure({ workers: 1, spareDecoders: 0, extraArgs: '-no_such_argument 1' });
    await expect(createRecognizer({ sampleRate: 16000 })).rejects.toThrow(/rejected its configuration.*-no_such_argument 1/);
  }, 30_000);

  it('the model directory, in the workers and in the health check', async () => {
    const engines = { ...loadConfig({}).engines, pocketsphinx: { ...defaults, workers: 1, modelDir: join(dir, 'no-model') } };
    const runtime = pocketsphinx.create(engines);
    expect(recognizerSettings().modelDir).toBe(join(dir, 'no-model'));
    const health = await runtime.health(target, new AbortController().signal);
    expect(health).toMatchObject({ ok: false });
    expect(health.error).toContain(NOT_INSTALLED);
    expect(health.error).toContain(join(dir, 'no-model'));
    await expect(createRecognizer({ sampleRate: 16000 })).rejects.toThrow(join(dir, 'no-model'));
    // The default directory has the model.
    expect(await pocketsphinx.create({ ...engines, pocketsphinx: defaults }).health(target, new AbortController().signal)).toMatchObject({ ok: true });
  }, 30_000);

  it('the keyterm bonus', async () => {
    // Without help flite's "sunny" is heard as "sunday"; the keyterm's bonus is what changes that.
    const file = join(dir, 'weather.wav');
    await promisify(execFile)('flite', ['-voice', 'slt', '-t', 'the weather today is sunny with a light breeze', '-o', file]);
    const b = readFileSync(file);
    const pcm = new Int16Array(b.buffer.slice(b.byteOffset + 44, b.byteOffset + b.length - ((b.length - 44) % 2)));
    configure({ workers: 1, keytermBonus: 0 });
    expect((await transcribeAll(pcm, { sampleRate: 16000, keyterms: ['sunny'] })).text).toContain('sunday');
    await settled();
    await shutdownRecognizers();
    configure({ workers: 1 });
    expect((await transcribeAll(pcm, { sampleRate: 16000, keyterms: ['sunny'] })).text).toContain('sunny');
    await settled();
  }, 60_000);
});
