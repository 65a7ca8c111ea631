// The voice operations that make voices (clone, pro clone, localize, prepare a profile, the job
// that does the work) on a real database (SQLite; PostgreSQL with TEST_DB=postgresql), with
// stand-in engines: the rules and the records are the services', whatever runs the engines.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { newId } from '../../db/ids.ts';
import { storeBlob } from '../blobs/blob-store.ts';
import { ServiceError } from '../errors.ts';
import { JOB_RETRY_AFTER_SECONDS } from '../jobs/job-queue.ts';
import type { VoiceJobPayload } from '../jobs/queue-voice-job.ts';
import { createOrg } from '../orgs/create-org.ts';
import { cloneVoice, type CloneVoiceInput } from './clone-voice.ts';
import { localizeVoice } from './localize-voice.ts';
import { prepareVoiceProfile } from './prepare-voice-profile.ts';
import { proCloneVoice } from './pro-clone-voice.ts';
import { runVoiceJob } from './run-voice-job.ts';
import { GREETING_TEXT } from './store-voice-sample.ts';
import type { VoiceClip, VoiceDeps, VoiceEngines } from './voice-deps.ts';

const CLONER = 'tts-cloner';
const SPEAKER_ONLY = 'tts-speaker';
const PLATFORM_VOICE = 'platform-ada';

let t: TestDatabase;
let engines: VoiceEngines & { online: boolean; spoken: string[]; failPrepare: boolean; modelsAsked: (string | undefined)[] };
let queuedSignals: number;
let deps: VoiceDeps;
let orgId: string;
const signal = new AbortController().signal;

const clipOf = (seconds: number): VoiceClip => ({
  samples: new Float32Array(16),
  sampleRate: 16_000,
  durationMs: seconds * 1000,
  wav: Buffer.from(`RIFF ${seconds} s ${newId('clip')}`),
});

function standInEngines(): typeof engines {
  const known = (modelId: string) => {
    if (modelId !== CLONER && modelId !== SPEAKER_ONLY) throw new ServiceError('model_not_found', `No model '${modelId}'.`, 'model');
    return modelId;
  };
  const requireCloneCapable = (modelId: string) => {
    if (modelId !== CLONER) throw new ServiceError('invalid_request', `'${modelId}' cannot clone.`, 'model_id');
  };
  return {
    online: true,
    spoken: [],
    failPrepare: false,
    modelsAsked: [],
    chooseCloneModel(modelId) {
      this.modelsAsked.push(modelId);
      if (modelId === undefined) return CLONER;
      requireCloneCapable(known(modelId));
      return modelId;
    },
    resolveModel: known,
    requireCloneCapable,
    canCloneNow() {
      return this.online;
    },
    decodeClip: (wav) => ({ samples: new Float32Array(16), sampleRate: 16_000, durationMs: 20_000, wav }),
    joinClips: async (clips) => ({ ...clips[0]!, durationMs: clips.reduce((ms, c) => ms + c.durationMs, 0) }),
    async prepare(_modelId, clip) {
      if (this.failPrepare) throw new ServiceError('upstream_error', 'The engine failed.');
      return {
        upstreamId: `engine-voice-${clip.durationMs}`,
        params: { from: clip.wav.toString() },
        expiresAt: null,
        metadata: { pitch_hz: 210 },
        gender: 'female',
        description: 'measured by the engine',
      };
    },
    async speak(profiles, text) {
      this.spoken.push(text);
      return profiles.length > 0 ? clipOf(3) : null;
    },
  };
}

beforeAll(async () => {
  t = await createTestDatabase();
  const { prisma } = t.db;
  for (const id of [CLONER, SPEAKER_ONLY]) await prisma.model.create({ data: { id, modality: 'tts' } });
  await prisma.voice.create({
    data: {
      id: PLATFORM_VOICE,
      orgId: null,
      kind: 'library',
      name: 'Ada',
      language: 'en',
      gender: 'female',
      tags: ['calm'],
      modelFamily: SPEAKER_ONLY,
      sourceVersion: 'v1',
    },
  });
  await prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: PLATFORM_VOICE, modelId: SPEAKER_ONLY, upstreamId: 'ada', status: 'ready' } });
});
afterAll(async () => {
  await t?.drop();
});
beforeEach(async () => {
  engines = standInEngines();
  queuedSignals = 0;
  orgId = (await createOrg(t.db, { name: 'voices' })).id;
  deps = { prisma: t.db.prisma, dataDir: t.dataDir, maxJobsPerOrg: 5, jobQueued: () => queuedSignals++, engines };
});

