import { afterAll, describe, expect, it } from 'vitest';
import { toFloat32 } from '../../audio/pcm.ts';
import { analyzeVoice, type VoiceAnalysis } from '../../audio/voice-analysis.ts';
import type { SpeechCapability, UpstreamTarget } from '../contract.ts';
import { espeakSpeech } from './espeak.ts';
import { fliteSpeech } from './flite.ts';
import { stopEngineSpawner } from './run-engine.ts';
import { deriveLocalVoice, espeakLanguageVoice } from './derive-local-voice.ts';

afterAll(() => stopEngineSpawner());

function analysis(overrides: Partial<VoiceAnalysis>): VoiceAnalysis {
  return {
    durationMs: 14200,
    speechMs: 12000,
    medianF0Hz: 205,
    f0P10Hz: 180,
    f0P90Hz: 240,
    syllablesPerSecond: 4.1,
    gender: 'female',
    loudnessDbfs: -20,
    ...overrides,
  };
}

describe('espeakLanguageVoice', () => {
  it.each([
    ['en', 'en-us'],
    ['en-US', 'en-us'],
    ['en_GB', 'en-gb'],
    ['en-AU', 'en-gb'],
    ['fr', 'fr-fr'],
    ['fr-CA', 'fr-fr'],
    ['pt-BR', 'pt-br'],
    ['pt', 'pt'],
    ['de-AT', 'de'],
    ['es-MX', 'es-419'],
    ['zh', 'cmn'],
    ['zh-HK', 'yue'],
    ['ja', 'ja'],
    ['sv-SE', 'sv'],
    ['xx', 'en-us'],
    ['', 'en-us'],
    ['-v en-us; rm -rf /', 'en-us'],
  ])('%s -> %s', (tag, voice) => {
    expect(espeakLanguageVoice(tag)).toBe(voice);
  });
});

