// eSpeak NG: 100+ languages, formant synthesis, 22050 Hz; streams WAV to stdout as it
// synthesises, so the first audio leaves before the whole text is done.
import type { SpeechAdapter } from '../speech-types.js';
import { runEngine } from './run-engine.js';
import { pcmFromWavStream } from './wav-stream.js';

const NATURAL_WPM = 175;

export const espeakAdapter: SpeechAdapter = {
  // eSpeak reads phoneme mnemonics inline between double brackets.
  formatPhoneme: (phoneme) => `[[${phoneme.replace(/[[\]]/g, '')}]]`,
  async synthesize(_upstream, req) {
    const pitch = typeof req.voice.params?.pitch === 'number' ? Math.round(Math.min(99, Math.max(0, req.voice.params.pitch))) : null;
    const args = ['-v', req.voice.upstreamId, '-s', String(Math.round(NATURAL_WPM * req.speed)), '--stdout', '-b', '1', ...(pitch === null ? [] : ['-p', String(pitch)])];
    const run = runEngine('espeak-ng', args, req.signal, req.text);
    return { sampleRate: 22050, chunks: pcmFromWavStream(run.stdout, run.done) };
  },
};
