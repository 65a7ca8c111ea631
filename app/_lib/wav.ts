// A recording made in the page, as the file the API takes: 16-bit PCM WAV, mono (what
// /v1/audio/transcriptions and /voices/clone read).

/** Float samples (-1..1, clipped) as a canonical 44-byte-header 16-bit mono WAV. */
export function encodeWav16(samples: Float32Array, sampleRate: number): ArrayBuffer {
  const wav = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const ascii = (at: number, text: string) => [...text].forEach((ch, i) => wav.setUint8(at + i, ch.charCodeAt(0)));
  ascii(0, 'RIFF');
  wav.setUint32(4, 36 + samples.length * 2, true);
  ascii(8, 'WAVEfmt ');
  wav.setUint32(16, 16, true); // fmt chunk size
  wav.setUint16(20, 1, true); // PCM
  wav.setUint16(22, 1, true); // mono
  wav.setUint32(24, sampleRate, true);
  wav.setUint32(28, sampleRate * 2, true); // bytes per second
  wav.setUint16(32, 2, true); // bytes per frame
  wav.setUint16(34, 16, true); // bits per sample
  ascii(36, 'data');
  wav.setUint32(40, samples.length * 2, true);
  for (let i = 0; i < samples.length; i++) {
    const x = Math.max(-1, Math.min(1, samples[i]!));
    wav.setInt16(44 + i * 2, x < 0 ? x * 0x8000 : x * 0x7fff, true);
  }
  return wav.buffer;
}

/** The level meter's reading of a block of samples: their RMS in dBFS, -60..0 dB mapped to 0..100. */
export function levelPercent(samples: Float32Array): number {
  let sum = 0;
  for (const x of samples) sum += x * x;
  const rms = Math.sqrt(sum / Math.max(1, samples.length));
  if (rms === 0) return 0;
  const db = 20 * Math.log10(rms);
  return Math.round(Math.max(0, Math.min(100, ((db + 60) / 60) * 100)));
}
