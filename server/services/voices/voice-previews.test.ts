// Voice previews on a real database (SQLite; PostgreSQL with TEST_DB=postgresql), with a stand-in
// for the engine that speaks them (the gateway's own is tested in gateway/routes/voices.previews.test.ts):
// which previews are asked for (seeded, imported and cloned voices, a profile prepared again, a
// new language), their clips as blobs (an org's in its storage, a platform voice's in none), the
// old clip dropped when the voice changes, failures recorded and tried again later, the lease,
// and who may hear which.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { createOrg } from '../orgs/create-org.ts';
import { deleteVoice } from './delete-voice.ts';
import { importEngineVoices } from './engine-voices.ts';
import { getVoice } from './get-voice.ts';
import { getVoicePreview } from './get-voice-preview.ts';
import { claimVoicePreview, FIRST_RETRY_MS, makeVoicePreview } from './make-voice-preview.ts';
import { previewTextFor } from './preview-stamp.ts';
import { previewSourcesVersion, reconcileVoicePreviews } from './reconcile-voice-previews.ts';
import { saveVoiceProfile } from './save-voice-profile.ts';
import { updateVoice } from './update-voice.ts';
import type { ReadyProfile, VoiceClip } from './voice-deps.ts';

const MODEL = 'tts-local';
const OTHER_MODEL = 'tts-remote';
const PLATFORM = 'platform-ada';
const LEASE_MS = 60_000;

let t: TestDatabase;
let orgId: string;
let otherOrgId: string;
let worker = 'worker-a';

/** What the engine was asked to say, and what it does next. */
let spoken: Array<{ upstreamId: string; text: string; language: string }>;
let failWith: Error | null;
/** When set, speaking waits for it (a preview still being made). */
let hold: Promise<void> | null;

const engines = {
  async speak(profiles: ReadyProfile[], text: string, language: string): Promise<VoiceClip | null> {
    if (hold) await hold;
    if (failWith) throw failWith;
    const profile = profiles[0]!;
    spoken.push({ upstreamId: profile.upstreamId, text, language });
    const wav = Buffer.from(`RIFF preview of ${profile.upstreamId} in ${language} ${newId('c')}`);
    return { samples: new Float32Array(8), sampleRate: 16_000, durationMs: 2_500, wav };
  },
};
const deps = () => ({ prisma: t.db.prisma, dataDir: t.dataDir, engines });
const signal = new AbortController().signal;

/** One pass of a worker: ask for what is wanted, then make every due preview. */
async function workerPass(now = new Date()): Promise<string[]> {
  await reconcileVoicePreviews(deps(), now);
  const results: string[] = [];
  for (
    let claimed = await claimVoicePreview(t.db.prisma, worker, LEASE_MS, now);
    claimed;
    claimed = await claimVoicePreview(t.db.prisma, worker, LEASE_MS, now)
  ) {
    results.push(`${claimed.voiceId}/${claimed.modelId}: ${await makeVoicePreview(deps(), claimed, signal, () => now)}`);
  }
  return results;
}

const previewOf = (voiceId: string, modelId = MODEL) => t.db.prisma.voicePreview.findUniqueOrThrow({ where: { voiceId_modelId: { voiceId, modelId } } });
const orgBytes = async (id: string) => (await t.db.prisma.org.findUniqueOrThrow({ where: { id } })).blobBytes;
const liveBlob = (id: string | null) => t.db.prisma.blob.findFirst({ where: { id: id ?? '', deletedAt: null } });

async function ownVoice(name: string, language = 'en'): Promise<string> {
  const id = newId('voice');
  await t.db.prisma.voice.create({ data: { id, orgId, name, language, kind: 'instant_clone', tags: [], modelFamily: MODEL } });
  await saveVoiceProfile(t.db.prisma, {
    voiceId: id,
    modelId: MODEL,
    prepared: { upstreamId: `engine-${name}`, params: { pitchHz: 120, rate: 1 }, expiresAt: null, metadata: {} },
    profileVersion: '1',
    sourceVersion: 'v1',
  });
  return id;
}

beforeAll(async () => {
  t = await createTestDatabase();
  const { prisma } = t.db;
  for (const id of [MODEL, OTHER_MODEL]) await prisma.model.create({ data: { id, modality: 'tts' } });
  await prisma.voice.create({ data: { id: PLATFORM, orgId: null, kind: 'library', name: 'Ada', language: 'fr', tags: [], modelFamily: MODEL } });
  await prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: PLATFORM, modelId: MODEL, upstreamId: 'ada', status: 'ready' } });
  orgId = (await createOrg(t.db, { name: 'previews' })).id;
  otherOrgId = (await createOrg(t.db, { name: 'other' })).id;
});
afterAll(async () => {
  await t?.drop();
});
beforeEach(() => {
  spoken = [];
  failWith = null;
  hold = null;
  worker = 'worker-a';
});

