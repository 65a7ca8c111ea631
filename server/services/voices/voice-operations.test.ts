// The voice operations that make voices (clone, pro clone, localize, prepare a profile, the job
// that does the work) on a real database (SQLite; PostgreSQL with TEST_DB=postgresql), with
// stand-in engines: the rules and the records are the services', whatever runs the engines.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { newId } from '../../db/ids.ts';
import { storeBlob } from '../blobs/blob-store.ts';
import { ServiceError } from '../errors.ts';
import { JOB_RETRY_AFTER_SECONDS, getJob, listJobs } from '../jobs/job-queue.ts';
import type { VoiceJobPayload } from '../jobs/queue-voice-job.ts';
import { createOrg } from '../orgs/create-org.ts';
import { cloneVoice, type CloneVoiceInput } from './clone-voice.ts';
import { deleteEngineCopies } from './delete-engine-copies.ts';
import { deleteVoice } from './delete-voice.ts';
import { mapVoiceToEngine } from './engine-voices.ts';
import { localizeVoice } from './localize-voice.ts';
import { prepareVoiceProfile } from './prepare-voice-profile.ts';
import { proCloneVoice } from './pro-clone-voice.ts';
import { runVoiceJob } from './run-voice-job.ts';
import type { VoiceClip, VoiceDeps, VoiceEngines } from './voice-deps.ts';

const CLONER = 'tts-cloner';
const NO_LIMITS = { maxVoicesPerOrg: 1000, maxEngineClonesPerDay: 1000, trialMaxEngineClonesPerDay: 1000 };
const SPEAKER_ONLY = 'tts-speaker';
const PLATFORM_VOICE = 'platform-ada';

