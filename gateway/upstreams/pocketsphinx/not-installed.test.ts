// Without the model (as on a machine where `npm run setup` has not run), recognizers fail with
// a message that says what to do, and nothing is left running.
import { afterAll, expect, it } from 'vitest';
import { NOT_INSTALLED } from './ffi.ts';
import { createRecognizer, recognizerStats, shutdownRecognizers, transcribeAll } from './recognizer.ts';

afterAll(() => shutdownRecognizers());

it('rejects with "pocketsphinx is not installed; npm run setup installs it"', async () => {
  // Worker threads take the environment as it is when the pool starts them.
  process.env.SVC_POCKETSPHINX_MODEL = '/nonexistent/pocketsphinx-model';
  try {
    await expect(createRecognizer({ sampleRate: 16000 })).rejects.toThrow(NOT_INSTALLED);
    await expect(transcribeAll(new Int16Array(1600), { sampleRate: 8000 })).rejects.toThrow(NOT_INSTALLED);
    const stats = await recognizerStats();
    expect(stats.reduce((n, s) => n + s.sessions + s.decoders, 0)).toBe(0);
  } finally {
    delete process.env.SVC_POCKETSPHINX_MODEL;
  }
});
