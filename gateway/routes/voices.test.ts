// Voice library routes over real HTTP with the local engines (flite, espeak-ng): listing and
// its filters and cursor, get/rename/retag/delete/save, instant clone from a real clip spoken by
// a local engine (then used to synthesize), blobs, profiles, localize, pro clone, jobs.
// Isolation between two orgs on every resource. Errors in the envelope with exact codes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWav } from '../audio/wav.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { expectError, post, startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';
import { call, cloneMultipart, otherOrg, speak, uploadBlob, waitForJob, type OtherOrg } from '../../test/support/voice-routes.ts';
import { PLATFORM_VOICES } from '../../server/services/voices/platform-voices.ts';
import { newId } from '../../server/db/ids.ts';

let h: GatewayHarness;
let other: OtherOrg;
let maleClip: Buffer;
let femaleClip: Buffer;

const VOICE_FIELDS = [
  'created_at',
  'description',
  'featured',
  'gender',
  'id',
  'is_owner',
  'kind',
  'language',
  'model_family',
  'name',
  'parent_voice_id',
  'preview_models',
  'profiles',
  'saved',
  'sample_blob_id',
  'source_audio_blob_id',
  'source_metadata',
  'source_transcript',
  'source_version',
  'tags',
];

beforeAll(async () => {
  h = await startTtsGateway({ env: { SVC_JOB_POLL_MS: '50' } });
  other = await otherOrg(h);
  maleClip = speak('flite', 'rms');
  femaleClip = speak('flite', 'slt');
}, 60_000);

afterAll(async () => {
  await h?.close();
});

async function allVoices(query: string, headers = h.headers): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const { status, body } = await call(h, 'GET', `/voices?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, undefined, headers);
    expect(status).toBe(200);
    out.push(...body.voices);
    cursor = body.next_cursor;
  } while (cursor);
  return out;
}

describe('GET /voices', () => {
  it('lists the platform voices with every Voice field, newest first, default scope all', async () => {
    const { status, body } = await call(h, 'GET', '/voices');
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['next_cursor', 'voices']);
    const ids = body.voices.map((v: any) => v.id);
    for (const v of PLATFORM_VOICES) expect(ids).toContain(v.id);
    const slt = body.voices.find((v: any) => v.id === 'flite-slt');
    expect(Object.keys(slt).sort()).toEqual([...VOICE_FIELDS].sort());
    expect(slt).toMatchObject({ name: 'Sally', gender: 'female', language: 'en', featured: true, kind: 'library', is_owner: false, saved: false });
    expect(slt.profiles).toEqual([expect.objectContaining({ model_id: 'local-flite', upstream_id: 'slt', status: 'ready', expires_at: null })]);
    expect(Number.isNaN(Date.parse(slt.created_at))).toBe(false);
  });

  it('filters by scope, gender, language, tag and text', async () => {
    const featured = await allVoices('scope=featured');
    expect(featured.length).toBe(PLATFORM_VOICES.filter((v) => v.featured).length);
    expect(featured.every((v) => v.featured)).toBe(true);
    const female = await allVoices('gender=female');
    expect(female.length).toBeGreaterThan(0);
    expect(female.every((v) => v.gender === 'female')).toBe(true);
    const english = (await allVoices('language=en')).map((v) => v.language);
    expect(new Set(english)).toEqual(new Set(['en', 'en-US', 'en-GB']));
    expect((await allVoices('language=en-gb')).map((v) => v.id)).toEqual(['espeak-en-gb-m']);
    expect((await allVoices('tag=Scottish')).map((v) => v.id)).toEqual(['flite-awb']);
    expect((await allVoices('q=british')).map((v) => v.id)).toEqual(['espeak-en-gb-m']);
    expect((await allVoices('q=american%20calm')).map((v) => v.id)).toEqual(['flite-slt']);
    expect(await allVoices('q=zzzz-nothing')).toEqual([]);
    // LIKE wildcards are searched for literally.
    expect(await allVoices('q=%25')).toEqual([]);
    expect(await allVoices('q=_')).toEqual([]);
    expect(await allVoices('tag=%25')).toEqual([]);
    expect(await allVoices('scope=mine')).toEqual([]);
  });

  it('pages with an opaque cursor: no duplicates and no gaps while voices are added', async () => {
    const before = (await allVoices('limit=200')).map((v) => v.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let page = 0;
    do {
      const { body } = await call(h, 'GET', `/voices?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(body.voices.length).toBeLessThanOrEqual(3);
      seen.push(...body.voices.map((v: any) => v.id));
      cursor = body.next_cursor;
      // Voices created mid-walk (straight into the database, as another client would).
      if (page++ < 3) {
        await h.testDb.db.prisma.voice.create({ data: { id: newId('voice'), orgId: h.orgId, name: `added ${page}`, tags: [], kind: 'instant_clone' } });
      }
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of before) expect(seen).toContain(id);
    await h.testDb.db.prisma.voice.deleteMany({ where: { name: { startsWith: 'added ' } } });
  });

  it('rejects unknown scopes, bad limits, bad cursors and unknown parameters', async () => {
    await expectError(await fetch(`${h.url}/voices?scope=everything`, { headers: h.headers }), { status: 400, code: 'invalid_request', param: 'scope' });
    await expectError(await fetch(`${h.url}/voices?limit=0`, { headers: h.headers }), { status: 400, code: 'invalid_request', param: 'limit' });
    await expectError(await fetch(`${h.url}/voices?limit=201`, { headers: h.headers }), { status: 400, code: 'invalid_request', param: 'limit' });
    await expectError(await fetch(`${h.url}/voices?limit=abc`, { headers: h.headers }), { status: 400, code: 'invalid_request', param: 'limit' });
    await expectError(await fetch(`${h.url}/voices?cursor=not-a-cursor`, { headers: h.headers }), { status: 400, code: 'invalid_request', param: 'cursor' });
    await expectError(await fetch(`${h.url}/voices?languge=en`, { headers: h.headers }), { status: 400, code: 'invalid_request', param: 'languge' });
    await expectError(await fetch(`${h.url}/voices`), { status: 401, code: 'invalid_api_key', param: null });
  });
});

