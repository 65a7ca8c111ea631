// Professional clones cost the gateway real work (decoding, joining and measuring every clip).
// So: a blob id may be listed once, at most 10 clips and 10 minutes of audio (by the durations
// stored with the blobs, before anything is decoded), and the work runs in slices that leave the
// event loop free. (A voice's preview, synthesis the org does not pay for, is a fixed sentence
// that no client input reaches: gateway/routes/voices.previews.test.ts.)
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { expectError, post, startTtsGateway } from '../../test/support/tts-routes.ts';
import { call, speak, uploadBlob, waitForJob } from '../../test/support/voice-routes.ts';
import { toFloat32 } from '../audio/pcm.ts';
import { encodeWav, parseWav } from '../audio/wav.ts';

let h: GatewayHarness;
let clip: Buffer;

beforeAll(async () => {
  h = await startTtsGateway({ env: { SVC_JOB_POLL_MS: '50' } });
  clip = speak('flite', 'rms');
}, 60_000);

afterAll(async () => {
  await h?.close();
});

/** The flite clip repeated to `seconds` of audio, as a WAV at its own rate. */
function longClip(seconds: number): Buffer {
  const wav = parseWav(clip);
  const source = toFloat32(wav.samples);
  const out = new Float32Array(Math.round(seconds * wav.sampleRate));
  for (let at = 0; at < out.length; at += source.length) out.set(source.subarray(0, out.length - at), at);
  return encodeWav(out, wav.sampleRate, 'pcm_s16le');
}

const jobCount = () => h.testDb.db.prisma.job.count({ where: { orgId: h.orgId } });

describe('POST /voices/pro-clone limits', () => {
  it('refuses a blob listed twice: an 18 s clip twice is not 36 s of voice', async () => {
    const blob = (await uploadBlob(h, clip)).body;
    expect(blob.duration_seconds).toBeGreaterThan(15);
    expect(blob.duration_seconds).toBeLessThan(30);
    const jobs = await jobCount();
    await expectError(await post(h, '/voices/pro-clone', { name: 'Echo', blob_ids: [blob.id, blob.id], model_id: 'local-flite' }), {
      status: 400,
      code: 'invalid_request',
      param: 'blob_ids',
    });
    const other = (await uploadBlob(h, clip)).body;
    await expectError(await post(h, '/voices/pro-clone', { name: 'Echo', blob_ids: [blob.id, other.id, blob.id], model_id: 'local-flite' }), {
      status: 400,
      code: 'invalid_request',
      param: 'blob_ids',
    });
    expect(await jobCount()).toBe(jobs);
  });

  it('takes at most 10 clips and 10 minutes of audio in all', async () => {
    const ids = Array.from({ length: 11 }, (_, i) => `blob_${i}`);
    const tooMany = await expectError(await post(h, '/voices/pro-clone', { name: 'Many', blob_ids: ids, model_id: 'local-flite' }), {
      status: 400,
      code: 'invalid_request',
      param: 'blob_ids',
    });
    expect(tooMany.message).toContain('10');
    // Two clips of 5 min 1 s (8 kHz, stored with their measured durations): over 10 minutes.
    const wav = encodeWav(
      Float32Array.from({ length: 8000 * 301 }, (_, i) => 0.2 * Math.sin(i / 5)),
      8000,
      'pcm_s16le',
    );
    const a = (await uploadBlob(h, wav)).body;
    const b = (await uploadBlob(h, wav)).body;
    expect(a.duration_seconds).toBe(301);
    const jobs = await jobCount();
    const tooLong = await expectError(await post(h, '/voices/pro-clone', { name: 'Long', blob_ids: [a.id, b.id], model_id: 'local-flite' }), {
      status: 400,
      code: 'invalid_request',
      param: 'blob_ids',
    });
    expect(tooLong.message).toContain('602.0 s');
    expect(await jobCount()).toBe(jobs);
  });

  // Benchmark-like: the bound is far from what the work measures now (slices of a few ms) and
  // far below what it measured when done in one go (~2.5 s on a 2-core machine), so it cannot flake.
  it('processes a 10-minute pro clone without stalling the event loop for long', async () => {
    const minute = longClip(60);
    const blobs: string[] = [];
    for (let i = 0; i < 10; i++) blobs.push((await uploadBlob(h, minute)).body.id);
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const r = await call(h, 'POST', '/voices/pro-clone', { name: 'Ten minutes', blob_ids: blobs, model_id: 'local-flite' });
    expect(r.status).toBe(202);
    const job = await waitForJob(h, r.body.job_id, h.headers, 60_000);
    delay.disable();
    expect(job).toMatchObject({ status: 'succeeded', kind: 'pro_clone' });
    const voice = (await call(h, 'GET', `/voices/${r.body.voice_id}`)).body;
    expect(voice).toMatchObject({ gender: 'male', source_metadata: { clip_seconds: 600, analysis: { duration_seconds: 600 } } });
    const longestStallMs = delay.max / 1e6;
    console.log(`longest event-loop stall during a 10-minute pro clone: ${longestStallMs.toFixed(0)} ms`);
    expect(longestStallMs).toBeLessThan(1000);
  }, 120_000);
});