describe('deriveLocalVoice mapping', () => {
  it('female clip: slt / the language voice +f3, with the description the brief asks for', () => {
    const a = analysis({});
    const flite = deriveLocalVoice('flite', a, { language: 'en', mode: 'similarity' });
    expect(flite.upstreamId).toBe('slt');
    // (205 + 3.81) / 0.9805
    expect(flite.params.pitchHz).toBeCloseTo(213, 0);
    expect(flite.params.durationStretch).toBeGreaterThan(1); // 4.1/s is slower than slt's 4.47/s
    expect(flite.description).toMatch(/^Derived from a 14\.2 s clip: female, median pitch 205 Hz, 4\.1 syllables\/s; rendered by flite voice slt/);
    const espeak = deriveLocalVoice('espeak-ng', a, { language: 'fr', mode: 'similarity' });
    expect(espeak.upstreamId).toBe('fr-fr+f3');
    expect(espeak.params.pitch).toBe(47); // 40 + 10 · (205 - 192) / (209.6 - 192)
    expect(espeak.params.wordsPerMinute).toBeLessThan(175);
    expect(espeak.description).toContain('espeak-ng voice fr-fr+f3 at pitch 47');
  });

  it('male clip: rms near its own pitch (it ignores pitch settings), awb otherwise; the language voice for espeak-ng', () => {
    const near = deriveLocalVoice('flite', analysis({ gender: 'male', medianF0Hz: 104 }), { language: 'en', mode: 'similarity' });
    expect(near.upstreamId).toBe('rms');
    expect(near.params.pitchHz).toBeUndefined();
    expect(near.description).toContain('its own pitch (about 102 Hz)');
    const higher = deriveLocalVoice('flite', analysis({ gender: 'male', medianF0Hz: 130 }), { language: 'en', mode: 'similarity' });
    expect(higher.upstreamId).toBe('awb');
    expect(higher.params.pitchHz).toBeCloseTo((130 + 1.34) / 0.9729, 1);
    const espeak = deriveLocalVoice('espeak-ng', analysis({ gender: 'male', medianF0Hz: 101 }), { language: 'de-DE', mode: 'similarity' });
    expect(espeak).toMatchObject({ upstreamId: 'de', params: { pitch: 50 } });
  });

  it('unknown gender goes by the nearer side of 165 Hz; no voiced speech gives the female base voice unchanged', () => {
    expect(deriveLocalVoice('espeak-ng', analysis({ gender: 'unknown', medianF0Hz: 160 }), { language: 'en', mode: 'similarity' }).upstreamId).toBe('en-us');
    expect(deriveLocalVoice('espeak-ng', analysis({ gender: 'unknown', medianF0Hz: 170 }), { language: 'en', mode: 'similarity' }).upstreamId).toBe('en-us+f3');
    const none = analysis({ gender: 'unknown', medianF0Hz: null, f0P10Hz: null, f0P90Hz: null, syllablesPerSecond: null, speechMs: 0 });
    const flite = deriveLocalVoice('flite', none, { language: 'en', mode: 'similarity' });
    expect(flite.upstreamId).toBe('slt');
    expect(flite.params.durationStretch).toBe(1);
    expect(flite.params.pitchHz).toBeCloseTo((164.2 + 3.81) / 0.9805, 1);
    expect(flite.description).toMatch(/^Derived from a 14\.2 s clip with no voiced speech measured; rendered by flite voice slt/);
    expect(deriveLocalVoice('espeak-ng', none, { language: 'en', mode: 'similarity' }).params).toEqual({ pitch: 50, wordsPerMinute: 175 });
  });

  it('stability goes halfway (geometric mean) from the base voice toward the clip', () => {
    const a = analysis({ medianF0Hz: 260, syllablesPerSecond: 6 });
    const similar = deriveLocalVoice('flite', a, { language: 'en', mode: 'similarity' });
    const stable = deriveLocalVoice('flite', a, { language: 'en', mode: 'stability' });
    const natural = (164.2 + 3.81) / 0.9805;
    expect(stable.params.pitchHz).toBeCloseTo((Math.sqrt(260 * 164.2) + 3.81) / 0.9805, 1);
    expect(stable.params.pitchHz!).toBeGreaterThan(natural);
    expect(stable.params.pitchHz!).toBeLessThan(similar.params.pitchHz!);
    expect(stable.params.durationStretch!).toBeGreaterThan(similar.params.durationStretch!);
    expect(stable.params.durationStretch!).toBeLessThan(1);
    expect(stable.description).toContain('(stability)');
    const espeakStable = deriveLocalVoice('espeak-ng', a, { language: 'en', mode: 'stability' });
    const espeakSimilar = deriveLocalVoice('espeak-ng', a, { language: 'en', mode: 'similarity' });
    expect(espeakStable.params.pitch!).toBeGreaterThan(50);
    expect(espeakStable.params.pitch!).toBeLessThan(espeakSimilar.params.pitch!);
  });

  it('clamps extreme measurements to the engines’ safe ranges', () => {
    for (const [medianF0Hz, syllablesPerSecond, gender] of [
      [40, 0.3, 'male'],
      [900, 25, 'female'],
      [170, 1e9, 'female'],
      [75, 1e-6, 'male'],
    ] as const) {
      const a = analysis({ medianF0Hz, syllablesPerSecond, gender });
      for (const mode of ['similarity', 'stability'] as const) {
        const flite = deriveLocalVoice('flite', a, { language: 'en', mode });
        expect(flite.params.durationStretch!).toBeGreaterThanOrEqual(0.5);
        expect(flite.params.durationStretch!).toBeLessThanOrEqual(2);
        if (flite.params.pitchHz !== undefined) {
          expect(flite.params.pitchHz).toBeGreaterThanOrEqual(60);
          expect(flite.params.pitchHz).toBeLessThanOrEqual(350);
        }
        const espeak = deriveLocalVoice('espeak-ng', a, { language: 'en', mode });
        expect(Number.isInteger(espeak.params.pitch)).toBe(true);
        expect(espeak.params.pitch!).toBeGreaterThanOrEqual(0);
        expect(espeak.params.pitch!).toBeLessThanOrEqual(99);
        expect(espeak.params.wordsPerMinute!).toBeGreaterThanOrEqual(80);
        expect(espeak.params.wordsPerMinute!).toBeLessThanOrEqual(350);
        for (const v of [...Object.values(flite.params), ...Object.values(espeak.params)]) expect(Number.isFinite(v)).toBe(true);
      }
    }
  });
});

