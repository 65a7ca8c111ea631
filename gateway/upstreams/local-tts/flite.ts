// Flite (CMU): the most intelligible local English voices, 16 kHz, very fast (RTF ~0.01), but
// it only writes whole files. Long texts are synthesised sentence by sentence so the first
// sentence's audio can leave while the rest is being made.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SpeechCapability } from '../contract.ts';
import { runEngine } from './run-engine.ts';
import { parseWav } from '../../audio/wav.ts';

/** Splits text after sentence ends, keeping pieces of a useful size (~200+ characters joined). */
export function sentences(text: string): string[] {
  const parts = text.match(/[^.!?;:\n]+(?:[.!?;:]+|\n+|$)\s*/g) ?? [text];
  const out: string[] = [];
  let current = '';
  for (const p of parts) {
    current += p;
    // The first piece goes out alone (time to first audio); later ones are batched.
    if (out.length === 0 || current.length >= 200) {
      if (current.trim()) out.push(current);
      current = '';
    }
  }
  if (current.trim()) out.push(current);
  return out.length ? out : [text];
}

export const fliteSpeech: SpeechCapability = {
  formatPhoneme: null,
  async synthesize(_upstream, req) {
    const dir = await mkdtemp(join(tmpdir(), 'svc-flite-'));
    const pitch = typeof req.voice.params?.pitchHz === 'number' ? req.voice.params.pitchHz : null;
    const stretch = (typeof req.voice.params?.durationStretch === 'number' ? req.voice.params.durationStretch : 1) / req.speed;
    const baseArgs = [
      '-voice',
      req.voice.upstreamId,
      '--setf',
      `duration_stretch=${stretch.toFixed(4)}`,
      ...(pitch === null ? [] : ['--setf', `int_f0_target_mean=${pitch.toFixed(1)}`]),
    ];
    async function* chunks(): AsyncGenerator<Float32Array> {
      try {
        for (const [i, sentence] of sentences(req.text).entries()) {
          const out = join(dir, `${i}.wav`);
          // -t takes the text as one argv entry (no shell), so no quoting issues.
          const run = runEngine('flite', [...baseArgs, '-t', sentence, '-o', out], { signal: req.signal, tenant: req.tenant });
          for await (const _ of run.stdout);
          await run.done;
          yield parseWav(await readFile(out)).samples;
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
    return { sampleRate: 16000, chunks: chunks() };
  },
};