describe('instant clone', () => {
  let voiceId: string;

  it('clones a real clip (multipart) synchronously: 201 with a ready profile, then synthesizes with it', async () => {
    const { status, body } = await cloneMultipart(h, maleClip, {
      name: 'Support Alex',
      language: 'en',
      mode: 'similarity',
      transcript: 'Good morning',
      model_id: 'local-flite',
    });
    expect(status, JSON.stringify(body)).toBe(201);
    expect(Object.keys(body).sort()).toEqual([...VOICE_FIELDS].sort());
    expect(body).toMatchObject({
      name: 'Support Alex',
      kind: 'instant_clone',
      is_owner: true,
      gender: 'male',
      language: 'en',
      source_transcript: 'Good morning',
      model_family: 'local-flite',
    });
    expect(body.source_audio_blob_id).toMatch(/^blob_/);
    // Its preview (and sample blob) is made after the answer, by the preview worker (gateway/routes/voices.previews.test.ts).
    expect(body).toMatchObject({ sample_blob_id: null, preview_models: [] });
    expect(body.source_metadata.analysis.median_f0_hz).toBeGreaterThan(60);
    expect(body.profiles).toEqual([
      expect.objectContaining({ model_id: 'local-flite', status: 'ready', profile_version: '1', source_version: body.source_version }),
    ]);
    voiceId = body.id;

    const res = await post(h, '/tts/bytes', ttsBody({ voice: { mode: 'id', id: voiceId } }));
    expect(res.status).toBe(200);
    const wav = parseWav(Buffer.from(await res.arrayBuffer()));
    expect(wav.samples.length).toBeGreaterThan(wav.sampleRate / 2);
  });

  it('shows the clone to its org only', async () => {
    expect((await allVoices('scope=mine')).map((v) => v.id)).toContain(voiceId);
    expect((await allVoices('scope=all', other.headers)).map((v) => v.id)).not.toContain(voiceId);
    expect(await allVoices('scope=mine', other.headers)).toEqual([]);
    for (const [method, path, body] of [
      ['GET', `/voices/${voiceId}`, undefined],
      ['PATCH', `/voices/${voiceId}`, { name: 'stolen' }],
      ['DELETE', `/voices/${voiceId}`, undefined],
      ['POST', `/voices/${voiceId}/save`, undefined],
      ['POST', `/voices/${voiceId}/profiles`, { model_id: 'local-espeak' }],
      ['POST', `/voices/${voiceId}/localize`, { language: 'fr' }],
    ] as const) {
      const r = await fetch(`${h.url}${path}`, {
        method,
        headers: body ? other.headers : { authorization: other.headers.authorization! },
        body: body ? JSON.stringify(body) : undefined,
      });
      await expectError(r, { status: 404, code: 'voice_not_found', param: 'id' });
    }
    const tts = await fetch(`${h.url}/tts/bytes`, {
      method: 'POST',
      headers: other.headers,
      body: JSON.stringify(ttsBody({ voice: { mode: 'id', id: voiceId } })),
    });
    await expectError(tts, { status: 404, code: 'voice_not_found', param: 'voice.id' });
  });

  it('estimates a female clip as female', async () => {
    const { status, body } = await cloneMultipart(h, femaleClip, { name: 'Sam', model_id: 'local-espeak' });
    expect(status).toBe(201);
    expect(body.gender).toBe('female');
    expect(body.profiles[0]).toMatchObject({ model_id: 'local-espeak', status: 'ready' });
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: 'local-espeak', voice: { mode: 'id', id: body.id } }));
    expect(res.status).toBe(200);
  });

  it('clones from an uploaded blob (JSON) and rejects clips under 10 s measured from the audio', async () => {
    const blob = await uploadBlob(h, maleClip);
    expect(blob.status).toBe(201);
    expect(blob.body).toMatchObject({ object: 'blob', content_type: 'audio/wav' });
    expect(blob.body.duration_seconds).toBeGreaterThan(10);
    const r = await call(h, 'POST', '/voices/clone', { blob_id: blob.body.id, name: 'From blob', model_id: 'local-flite', mode: 'stability' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.source_audio_blob_id).toBe(blob.body.id);
    expect(r.body.source_metadata.mode).toBe('stability');

    const short = speak('flite', 'rms', 'Hello there, this is short.');
    const m = await cloneMultipart(h, short, { name: 'Short' });
    expect(m.status).toBe(400);
    expect(m.body.error).toMatchObject({ code: 'clip_too_short', param: 'file' });
    const shortBlob = await uploadBlob(h, short);
    await expectError(await post(h, '/voices/clone', { blob_id: shortBlob.body.id, name: 'Short' }), { status: 400, code: 'clip_too_short', param: 'blob_id' });
    // Another org's blob is not found.
    await expectError(
      await fetch(`${h.url}/voices/clone`, { method: 'POST', headers: other.headers, body: JSON.stringify({ blob_id: blob.body.id, name: 'x' }) }),
      { status: 404, code: 'blob_not_found', param: 'blob_id' },
    );
    await expectError(await fetch(`${h.url}/blobs/${blob.body.id}`, { headers: other.headers }), { status: 404, code: 'blob_not_found', param: 'blob_id' });
    const content = await fetch(`${h.url}/blobs/${blob.body.id}/content`, { headers: h.headers });
    expect(
      Buffer.from(await content.arrayBuffer())
        .subarray(0, 4)
        .toString(),
    ).toBe('RIFF');
  });

  it('validates the clone request', async () => {
    const mp3 = Buffer.concat([Buffer.from('ID3'), Buffer.alloc(4000)]);
    let m = await cloneMultipart(h, mp3, { name: 'x' });
    expect(m.status).toBe(400);
    expect(m.body.error.code).toBe('unsupported_audio_format');
    m = await cloneMultipart(h, maleClip, {});
    expect([m.status, m.body.error.param]).toEqual([400, 'name']);
    m = await cloneMultipart(h, maleClip, { name: 'x', mode: 'exact' });
    expect([m.status, m.body.error.param]).toEqual([400, 'mode']);
    m = await cloneMultipart(h, maleClip, { name: 'x', transcript: 'a'.repeat(20_001) });
    expect([m.status, m.body.error.param]).toEqual([400, 'transcript']);
    m = await cloneMultipart(h, maleClip, { name: 'x', model_id: 'local-stt-nope' });
    expect([m.status, m.body.error.code]).toEqual([404, 'model_not_found']);
    await expectError(await post(h, '/voices/clone', { name: 'no clip' }), { status: 400, code: 'invalid_request', param: 'blob_id' });
    await expectError(await post(h, '/voices/clone', '[1,2]'), { status: 400, code: 'invalid_json', param: null });
    const big = Buffer.alloc(26 * 1024 * 1024);
    m = await cloneMultipart(h, big, { name: 'big' });
    expect([m.status, m.body.error.code]).toEqual([413, 'body_too_large']);
  });
});

