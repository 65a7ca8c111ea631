// Without the model (as on a machine where `npm run setup` has not run), recognizers fail with
// a message that says what to do, and nothing is left running.
import { afterAll, expect, it } from 'vitest';
import { loadConfig } from '../../../server/config/env.ts';
import type { TargetOf } from '../contract.ts';
import { pocketsphinx } from '../protocols/pocketsphinx.ts';
import { NOT_INSTALLED } from './ffi.ts';
import { configureRecognizer, createRecognizer, recognizerStats, shutdownRecognizers, transcribeAll } from './recognizer.ts';

afterAll(() => shutdownRecognizers());

// As the gateway configures it: from the validated configuration, through the protocol.
const engines = loadConfig({ SVC_POCKETSPHINX_MODEL: '/nonexistent/pocketsphinx-model' }).engines;

it('rejects with "pocketsphinx is not installed; npm run setup installs it"', async () => {
  // Worker threads take the settings as they are when the pool starts them.
  const saved = loadConfig({}).engines.pocketsphinx;
  configureRecognizer(engines.pocketsphinx);
  try {
    await expect(createRecognizer({ sampleRate: 16000 })).rejects.toThrow(NOT_INSTALLED);
    await expect(transcribeAll(new Int16Array(1600), { sampleRate: 8000 })).rejects.toThrow(NOT_INSTALLED);
    const stats = await recognizerStats();
    expect(stats.reduce((n, s) => n + s.sessions + s.decoders, 0)).toBe(0);
  } finally {
    configureRecognizer(saved);
  }
});

it('is unhealthy, saying so, when the configured model directory has no model', async () => {
  const target: TargetOf<typeof pocketsphinx> = {
    id: 'local-stt',
    modelId: 'local-stt',
    url: 'local:pocketsphinx',
    protocol: 'pocketsphinx',
    upstreamModel: '',
    apiKey: undefined,
    settings: {},
  };
  const health = await pocketsphinx.create(engines).health(target, new AbortController().signal);
  expect(health.ok).toBe(false);
  expect(health.error).toContain(NOT_INSTALLED);
});