let t: TestDatabase;
let engines: VoiceEngines & {
  online: boolean;
  spoken: string[];
  failPrepare: boolean;
  modelsAsked: (string | undefined)[];
  /** The cloner's engine is outside the process (it bills). */
  billing: boolean;
  /** Appended to the voice ids the engine makes (a clone made again gets another). */
  idSuffix: string;
  /** Engine copies deleted, in order. */
  deleted: string[];
  /** The engine voices made (their upstream ids), in order. */
  prepared: string[];
};
let queuedSignals: number;
let previewSignals: number;
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
    billing: false,
    idSuffix: '',
    deleted: [],
    prepared: [],
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
      const upstreamId = `engine-voice-${clip.durationMs}${this.idSuffix}`;
      this.prepared.push(upstreamId);
      return {
        upstreamId,
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
    clonesBill() {
      return this.billing;
    },
    async deleteEngineCopy(modelId, upstreamId) {
      this.deleted.push(`${modelId}/${upstreamId}`);
      return true;
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
  previewSignals = 0;
  orgId = (await createOrg(t.db, { name: 'voices' })).id;
  deps = {
    prisma: t.db.prisma,
    dataDir: t.dataDir,
    maxJobsPerOrg: 5,
    jobQueued: () => queuedSignals++,
    previewsWanted: () => previewSignals++,
    engines,
    voiceLimits: NO_LIMITS,
  };
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
  it('with an engine online: the voice now, with a ready profile and what the engine measured; its preview is left to the preview worker', async () => {
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
    // Nothing is spoken on the request: the preview worker is told, and makes the preview off it.
    expect(engines.spoken).toEqual([]);
    expect(cloned.voice).toMatchObject({ sample_blob_id: null, preview_models: [] });
    expect(previewSignals).toBe(1);
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
    expect(engines.spoken).toEqual([expect.stringMatching(/^The quick brown fox/)]);
    expect(await t.db.prisma.voice.findUniqueOrThrow({ where: { id: voice.id } })).toMatchObject({ description: 'measured by the engine' });
    expect(previewSignals).toBe(1);
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

describe('caps on voices and on clones through engines that bill', () => {
  const limited = (limits: Partial<typeof NO_LIMITS>): VoiceDeps => ({ ...deps, voiceLimits: { ...NO_LIMITS, ...limits } });
  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: unknown) => e,
    );

  it('an org has at most SVC_MAX_VOICES_PER_ORG voices: past it 403 voice_quota_exceeded before anything is stored or cloned; a deleted voice frees its place', async () => {
    const capped = limited({ maxVoicesPerOrg: 2 });
    await cloneVoice(capped, cloneInput(), signal);
    engines.online = false;
    await cloneVoice(capped, cloneInput(), signal);
    for (const online of [true, false]) {
      engines.online = online;
      const refused = await refusal(cloneVoice(capped, cloneInput({ name: 'Third' }), signal));
      expect(refused).toMatchObject({
        code: 'voice_quota_exceeded',
        message: 'This organization has 2 voices, the most it may have (2); delete voices it no longer needs.',
      });
    }
    const source = (await t.db.prisma.voice.findFirstOrThrow({ where: { orgId } })).id;
    await expect(
      localizeVoice(capped, { orgId, voiceId: source, language: 'de', name: undefined, modelId: undefined, profileVersion: '1' }),
    ).rejects.toMatchObject({
      code: 'voice_quota_exceeded',
    });
    expect(await voicesOf()).toBe(2);
    // The two clips: nothing of the refused ones.
    expect(await liveBlobs()).toBe(2);
    await deleteVoice(t.db.prisma, orgId, source);
    engines.online = true;
    await expect(cloneVoice(capped, cloneInput({ name: 'Third' }), signal)).resolves.toMatchObject({ status: 'created' });
  });

  it('clones through an engine that bills: at most the day\u2019s cap per org, 429 clone_quota_exceeded with Retry-After until the oldest is a day old; engines of this process are not counted', async () => {
    const capped = limited({ maxEngineClonesPerDay: 2 });
    await cloneVoice(capped, cloneInput(), signal);
    await cloneVoice(capped, cloneInput(), signal);
    engines.billing = true;
    await cloneVoice(capped, cloneInput(), signal);
    engines.online = false;
    const queued = await cloneVoice(capped, cloneInput(), signal);
    if (queued.status !== 'queued') throw new Error('expected a job');
    for (const online of [true, false]) {
      engines.online = online;
      const refused = await refusal(cloneVoice(capped, cloneInput({ name: 'Over' }), signal));
      expect(refused).toBeInstanceOf(ServiceError);
      expect(refused).toMatchObject({
        code: 'clone_quota_exceeded',
        param: 'model_id',
        message:
          'This organization cloned 2 voices through engines that bill in the last 24 hours, the most it may (2); try again later, or clone with a model the gateway runs itself.',
      });
      expect((refused as ServiceError).retryAfterSeconds).toBeGreaterThan(86_390);
      expect((refused as ServiceError).retryAfterSeconds).toBeLessThanOrEqual(86_400);
    }
    // Preparing a profile through it clones again: refused too.
    await expect(prepareVoiceProfile(capped, { orgId, voiceId: queued.job.voice_id, modelId: CLONER, profileVersion: '2' })).rejects.toMatchObject({
      code: 'clone_quota_exceeded',
    });
    expect(await voicesOf()).toBe(4);
    // A day later the clones of yesterday count no more.
    await t.db.prisma.engineClone.updateMany({ where: { orgId }, data: { createdAt: new Date(Date.now() - 24 * 3600_000 - 1000) } });
    engines.online = true;
    await expect(cloneVoice(capped, cloneInput({ name: 'Tomorrow' }), signal)).resolves.toMatchObject({ status: 'created' });
  });

  it('a trial org clones through engines that bill only as SVC_TRIAL_MAX_ENGINE_CLONES_PER_ORG_PER_DAY allows (none by default)', async () => {
    await t.db.prisma.org.update({ where: { id: orgId }, data: { isTrial: true } });
    engines.billing = true;
    const refused = await refusal(cloneVoice(limited({ trialMaxEngineClonesPerDay: 0 }), cloneInput(), signal));
    expect(refused).toMatchObject({
      code: 'clone_quota_exceeded',
      message:
        "This organization may not clone voices through 'tts-cloner', whose engine bills (trial organizations may not); clone with a model the gateway runs itself.",
    });
    expect((refused as ServiceError).retryAfterSeconds).toBeUndefined();
    expect(await voicesOf()).toBe(0);
    await expect(cloneVoice(limited({ trialMaxEngineClonesPerDay: 1 }), cloneInput(), signal)).resolves.toMatchObject({ status: 'created' });
  });

  it('exact under concurrency: of eight clones at once, as many are made as the caps allow; an engine voice made past the voice cap is deleted again', async () => {
    engines.billing = true;
    const clones = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => cloneVoice(limited({ maxEngineClonesPerDay: 3 }), cloneInput({ name: `C${i}` }), signal)),
    );
    expect(clones.filter((c) => c.status === 'fulfilled')).toHaveLength(3);
    expect(clones.filter((c) => c.status === 'rejected').map((c) => (c as PromiseRejectedResult).reason.code)).toEqual(Array(5).fill('clone_quota_exceeded'));
    expect(await t.db.prisma.engineClone.count({ where: { orgId } })).toBe(3);

    const other = (await createOrg(t.db, { name: 'voices racing' })).id;
    const preparedBefore = engines.prepared.length;
    const made = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        cloneVoice(limited({ maxVoicesPerOrg: 2 }), cloneInput({ orgId: other, name: `V${i}`, clip: clipOf(10 + i) }), signal),
      ),
    );
    expect(made.filter((c) => c.status === 'fulfilled')).toHaveLength(2);
    expect(await t.db.prisma.voice.count({ where: { orgId: other, deletedAt: null } })).toBe(2);
    expect(made.filter((c) => c.status === 'rejected').map((c) => (c as PromiseRejectedResult).reason.code)).toEqual(Array(6).fill('voice_quota_exceeded'));
    // Each engine voice made for a refused clone (refused as it was made, not before the engine
    // was asked) is queued for deletion at its engine; the two voices keep theirs.
    const cleanups = await t.db.prisma.job.findMany({ where: { orgId: other, kind: 'delete_engine_copies' } });
    const queuedForDeletion = cleanups.flatMap((j) => (j.input as { copies: { upstreamId: string }[] }).copies.map((c) => c.upstreamId));
    const kept = await t.db.prisma.voiceProfile.findMany({ where: { voice: { orgId: other } }, select: { upstreamId: true } });
    expect(kept).toHaveLength(2);
    expect([...queuedForDeletion, ...kept.map((p) => p.upstreamId)].sort()).toEqual(engines.prepared.slice(preparedBefore).sort());
    // The two voices' clips; the refused clones' clips are gone again.
    expect(await t.db.prisma.blob.count({ where: { orgId: other, deletedAt: null } })).toBe(2);
  });

  it('deleting a voice queues the deletion of its engine copies (not listed, not counted as a job in flight); the worker deletes them; a profile replaced by a new clone deletes the old copy', async () => {
    engines.online = false;
    const cloned = await cloneVoice(deps, cloneInput(), signal);
    if (cloned.status !== 'queued') throw new Error('expected a job');
    const { job } = cloned;
    await runVoiceJob(deps, await t.db.prisma.job.findUniqueOrThrow({ where: { id: job.job_id } }), signal);

    // A new version made by the engine: the copy it replaces goes.
    engines.idSuffix = '-v2';
    const again = await prepareVoiceProfile(deps, { orgId, voiceId: job.voice_id, modelId: CLONER, profileVersion: '2' });
    if (again.status !== 'queued') throw new Error('expected a job');
    await runVoiceJob(deps, await t.db.prisma.job.findUniqueOrThrow({ where: { id: again.job_id } }), signal);
    queuedSignals = 0;
    await deleteVoice(t.db.prisma, orgId, job.voice_id, () => queuedSignals++);
    expect(queuedSignals).toBe(1);

    const cleanups = await t.db.prisma.job.findMany({ where: { orgId, kind: 'delete_engine_copies' }, orderBy: { createdAt: 'asc' } });
    expect(cleanups.map((c) => c.input)).toEqual([
      { copies: [{ modelId: CLONER, upstreamId: 'engine-voice-20000' }] },
      { copies: [{ modelId: CLONER, upstreamId: 'engine-voice-20000-v2' }] },
    ]);
    for (const cleanup of cleanups) expect(await deleteEngineCopies(deps, cleanup, signal)).toEqual({ deleted: 1 });
    expect(engines.deleted).toEqual([`${CLONER}/engine-voice-20000`, `${CLONER}/engine-voice-20000-v2`]);

    // Housekeeping is the gateway's: not listed, not found by id, not counted against the org's jobs.
    expect((await listJobs(t.db.prisma, orgId, { limit: 50 })).map((j) => j.id)).not.toContain(cleanups[0]!.id);
    await expect(getJob(t.db.prisma, orgId, cleanups[0]!.id)).rejects.toMatchObject({ code: 'job_not_found' });
    await t.db.prisma.job.updateMany({ where: { orgId }, data: { status: 'queued' } });
    await t.db.prisma.job.updateMany({ where: { orgId, kind: { not: 'delete_engine_copies' } }, data: { status: 'succeeded' } });
    engines.online = false;
    await expect(cloneVoice({ ...deps, maxJobsPerOrg: 1 }, cloneInput({ name: 'Still room' }), signal)).resolves.toMatchObject({ status: 'queued' });
  });

  it('an engine voice imported or mapped, not cloned here, is never deleted at its engine', async () => {
    const voice = await cloneVoice(deps, cloneInput(), signal);
    if (voice.status !== 'created') throw new Error('expected a voice');
    await mapVoiceToEngine(t.db.prisma, { voiceId: voice.voice.id, modelId: SPEAKER_ONLY, upstreamId: 'the-engines-own-voice' });
    await deleteVoice(t.db.prisma, orgId, voice.voice.id);
    const cleanups = await t.db.prisma.job.findMany({ where: { orgId, kind: 'delete_engine_copies' } });
    expect(cleanups.map((c) => c.input)).toEqual([{ copies: [{ modelId: CLONER, upstreamId: 'engine-voice-12000' }] }]);
  });
});
