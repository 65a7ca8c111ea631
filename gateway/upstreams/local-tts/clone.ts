// "Cloning" with the local engines is measurement, not a neural voice: the clip's pitch,
// speaking rate and gender pick and tune an engine voice (see gateway/audio/voice-analysis.ts
// and ./derive-local-voice.ts). docs/voices.md says exactly this.
import { analyzeVoiceInChunks } from '../../audio/voice-analysis.ts';
import { deriveLocalVoice } from './derive-local-voice.ts';
import type { CloneCapability } from '../contract.ts';

export function localClone(engine: 'flite' | 'espeak-ng'): CloneCapability {
  return {
    async clone(_upstream, req) {
      // In slices, one clip at a time: minutes of audio, or many clips, must not hold the
      // gateway's event loop. The clip's samples are read (decoded) when its turn comes.
      const analysis = await analyzeVoiceInChunks(() => req.clip.samples, req.clip.sampleRate, { signal: req.signal });
      const derived = deriveLocalVoice(engine, analysis, { language: req.language, mode: req.mode });
      return {
        upstreamId: derived.upstreamId,
        params: derived.params,
        expiresAt: null,
        gender: analysis.gender === 'unknown' ? '' : analysis.gender,
        description: derived.description,
        metadata: {
          engine,
          analysis: {
            duration_seconds: analysis.durationMs / 1000,
            speech_seconds: analysis.speechMs / 1000,
            median_f0_hz: analysis.medianF0Hz,
            f0_p10_hz: analysis.f0P10Hz,
            f0_p90_hz: analysis.f0P90Hz,
            syllables_per_second: analysis.syllablesPerSecond,
            gender_estimate: analysis.gender,
            loudness_dbfs: analysis.loudnessDbfs,
          },
        },
      };
    },
  };
}
