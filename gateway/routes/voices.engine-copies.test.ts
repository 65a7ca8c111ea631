// Cloning through engines that bill and keep the voice in the operator's account (Cartesia,
// ElevenLabs), against their scripted APIs: deleting the voice deletes the engine's copy (by the
// gateway's job worker, whichever way the voice was deleted), and each org clones through them at
// most SVC_MAX_ENGINE_CLONES_PER_ORG_PER_DAY times a day (429 clone_quota_exceeded, Retry-After)
// and holds at most SVC_MAX_VOICES_PER_ORG voices (403 voice_quota_exceeded). Clones by the
// gateway's own engines (flite) count as voices, not as engine clones.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { deleteVoice } from '../../server/services/voices/delete-voice.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { until } from '../../test/support/poll.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import { startScriptedElevenLabs, type ScriptedElevenLabs } from '../../test/support/scripted-elevenlabs.ts';
import { startTtsGateway } from '../../test/support/tts-routes.ts';
import { call, cloneMultipart, otherOrg, speak, type OtherOrg } from '../../test/support/voice-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const CARTESIA_KEY = 'sk_car_copies_secret_51c0';
const ELEVEN_KEY = 'sk_el_copies_secret_8e2a';
process.env.CARTESIA_COPIES_KEY = CARTESIA_KEY;
process.env.ELEVEN_COPIES_KEY = ELEVEN_KEY;

let h: GatewayHarness;
let cartesia: ScriptedCartesia;
let eleven: ScriptedElevenLabs;
let clip: Buffer;

beforeAll(async () => {
  [cartesia, eleven] = await Promise.all([startScriptedCartesia({ apiKey: CARTESIA_KEY }), startScriptedElevenLabs({ apiKey: ELEVEN_KEY, voices: [] })]);
  h = await startTtsGateway({
    env: { SVC_JOB_POLL_MS: '50', SVC_MAX_ENGINE_CLONES_PER_ORG_PER_DAY: '2', SVC_MAX_VOICES_PER_ORG: '3' },
  });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'sonic',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: 'CARTESIA_COPIES_KEY' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'eleven',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: eleven.url, protocol: 'elevenlabs', upstreamModel: 'eleven_flash_v2_5', apiKeyEnv: 'ELEVEN_COPIES_KEY' },
  });
  await h.runtime.ctx.registry.refresh();
  clip = speak('flite', 'slt');
}, 60_000);

afterAll(async () => {
  await h?.close();
  await Promise.allSettled([cartesia?.close(), eleven?.close()]);
  delete process.env.CARTESIA_COPIES_KEY;
  delete process.env.ELEVEN_COPIES_KEY;
});

/** A clone through `model` by the org, answered 201 with the engine's voice id as its profile. */
async function cloned(org: OtherOrg, model: string): Promise<{ id: string; upstreamId: string }> {
  const r = await cloneMultipart(h, clip, { name: `On ${model}`, model_id: model }, org.headers);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { id: r.body.id, upstreamId: r.body.profiles[0].upstream_id };
}

async function refusedClone(org: OtherOrg, model: string): Promise<{ status: number; retryAfter: string | null; error: Record<string, unknown> }> {
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(clip)], { type: 'audio/wav' }), 'clip.wav');
  form.set('name', 'One too many');
  form.set('model_id', model);
  const res = await fetch(`${h.url}/voices/clone`, { method: 'POST', headers: { authorization: org.headers.authorization! }, body: form });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), error: ((await res.json()) as { error: Record<string, unknown> }).error };
}

describe('deleting a voice deletes the engine\u2019s copy', () => {
  it('Cartesia: DELETE /voices/{id} answers as before, then DELETE /voices/{engine id} reaches the engine', async () => {
    const org = await otherOrg(h);
    const voice = await cloned(org, 'sonic');
    expect(cartesia.voices.map((v) => v.id)).toContain(voice.upstreamId);
    const deleted = await call(h, 'DELETE', `/voices/${voice.id}`, undefined, org.headers);
    expect(deleted).toMatchObject({ status: 200, body: { id: voice.id, deleted: true } });
    await until('the engine copy deleted', () => cartesia.deleted.includes(voice.upstreamId));
    expect(cartesia.voices.map((v) => v.id)).not.toContain(voice.upstreamId);
    const request = cartesia.received.find((q) => q.method === 'DELETE')!;
    expect(request.path).toBe(`/voices/${voice.upstreamId}`);
    expect(request.headers.authorization).toBe(`Bearer ${CARTESIA_KEY}`);
  });

  it('ElevenLabs, the voice deleted from the dashboard (the service alone): the gateway\u2019s worker deletes the copy', async () => {
    const org = await otherOrg(h);
    const voice = await cloned(org, 'eleven');
    expect(eleven.voices.map((v) => v.voice_id)).toEqual([voice.upstreamId]);
    await deleteVoice(h.testDb.db.prisma, org.orgId, voice.id);
    await until('the engine copy deleted', () => eleven.deleted.includes(voice.upstreamId));
    expect(eleven.voices).toEqual([]);
    const request = eleven.received.find((q) => q.method === 'DELETE')!;
    expect(request.path).toBe(`/v1/voices/${voice.upstreamId}`);
    expect(request.headers['xi-api-key']).toBe(ELEVEN_KEY);
  });
});

describe('caps', () => {
  it('clones through engines that bill: two a day per org, then 429 clone_quota_exceeded with Retry-After; deleting does not give them back; the gateway\u2019s own engines still clone', async () => {
    const org = await otherOrg(h);
    const first = await cloned(org, 'sonic');
    await cloned(org, 'eleven');
    await call(h, 'DELETE', `/voices/${first.id}`, undefined, org.headers);
    const before = cartesia.received.filter((q) => q.path === '/voices/clone').length;
    const refused = await refusedClone(org, 'sonic');
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThan(86_000);
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(86_400);
    expect(refused.error).toEqual({
      message:
        'This organization cloned 2 voices through engines that bill in the last 24 hours, the most it may (2); try again later, or clone with a model the gateway runs itself.',
      type: 'rate_limit_error',
      code: 'clone_quota_exceeded',
      param: 'model_id',
    });
    expect(cartesia.received.filter((q) => q.path === '/voices/clone')).toHaveLength(before);
    await cloned(org, 'local-flite');
    // Another org has its own.
    await cloned(await otherOrg(h), 'sonic');
  });

  it('voices: three per org, then 403 voice_quota_exceeded, before the engine is asked', async () => {
    const org = await otherOrg(h);
    for (let i = 0; i < 3; i++) await cloned(org, 'local-flite');
    const before = cartesia.received.length;
    const refused = await refusedClone(org, 'sonic');
    expect(refused.status).toBe(403);
    expect(refused.retryAfter).toBeNull();
    expect(refused.error).toEqual({
      message: 'This organization has 3 voices, the most it may have (3); delete voices it no longer needs.',
      type: 'invalid_request_error',
      code: 'voice_quota_exceeded',
      param: null,
    });
    expect(cartesia.received).toHaveLength(before);
  });
});