const cloneInput = (over: Partial<CloneVoiceInput> = {}): CloneVoiceInput => ({
  orgId,
  name: 'Narrator',
  language: 'en',
  mode: 'similarity',
  transcript: null,
  modelId: undefined,
  profileVersion: '1',
  clip: clipOf(12),
  blobId: null,
  clipParam: 'file',
  ...over,
});
const liveBlobs = () => t.db.prisma.blob.count({ where: { orgId, deletedAt: null } });
const voicesOf = () => t.db.prisma.voice.count({ where: { orgId } });
const audioBlob = async (seconds: number | null) =>
  (
    await storeBlob(t.db.prisma, t.dataDir, {
      orgId,
      contentType: 'audio/wav',
      bytes: Buffer.from(`clip ${newId('b')}`),
      durationMs: seconds === null ? null : seconds * 1000,
    })
  ).id;

describe('instant clone', () => {
  it('with an engine online: the voice now, with a ready profile, what the engine measured, and the greeting as its sample', async () => {
    const cloned = await cloneVoice(deps, cloneInput({ description: '' }), signal);
    if (cloned.status !== 'created') throw new Error(`expected a voice, got ${cloned.status}`);
    expect(cloned.voice).toMatchObject({
      name: 'Narrator',
      kind: 'instant_clone',
      gender: 'female',
      description: 'measured by the engine',
      model_family: CLONER,
      is_owner: true,
    });
    expect(cloned.voice.source_metadata).toMatchObject({ mode: 'similarity', clip_seconds: 12, pitch_hz: 210 });
    expect(cloned.voice.profiles).toEqual([
      expect.objectContaining({ model_id: CLONER, upstream_id: 'engine-voice-12000', status: 'ready', profile_version: '1' }),
    ]);
    expect(cloned.voice.sample_blob_id).not.toBeNull();
    expect(engines.spoken).toEqual([GREETING_TEXT]);
    expect(queuedSignals).toBe(0);
  });

  it('refuses a clip under 10 s, naming the field it came in, before the model is chosen or anything is stored', async () => {
    await expect(cloneVoice(deps, cloneInput({ clip: clipOf(9.9), clipParam: 'blob_id' }), signal)).rejects.toMatchObject({
      code: 'clip_too_short',
      param: 'blob_id',
    });
    expect(engines.modelsAsked).toEqual([]);
    expect(await liveBlobs()).toBe(0);
  });

  it('a refused model stores nothing; an engine failure deletes the uploaded clip again and makes no voice', async () => {
    await expect(cloneVoice(deps, cloneInput({ modelId: SPEAKER_ONLY }), signal)).rejects.toMatchObject({ code: 'invalid_request', param: 'model_id' });
    engines.failPrepare = true;
    await expect(cloneVoice(deps, cloneInput(), signal)).rejects.toMatchObject({ code: 'upstream_error' });
    expect(await liveBlobs()).toBe(0);
    expect(await voicesOf()).toBe(0);
  });

  it('with no engine online: the voice, a queued profile and a job, and the worker told; a clip from a blob is kept as it is', async () => {
    engines.online = false;
    const blobId = await audioBlob(12);
    const cloned = await cloneVoice(deps, cloneInput({ blobId, clipParam: 'blob_id' }), signal);
    if (cloned.status !== 'queued') throw new Error(`expected a job, got ${cloned.status}`);
    const voice = await t.db.prisma.voice.findUniqueOrThrow({ where: { id: cloned.job.voice_id }, include: { profiles: true } });
    expect(voice).toMatchObject({ sourceAudioBlobId: blobId, kind: 'instant_clone' });
    expect(voice.profiles).toEqual([expect.objectContaining({ modelId: CLONER, status: 'queued' })]);
    const job = await t.db.prisma.job.findUniqueOrThrow({ where: { id: cloned.job.job_id } });
    expect(job).toMatchObject({ kind: 'instant_clone', status: 'queued', voiceId: voice.id });
    expect(queuedSignals).toBe(1);
    expect(await liveBlobs()).toBe(1);
  });
});