describe('owned voice changes', () => {
  let id: string;
  beforeAll(async () => {
    const r = await cloneMultipart(h, maleClip, { name: 'Editable', model_id: 'local-flite' });
    id = r.body.id;
  });

  it('renames, retags and re-describes an owned voice; search and tag filter follow', async () => {
    const r = await call(h, 'PATCH', `/voices/${id}`, { name: 'Receptionist', tags: ['Warm', 'front-desk', 'warm'], description: 'Answers the phone' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ name: 'Receptionist', tags: ['warm', 'front-desk'], description: 'Answers the phone' });
    expect((await allVoices('tag=front-desk')).map((v) => v.id)).toEqual([id]);
    expect((await allVoices('q=receptionist')).map((v) => v.id)).toEqual([id]);
    expect((await call(h, 'GET', `/voices/${id}`)).body.name).toBe('Receptionist');
    await expectError(await fetch(`${h.url}/voices/${id}`, { method: 'PATCH', headers: h.headers, body: JSON.stringify({}) }), {
      status: 400,
      code: 'invalid_request',
      param: null,
    });
    await expectError(await fetch(`${h.url}/voices/${id}`, { method: 'PATCH', headers: h.headers, body: JSON.stringify({ name: '' }) }), {
      status: 400,
      code: 'invalid_request',
      param: 'name',
    });
    await expectError(await fetch(`${h.url}/voices/${id}`, { method: 'PATCH', headers: h.headers, body: JSON.stringify({ owner: 'me' }) }), {
      status: 400,
      code: 'invalid_request',
      param: 'owner',
    });
  });

  it('refuses to change platform voices with 403 voice_read_only', async () => {
    await expectError(await fetch(`${h.url}/voices/flite-slt`, { method: 'PATCH', headers: h.headers, body: JSON.stringify({ name: 'Mine now' }) }), {
      status: 403,
      code: 'voice_read_only',
      param: 'id',
    });
    await expectError(await fetch(`${h.url}/voices/flite-slt`, { method: 'DELETE', headers: { authorization: h.headers.authorization! } }), {
      status: 403,
      code: 'voice_read_only',
      param: 'id',
    });
    expect((await call(h, 'GET', '/voices/flite-slt')).body.name).toBe('Sally');
  });

  it('saves and unsaves voices (the saved scope)', async () => {
    expect((await call(h, 'POST', '/voices/flite-rms/save')).body.saved).toBe(true);
    expect((await call(h, 'POST', `/voices/${id}/save`)).body.saved).toBe(true);
    expect(new Set((await allVoices('scope=saved')).map((v) => v.id))).toEqual(new Set(['flite-rms', id]));
    expect(await allVoices('scope=saved', other.headers)).toEqual([]);
    expect((await call(h, 'DELETE', '/voices/flite-rms/save')).body.saved).toBe(false);
    expect((await allVoices('scope=saved')).map((v) => v.id)).toEqual([id]);
  });

  it('soft-deletes an owned voice: {id, deleted:true}, then gone everywhere', async () => {
    const r = await call(h, 'DELETE', `/voices/${id}`);
    expect(r).toMatchObject({ status: 200, body: { id, deleted: true } });
    await expectError(await fetch(`${h.url}/voices/${id}`, { headers: h.headers }), { status: 404, code: 'voice_not_found', param: 'id' });
    expect((await allVoices('scope=all')).map((v) => v.id)).not.toContain(id);
    await expectError(await post(h, '/tts/bytes', ttsBody({ voice: { mode: 'id', id } })), { status: 404, code: 'voice_not_found', param: 'voice.id' });
    await expectError(await fetch(`${h.url}/voices/${id}`, { method: 'DELETE', headers: { authorization: h.headers.authorization! } }), {
      status: 404,
      code: 'voice_not_found',
      param: 'id',
    });
    const row = await h.testDb.db.prisma.voice.findUniqueOrThrow({ where: { id } });
    expect(row.deletedAt).not.toBeNull();
  });
});