describe('voice previews', () => {
  it("a seeded platform voice and an org's clone each get one preview, in their language, stored once: the org's in its storage, the platform's in none", async () => {
    const clone = await ownVoice('narrator', 'en-GB');
    const before = await orgBytes(orgId);
    expect((await workerPass()).sort()).toEqual([`${PLATFORM}/${MODEL}: ready`, `${clone}/${MODEL}: ready`].sort());
    expect(spoken).toEqual(
      expect.arrayContaining([
        { upstreamId: 'ada', text: previewTextFor('fr'), language: 'fr' },
        { upstreamId: 'engine-narrator', text: previewTextFor('en-GB'), language: 'en-GB' },
      ]),
    );
    const platformBlob = await liveBlob((await previewOf(PLATFORM)).blobId);
    expect(platformBlob).toMatchObject({ orgId: null, contentType: 'audio/wav', durationMs: 2_500 });
    const cloneBlob = (await liveBlob((await previewOf(clone)).blobId))!;
    expect(cloneBlob.orgId).toBe(orgId);
    expect(await orgBytes(orgId)).toBe(before + BigInt(cloneBlob.sizeBytes));

    // Made once: another pass speaks nothing.
    spoken = [];
    expect(await workerPass()).toEqual([]);
    expect(spoken).toEqual([]);

    // The voice record says so; an own voice's preview is its sample blob, a platform voice's is no org's blob.
    expect(await getVoice(t.db.prisma, orgId, clone)).toMatchObject({ preview_models: [MODEL], sample_blob_id: cloneBlob.id });
    expect(await getVoice(t.db.prisma, orgId, PLATFORM)).toMatchObject({ preview_models: [MODEL], sample_blob_id: null });
  });

  it('an imported engine voice gets its preview too', async () => {
    await importEngineVoices(t.db.prisma, {
      modelId: OTHER_MODEL,
      voices: [{ id: 'eng-lars', name: 'Lars', language: 'de', gender: 'male', description: '' }],
    });
    const results = await workerPass();
    expect(results).toEqual([expect.stringMatching(new RegExp(`/${OTHER_MODEL}: ready$`))]);
    expect(spoken).toEqual([{ upstreamId: 'eng-lars', text: previewTextFor('de'), language: 'de' }]);
  });

  it("a profile prepared again, or a new language, makes it again: the old clip is dropped and gives the org's storage back", async () => {
    const voice = await ownVoice('changing');
    await workerPass();
    const first = await previewOf(voice);
    const firstBlob = (await liveBlob(first.blobId))!;
    const version = await previewSourcesVersion(t.db.prisma);

    await saveVoiceProfile(t.db.prisma, {
      voiceId: voice,
      modelId: MODEL,
      prepared: { upstreamId: 'engine-changing-2', params: { pitchHz: 180, rate: 1 }, expiresAt: null, metadata: {} },
      profileVersion: '2',
      sourceVersion: 'v1',
    });
    // The worker sees that something changed without reading every voice.
    expect(await previewSourcesVersion(t.db.prisma)).not.toBe(version);
    // Between the change and the next pass the old clip is not served as the new voice.
    expect((await getVoice(t.db.prisma, orgId, voice)).preview_models).toEqual([]);
    await expect(getVoicePreview(t.db.prisma, t.dataDir, orgId, voice)).rejects.toMatchObject({ code: 'preview_not_ready' });

    const bytes = await orgBytes(orgId);
    spoken = [];
    expect(await workerPass()).toEqual([`${voice}/${MODEL}: ready`]);
    expect(spoken).toEqual([{ upstreamId: 'engine-changing-2', text: previewTextFor('en'), language: 'en' }]);
    expect(await liveBlob(firstBlob.id)).toBeNull();
    const second = await previewOf(voice);
    expect(second.id).toBe(first.id);
    expect(second.blobId).not.toBe(first.blobId);
    expect(await orgBytes(orgId)).toBe(bytes - BigInt(firstBlob.sizeBytes) + BigInt((await liveBlob(second.blobId))!.sizeBytes));

    await updateVoice(t.db.prisma, orgId, voice, { language: 'de' });
    spoken = [];
    expect(await workerPass()).toEqual([`${voice}/${MODEL}: ready`]);
    expect(spoken).toEqual([{ upstreamId: 'engine-changing-2', text: previewTextFor('de'), language: 'de' }]);
    expect(await liveBlob(second.blobId)).toBeNull();

    // A rename changes nothing the preview says.
    const third = await previewOf(voice);
    await updateVoice(t.db.prisma, orgId, voice, { name: 'Renamed' });
    spoken = [];
    expect(await workerPass()).toEqual([]);
    expect((await previewOf(voice)).blobId).toBe(third.blobId);
  });

  it('a deleted voice loses its preview, and the org its bytes', async () => {
    const voice = await ownVoice('leaving');
    await workerPass();
    const blob = (await liveBlob((await previewOf(voice)).blobId))!;
    const bytes = await orgBytes(orgId);
    await deleteVoice(t.db.prisma, orgId, voice);
    await workerPass();
    expect(await t.db.prisma.voicePreview.count({ where: { voiceId: voice } })).toBe(0);
    expect(await liveBlob(blob.id)).toBeNull();
    expect(await orgBytes(orgId)).toBe(bytes - BigInt(blob.sizeBytes));
  });

  it('a failure is recorded and tried again later, waiting longer each time; then it is made', async () => {
    const voice = await ownVoice('flaky');
    const now = new Date();
    failWith = new ServiceError('upstream_error', 'The engine answered 500.');
    expect(await workerPass(now)).toEqual([`${voice}/${MODEL}: failed`]);
    const failed = await previewOf(voice);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, error: 'upstream_error: The engine answered 500.', blobId: null, lockedBy: null });
    expect(failed.runAfter.getTime()).toBe(now.getTime() + FIRST_RETRY_MS);
    await expect(getVoicePreview(t.db.prisma, t.dataDir, orgId, voice)).rejects.toMatchObject({
      code: 'preview_not_ready',
      message: expect.stringContaining('The last attempt failed (upstream_error: The engine answered 500.)'),
      retryAfterSeconds: 5,
    });
    // Not before its time.
    expect(await workerPass(new Date(now.getTime() + FIRST_RETRY_MS - 1))).toEqual([]);
    const later = new Date(now.getTime() + FIRST_RETRY_MS);
    expect(await workerPass(later)).toEqual([`${voice}/${MODEL}: failed`]);
    expect((await previewOf(voice)).runAfter.getTime()).toBe(later.getTime() + 2 * FIRST_RETRY_MS);
    // An engine that is gone (no model online) is a failure like any other; so is a crash of anything else.
    failWith = new Error('boom');
    const third = new Date(later.getTime() + 2 * FIRST_RETRY_MS);
    expect(await workerPass(third)).toEqual([`${voice}/${MODEL}: failed`]);
    expect(await previewOf(voice)).toMatchObject({ attempts: 3, error: 'internal_error: boom' });
    failWith = null;
    expect(await workerPass(new Date(third.getTime() + 4 * FIRST_RETRY_MS))).toEqual([`${voice}/${MODEL}: ready`]);
    expect(await previewOf(voice)).toMatchObject({ status: 'ready', error: null });
  });

  it('one worker at a time: a claimed preview is not claimed again until its lease runs out; a clip made for a voice that changed meanwhile is dropped', async () => {
    const voice = await ownVoice('leased');
    await reconcileVoicePreviews(deps());
    const now = new Date();
    const claims = await Promise.all(['worker-a', 'worker-b', 'worker-c'].map((w) => claimVoicePreview(t.db.prisma, w, LEASE_MS, now)));
    const mine = claims.filter((c) => c?.voiceId === voice);
    expect(mine).toHaveLength(1);
    expect(await claimVoicePreview(t.db.prisma, 'worker-d', LEASE_MS, now)).toBeNull();
    // A worker that died: after the lease another takes it.
    const taken = await claimVoicePreview(t.db.prisma, 'worker-d', LEASE_MS, new Date(now.getTime() + LEASE_MS + 1));
    expect(taken?.voiceId).toBe(voice);

    // While it is being made, the profile changes.
    let release = () => {};
    hold = new Promise<void>((resolve) => (release = resolve));
    const making = makeVoicePreview(deps(), taken!, signal);
    await saveVoiceProfile(t.db.prisma, {
      voiceId: voice,
      modelId: MODEL,
      prepared: { upstreamId: 'engine-leased-2', params: null, expiresAt: null, metadata: {} },
      profileVersion: '2',
      sourceVersion: 'v1',
    });
    await reconcileVoicePreviews(deps());
    const blobsBefore = await t.db.prisma.blob.count({ where: { deletedAt: null } });
    release();
    expect(await making).toBe('stale');
    expect(await t.db.prisma.blob.count({ where: { deletedAt: null } })).toBe(blobsBefore);
    hold = null;
    worker = 'worker-e';
    spoken = [];
    expect(await workerPass(new Date(now.getTime() + 2 * LEASE_MS))).toEqual([`${voice}/${MODEL}: ready`]);
    expect(spoken.map((s) => s.upstreamId)).toEqual(['engine-leased-2']);
  });

  it("who hears which: a platform voice's preview every org, an org's clone only its org; no profile for the model is 409", async () => {
    const voice = await ownVoice('private');
    await workerPass();
    const own = await getVoicePreview(t.db.prisma, t.dataDir, orgId, voice);
    expect(own).toMatchObject({ modelId: MODEL, contentType: 'audio/wav', durationMs: 2_500 });
    expect(own.bytes.toString()).toMatch(/^RIFF preview of engine-private in en /);
    await expect(getVoicePreview(t.db.prisma, t.dataDir, otherOrgId, voice)).rejects.toMatchObject({ code: 'voice_not_found' });
    for (const org of [orgId, otherOrgId]) {
      expect((await getVoicePreview(t.db.prisma, t.dataDir, org, PLATFORM, MODEL)).bytes.toString()).toMatch(/^RIFF preview of ada in fr /);
    }
    await expect(getVoicePreview(t.db.prisma, t.dataDir, orgId, voice, OTHER_MODEL)).rejects.toMatchObject({
      code: 'voice_profile_missing',
      param: 'model_id',
    });
  });
});
