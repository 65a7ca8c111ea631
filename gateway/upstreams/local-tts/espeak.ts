// eSpeak NG: 100+ languages, formant synthesis, 22050 Hz; streams WAV to stdout as it
// synthesises, so the first audio leaves before the whole text is done.
import type { SpeechCapability } from '../contract.ts';
import { runEngine } from './run-engine.ts';
import { pcmFromWavStream } from './wav-stream.ts';

const NATURAL_WPM = 175;
/** espeak-ng's own range for -s; faster is its "sonic" speed-up, which voices do not use here. */
const MIN_WPM = 80;
const MAX_WPM = 450;

export const espeakSpeech: SpeechCapability = {
  // eSpeak reads phoneme mnemonics inline between double brackets.
  formatPhoneme: (phoneme) => `[[${phoneme.replace(/[[\]]/g, '')}]]`,
  async synthesize(_upstream, req) {
    const pitch =
      typeof req.voice.params?.pitch === 'number' && Number.isFinite(req.voice.params.pitch)
        ? Math.round(Math.min(99, Math.max(0, req.voice.params.pitch)))
        : null;
    // A voice's own rate (params.wordsPerMinute, set by local cloning) times the request's speed.
    const voiceWpm =
      typeof req.voice.params?.wordsPerMinute === 'number' && Number.isFinite(req.voice.params.wordsPerMinute) ? req.voice.params.wordsPerMinute : NATURAL_WPM;
    const wpm = Math.round(Math.min(MAX_WPM, Math.max(MIN_WPM, voiceWpm * req.speed)));
    const args = ['-v', req.voice.upstreamId, '-s', String(wpm), '--stdout', '-b', '1', ...(pitch === null ? [] : ['-p', String(pitch)])];
    const run = runEngine('espeak-ng', args, { signal: req.signal, input: req.text, tenant: req.tenant });
    return { sampleRate: 22050, chunks: pcmFromWavStream(run.stdout, run.done) };
  },
};