describe('profiles, localize, pro clone and jobs', () => {
  it('answers 200 with a cached profile, 403 for a platform voice on another model', async () => {
    const r = await call(h, 'POST', '/voices/flite-slt/profiles', { model_id: 'local-flite' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ voice_id: 'flite-slt', status: 'ready', profile: { model_id: 'local-flite', upstream_id: 'slt' } });
    await expectError(await post(h, '/voices/flite-slt/profiles', { model_id: 'local-espeak' }), { status: 403, code: 'voice_read_only', param: 'id' });
    await expectError(await post(h, '/voices/flite-slt/profiles', { model_id: 'nope' }), { status: 404, code: 'model_not_found', param: 'model' });
    await expectError(await post(h, '/voices/voice_missing/profiles', { model_id: 'local-flite' }), { status: 404, code: 'voice_not_found', param: 'id' });
    await expectError(await post(h, '/voices/flite-slt/profiles', {}), { status: 400, code: 'invalid_request', param: 'model_id' });
  });

  it('prepares an owned voice for another model with a job (202), which succeeds; TTS then works on that model', async () => {
    const clone = await cloneMultipart(h, maleClip, { name: 'Two engines', model_id: 'local-flite' });
    const id = clone.body.id;
    await expectError(await post(h, '/tts/bytes', ttsBody({ model_id: 'local-espeak', voice: { mode: 'id', id } })), {
      status: 409,
      code: 'voice_profile_missing',
      param: 'voice.id',
    });
    const r = await call(h, 'POST', `/voices/${id}/profiles`, { model_id: 'local-espeak', profile_version: '2' });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ job_id: expect.stringMatching(/^job_/), voice_id: id, status: 'queued' });
    const job = await waitForJob(h, r.body.job_id);
    expect(job).toMatchObject({
      id: r.body.job_id,
      kind: 'instant_clone',
      status: 'succeeded',
      result: { voice_id: id, profile: { model_id: 'local-espeak', profile_version: '2' } },
    });
    expect(job.error).toBeUndefined();
    expect(Number.isNaN(Date.parse(job.updated_at))).toBe(false);
    expect((await post(h, '/tts/bytes', ttsBody({ model_id: 'local-espeak', voice: { mode: 'id', id } }))).status).toBe(200);
    const again = await call(h, 'POST', `/voices/${id}/profiles`, { model_id: 'local-espeak' });
    expect(again.status).toBe(200);
    // Jobs are per org.
    await expectError(await fetch(`${h.url}/jobs/${r.body.job_id}`, { headers: other.headers }), { status: 404, code: 'job_not_found', param: 'id' });
    await expectError(await fetch(`${h.url}/jobs/job_nope`, { headers: h.headers }), { status: 404, code: 'job_not_found', param: 'id' });
  });

  it('localizes a platform voice into a new owned voice (job)', async () => {
    const r = await call(h, 'POST', '/voices/flite-slt/localize', { language: 'fr', model_id: 'local-espeak' });
    expect(r.status).toBe(202);
    const job = await waitForJob(h, r.body.job_id);
    expect(job).toMatchObject({ kind: 'localize', status: 'succeeded' });
    const v = (await call(h, 'GET', `/voices/${r.body.voice_id}`)).body;
    expect(v).toMatchObject({ kind: 'localized', parent_voice_id: 'flite-slt', language: 'fr', is_owner: true, gender: 'female' });
    expect(v.profiles[0]).toMatchObject({ model_id: 'local-espeak', status: 'ready' });
    expect(v.profiles[0].upstream_id).toMatch(/^fr/);
  });

  it('pro-clones from several uploaded clips (≥ 30 s in all) with a job', async () => {
    const blobs = [];
    for (const clip of [maleClip, maleClip, maleClip]) blobs.push((await uploadBlob(h, clip)).body.id);
    await expectError(await post(h, '/voices/pro-clone', { name: 'Pro', blob_ids: blobs.slice(0, 1), model_id: 'local-flite' }), {
      status: 400,
      code: 'clip_too_short',
      param: 'blob_ids',
    });
    const r = await call(h, 'POST', '/voices/pro-clone', { name: 'Pro', blob_ids: blobs, model_id: 'local-flite' });
    expect(r.status).toBe(202);
    const job = await waitForJob(h, r.body.job_id);
    expect(job).toMatchObject({ kind: 'pro_clone', status: 'succeeded', result: { voice_id: r.body.voice_id } });
    expect((await call(h, 'GET', `/voices/${r.body.voice_id}`)).body).toMatchObject({ kind: 'pro_clone', gender: 'male' });
  });
});