describe('professional clone', () => {
  it('counts the stored durations of every clip: under 30 s or over 10 minutes is refused; a clip that is not audio names its place', async () => {
    const short = [await audioBlob(14), await audioBlob(15)];
    await expect(
      proCloneVoice(deps, { orgId, name: 'Pro', language: 'en', blobIds: short, transcript: null, modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({
      code: 'clip_too_short',
      param: 'blob_ids',
      message: expect.stringContaining('29.0 s'),
    });
    const long = [await audioBlob(400), await audioBlob(201)];
    await expect(
      proCloneVoice(deps, { orgId, name: 'Pro', language: 'en', blobIds: long, transcript: null, modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({ code: 'invalid_request', param: 'blob_ids' });
    const notAudio = [await audioBlob(20), await audioBlob(null)];
    await expect(
      proCloneVoice(deps, { orgId, name: 'Pro', language: 'en', blobIds: notAudio, transcript: null, modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({ code: 'unsupported_audio_format', param: 'blob_ids[1]' });
    await expect(
      proCloneVoice(deps, { orgId, name: 'Pro', language: 'en', blobIds: ['blob_missing'], transcript: null, modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({ code: 'blob_not_found', param: 'blob_ids[0]' });
    expect(await voicesOf()).toBe(0);
  });

  it('30 s in all is a job that the worker makes from every clip joined', async () => {
    const blobIds = [await audioBlob(10), await audioBlob(20)];
    const queued = await proCloneVoice(deps, { orgId, name: 'Pro', language: 'en', blobIds, transcript: 'hello', modelId: CLONER, profileVersion: '2' });
    const job = await t.db.prisma.job.findUniqueOrThrow({ where: { id: queued.job_id } });
    expect(job.input).toMatchObject({ modelId: CLONER, apiKind: 'pro_clone', blobIds, profileVersion: '2' });
    const voice = await t.db.prisma.voice.findUniqueOrThrow({ where: { id: queued.voice_id } });
    expect(voice).toMatchObject({
      kind: 'pro_clone',
      sourceAudioBlobId: blobIds[0],
      sourceTranscript: 'hello',
      sourceMetadata: { clip_seconds: 30, blob_ids: blobIds },
    });

    // decodeClip measures each stored clip as 20 s: two of them joined are 40 s.
    const done = await runVoiceJob(deps, job, signal);
    expect(done.profile).toMatchObject({ model_id: CLONER, upstream_id: 'engine-voice-40000', status: 'ready', profile_version: '2' });
  });
});

describe('localize', () => {
  it('a platform voice: named "<name> (<language>)", made for the parent\u2019s model unless one is named, from a sample the parent speaks', async () => {
    const queued = await localizeVoice(deps, { orgId, voiceId: PLATFORM_VOICE, language: 'fr', name: undefined, modelId: CLONER, profileVersion: '1' });
    const voice = await t.db.prisma.voice.findUniqueOrThrow({ where: { id: queued.voice_id } });
    expect(voice).toMatchObject({
      orgId,
      name: 'Ada (fr)',
      language: 'fr',
      kind: 'localized',
      parentVoiceId: PLATFORM_VOICE,
      sourceAudioBlobId: null,
      gender: 'female',
    });
    const job = await t.db.prisma.job.findUniqueOrThrow({ where: { id: queued.job_id } });
    expect(job.input as unknown as VoiceJobPayload).toMatchObject({ modelId: CLONER, apiKind: 'localize', sampleFromVoiceId: PLATFORM_VOICE });

    // Without a model named, the parent's own is asked for (and refused here: it cannot clone).
    await expect(
      localizeVoice(deps, { orgId, voiceId: PLATFORM_VOICE, language: 'de', name: 'Ada auf Deutsch', modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({ code: 'invalid_request', param: 'model_id' });
    expect(engines.modelsAsked).toEqual([CLONER, SPEAKER_ONLY]);

    const done = await runVoiceJob(deps, job, signal);
    expect(done.profile).toMatchObject({ model_id: CLONER, status: 'ready' });
    expect(engines.spoken[0]).toMatch(/^The quick brown fox/);
    expect(engines.spoken[1]).toBe(GREETING_TEXT);
    expect(await t.db.prisma.voice.findUniqueOrThrow({ where: { id: voice.id } })).toMatchObject({
      description: 'measured by the engine',
      sampleBlobId: expect.any(String),
    });
  });

  it('a voice another org cannot see is not found', async () => {
    const other = (await createOrg(t.db, { name: 'other' })).id;
    const queued = await proCloneVoice(
      { ...deps, maxJobsPerOrg: 5 },
      {
        orgId: other,
        name: 'Theirs',
        language: 'en',
        blobIds: [(await storeBlob(t.db.prisma, t.dataDir, { orgId: other, contentType: 'audio/wav', bytes: Buffer.from('x'), durationMs: 40_000 })).id],
        transcript: null,
        modelId: undefined,
        profileVersion: '1',
      },
    );
    await expect(
      localizeVoice(deps, { orgId, voiceId: queued.voice_id, language: 'fr', name: undefined, modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({ code: 'voice_not_found' });
  });
});

describe('prepare a profile', () => {
  it('a ready profile of the version asked for is answered as it is; another version, or none, is a job; a platform voice cannot be prepared', async () => {
    engines.online = false;
    const cloned = await cloneVoice(deps, cloneInput(), signal);
    if (cloned.status !== 'queued') throw new Error(`expected a job, got ${cloned.status}`);
    const { job } = cloned;
    await runVoiceJob(deps, await t.db.prisma.job.findUniqueOrThrow({ where: { id: job.job_id } }), signal);

    await expect(prepareVoiceProfile(deps, { orgId, voiceId: job.voice_id, modelId: CLONER, profileVersion: undefined })).resolves.toMatchObject({
      status: 'ready',
      profile: { model_id: CLONER, status: 'ready' },
    });
    const again = await prepareVoiceProfile(deps, { orgId, voiceId: job.voice_id, modelId: CLONER, profileVersion: '2' });
    expect(again).toMatchObject({ status: 'queued', voice_id: job.voice_id });
    // The ready profile keeps serving until the new one replaces it.
    expect(await t.db.prisma.voiceProfile.findFirstOrThrow({ where: { voiceId: job.voice_id, modelId: CLONER } })).toMatchObject({ status: 'ready' });

    await expect(prepareVoiceProfile(deps, { orgId, voiceId: job.voice_id, modelId: SPEAKER_ONLY, profileVersion: undefined })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'model_id',
    });
    await expect(prepareVoiceProfile(deps, { orgId, voiceId: PLATFORM_VOICE, modelId: CLONER, profileVersion: undefined })).rejects.toMatchObject({
      code: 'voice_read_only',
    });
    await expect(prepareVoiceProfile(deps, { orgId, voiceId: PLATFORM_VOICE, modelId: SPEAKER_ONLY, profileVersion: undefined })).resolves.toMatchObject({
      status: 'ready',
    });
  });
});

describe('jobs in flight', () => {
  it('past the org\u2019s cap: rate_limit_exceeded with when to retry (a number: each edge says it its own way), and nothing created', async () => {
    const capped = { ...deps, maxJobsPerOrg: 1 };
    engines.online = false;
    await cloneVoice(capped, cloneInput(), signal);
    const refused = await cloneVoice(capped, cloneInput({ name: 'One too many' }), signal).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused).toMatchObject({ code: 'rate_limit_exceeded', retryAfterSeconds: JOB_RETRY_AFTER_SECONDS });
    expect(refused).not.toHaveProperty('headers');
    expect(await voicesOf()).toBe(1);
    expect(await liveBlobs()).toBe(1);
    expect(queuedSignals).toBe(1);
  });
});