// The property that makes local "cloning" honest: a clip re-synthesised with the voice derived
// from it measures like the clip.
describe('round trip through the real engines', () => {
  const upstream: UpstreamTarget = {
    id: 'test',
    modelId: 'test',
    url: 'local:test',
    protocol: 'flite',
    upstreamModel: 'test',
    apiKey: undefined,
    settings: {},
  };
  const clipText =
    'The quick brown fox jumps over the lazy dog. Yesterday afternoon we walked along the river and talked about the weather, ' +
    'the garden, and the long summer holidays that were coming. Nobody expected the rain to stop before evening.';
  // A different text for the re-synthesis: the derived voice must carry over, not the words.
  const otherText =
    'Please call me back when you get this message. The meeting moved to Thursday at half past ten, in the small room on the ' +
    'second floor, and we still need someone to bring the projector and a few extra chairs.';

  async function speak(adapter: SpeechCapability, upstreamId: string, params: Record<string, number> | null, text: string, speed = 1): Promise<VoiceAnalysis> {
    const stream = await adapter.synthesize(upstream, {
      text,
      voice: { upstreamId, params },
      language: 'en',
      speed,
      signal: new AbortController().signal,
      timeoutMs: 30_000,
    });
    const parts: Float32Array[] = [];
    for await (const chunk of stream.chunks) parts.push(toFloat32(chunk));
    const samples = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      samples.set(p, at);
      at += p.length;
    }
    return analyzeVoice(samples, stream.sampleRate);
  }

  const clips: { name: string; adapter: SpeechCapability; id: string; params: Record<string, number> | null }[] = [
    { name: 'flite slt', adapter: fliteSpeech, id: 'slt', params: null },
    { name: 'flite slt at 220 Hz, slow', adapter: fliteSpeech, id: 'slt', params: { pitchHz: 220, durationStretch: 1.3 } },
    { name: 'flite rms', adapter: fliteSpeech, id: 'rms', params: null },
    { name: 'flite awb at 145 Hz, fast', adapter: fliteSpeech, id: 'awb', params: { pitchHz: 145, durationStretch: 0.8 } },
    { name: 'espeak-ng en-us+f3', adapter: espeakSpeech, id: 'en-us+f3', params: null },
    { name: 'espeak-ng en-us at -p 75', adapter: espeakSpeech, id: 'en-us', params: { pitch: 75 } },
    { name: 'espeak-ng fr+f2', adapter: espeakSpeech, id: 'fr+f2', params: null },
  ];

  it.each(clips)('$name -> derived flite and espeak-ng voices reproduce its median pitch within 15%', async ({ adapter, id, params }) => {
    const clip = await speak(adapter, id, params, clipText);
    expect(clip.durationMs).toBeGreaterThan(10_000);
    expect(clip.medianF0Hz).not.toBeNull();
    for (const engine of ['flite', 'espeak-ng'] as const) {
      const derived = deriveLocalVoice(engine, clip, { language: 'en', mode: 'similarity' });
      const again = await speak(engine === 'flite' ? fliteSpeech : espeakSpeech, derived.upstreamId, derived.params, otherText);
      const f0Error = Math.abs(again.medianF0Hz! - clip.medianF0Hz!) / clip.medianF0Hz!;
      expect(f0Error, `${engine} ${derived.upstreamId} ${JSON.stringify(derived.params)}: ${again.medianF0Hz} vs ${clip.medianF0Hz} Hz`).toBeLessThan(0.15);
      expect(again.gender === 'unknown' || clip.gender === 'unknown' || again.gender === clip.gender).toBe(true);
      // Speaking rate follows too, within the analysis' own accuracy on different words.
      const rateError = Math.abs(again.syllablesPerSecond! - clip.syllablesPerSecond!) / clip.syllablesPerSecond!;
      expect(rateError, `${engine} rate ${again.syllablesPerSecond} vs ${clip.syllablesPerSecond}`).toBeLessThan(0.3);
    }
  });

  it('espeak-ng wordsPerMinute is the voice’s rate and the request speed multiplies it', async () => {
    const slow = await speak(espeakSpeech, 'en-us', { wordsPerMinute: 120 }, otherText);
    const fast = await speak(espeakSpeech, 'en-us', { wordsPerMinute: 240 }, otherText);
    const fastBySpeed = await speak(espeakSpeech, 'en-us', { wordsPerMinute: 160 }, otherText, 1.5);
    expect(fast.syllablesPerSecond! / slow.syllablesPerSecond!).toBeGreaterThan(1.4);
    expect(Math.abs(fastBySpeed.speechMs - fast.speechMs) / fast.speechMs).toBeLessThan(0.1);
    expect(slow.speechMs / fast.speechMs).toBeGreaterThan(1.6);
  });
});