describe('blobs', () => {
  it('enforces the per-org storage quota (250 MB) with 413 storage_quota_exceeded', async () => {
    const q = await otherOrg(h);
    // A live blob of almost the whole quota, counted as uploads count it (Org.blobBytes).
    await h.testDb.db.prisma.blob.create({
      data: { id: newId('blob'), orgId: q.orgId, contentType: 'audio/wav', sizeBytes: 250 * 1024 * 1024 - 1000, sha256: 'x', storageKey: 'none' },
    });
    await h.testDb.db.prisma.org.update({ where: { id: q.orgId }, data: { blobBytes: 250 * 1024 * 1024 - 1000 } });
    const r = await fetch(`${h.url}/blobs`, {
      method: 'POST',
      headers: { authorization: q.headers.authorization!, 'content-type': 'audio/wav' },
      body: new Uint8Array(maleClip),
    });
    await expectError(r, { status: 413, code: 'storage_quota_exceeded', param: 'file' });
    expect(await h.testDb.db.prisma.blob.count({ where: { orgId: q.orgId } })).toBe(1);
  });

  it('takes raw PCM with sample_rate and stores it as WAV; refuses compressed audio; deletes', async () => {
    const wav = parseWav(maleClip);
    const pcm = Buffer.alloc(wav.samples.length * 2);
    wav.samples.forEach((s, i) => pcm.writeInt16LE(Math.round(Math.max(-1, Math.min(1, s)) * 32767), i * 2));
    const r = await fetch(`${h.url}/blobs?sample_rate=${wav.sampleRate}`, {
      method: 'POST',
      headers: { authorization: h.headers.authorization!, 'content-type': 'application/octet-stream' },
      body: new Uint8Array(pcm),
    });
    const blob = (await r.json()) as any;
    expect(r.status).toBe(201);
    expect(blob.duration_seconds).toBeCloseTo(wav.samples.length / wav.sampleRate, 2);
    const ogg = await fetch(`${h.url}/blobs`, {
      method: 'POST',
      headers: { authorization: h.headers.authorization!, 'content-type': 'audio/wav' },
      body: new Uint8Array(Buffer.concat([Buffer.from('OggS'), Buffer.alloc(100)])),
    });
    await expectError(ogg, { status: 400, code: 'unsupported_audio_format', param: 'file' });
    const notWav = await fetch(`${h.url}/blobs`, {
      method: 'POST',
      headers: { authorization: h.headers.authorization!, 'content-type': 'audio/wav' },
      body: 'xx',
    });
    await expectError(notWav, { status: 400, code: 'unsupported_audio_format', param: 'file' });
    await expectError(await fetch(`${h.url}/blobs/${blob.id}`, { method: 'DELETE', headers: { authorization: other.headers.authorization! } }), {
      status: 404,
      code: 'blob_not_found',
      param: 'blob_id',
    });
    expect((await call(h, 'DELETE', `/blobs/${blob.id}`)).body).toEqual({ id: blob.id, deleted: true });
    await expectError(await fetch(`${h.url}/blobs/${blob.id}`, { headers: h.headers }), { status: 404, code: 'blob_not_found', param: 'blob_id' });
  });
});

describe('balance', () => {
  it('voice routes need a positive balance (402), like every metered route', async () => {
    await h.testDb.db.prisma.org.update({ where: { id: other.orgId }, data: { balanceMicros: 0n } });
    await expectError(await fetch(`${h.url}/voices`, { headers: other.headers }), { status: 402, code: 'insufficient_quota', param: null });
    await h.testDb.db.prisma.org.update({ where: { id: other.orgId }, data: { balanceMicros: 10_000_000n } });
  });
});
