import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids.ts';
import { enqueueJob } from '../../services/jobs/job-queue.ts';
import { createVoice } from '../../services/voices/create-voice.ts';
import { seedRegistry } from '../../services/models/seed-registry.ts';
import { seedPlatformVoices } from '../../services/voices/seed-platform-voices.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';

let h: ApiHarness;
let alice: TestUser;
let bob: TestUser;
let aliceVoice: string;
let bobVoice: string;

async function ownVoice(orgId: string, name: string, extra: { tags?: string[]; description?: string; language?: string } = {}): Promise<string> {
  return createVoice(h.db.prisma, {
    orgId,
    name,
    language: extra.language ?? 'en',
    kind: 'instant_clone',
    sourceAudioBlobId: null,
    sourceTranscript: null,
    sourceMetadata: { mode: 'similarity' },
    sourceVersion: 'v1',
    description: extra.description,
    tags: extra.tags,
    gender: 'female',
    modelId: 'local-flite',
  });
}

beforeAll(async () => {
  h = await createApiHarness();
  await seedRegistry(h.db.prisma, checkProtocol);
  await seedPlatformVoices(h.db.prisma);
  await h.signUpUser('admin@example.com');
  alice = await h.signUpUser('alice@example.com');
  bob = await h.signUpUser('bob@example.com');
  aliceVoice = await ownVoice(alice.orgId, 'Alice Narrator', { tags: ['warm', 'narration'], description: 'my own clone' });
  bobVoice = await ownVoice(bob.orgId, 'Bob Secret', { tags: ['secret'] });
  // A ready profile for Alice's voice on local-flite; none on local-espeak.
  await h.db.prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: aliceVoice, modelId: 'local-flite', upstreamId: 'slt', status: 'ready' } });
});
afterAll(async () => {
  await h?.drop();
});

describe('voices: happy path', () => {
  it('lists platform voices and the org’s own, never another org’s', async () => {
    const page = await alice.caller.voices.list({ limit: 200 });
    const ids = page.voices.map((v) => v.id);
    expect(ids).toContain(aliceVoice);
    expect(ids).toContain('flite-slt');
    expect(ids).not.toContain(bobVoice);
    expect(page.voices.find((v) => v.id === aliceVoice)).toMatchObject({ is_owner: true, kind: 'instant_clone', tags: ['warm', 'narration'] });
    expect(page.voices.find((v) => v.id === 'flite-slt')).toMatchObject({ is_owner: false, kind: 'library' });
  });

  it('filters by scope, gender, language, tag and search, and pages with the cursor', async () => {
    expect((await alice.caller.voices.list({ scope: 'mine' })).voices.map((v) => v.id)).toEqual([aliceVoice]);
    const featured = await alice.caller.voices.list({ scope: 'featured' });
    expect(featured.voices.length).toBeGreaterThan(0);
    expect(featured.voices.every((v) => v.featured)).toBe(true);
    const french = await alice.caller.voices.list({ language: 'fr' });
    expect(french.voices.map((v) => v.id).sort()).toEqual(['espeak-fr-f', 'espeak-fr-m']);
    expect((await alice.caller.voices.list({ tag: 'NARRATION' })).voices.map((v) => v.id)).toEqual(expect.arrayContaining([aliceVoice, 'flite-rms']));
    expect((await alice.caller.voices.list({ q: 'own clone' })).voices.map((v) => v.id)).toEqual([aliceVoice]);
    const males = await alice.caller.voices.list({ gender: 'male' });
    expect(males.voices.every((v) => v.gender === 'male')).toBe(true);

    const first = await alice.caller.voices.list({ limit: 5 });
    expect(first.voices).toHaveLength(5);
    expect(first.next_cursor).toBeTruthy();
    // As the dashboard's infinite query sends it: with the page direction.
    const second = await alice.caller.voices.list({ limit: 5, cursor: first.next_cursor!, direction: 'forward' });
    expect(second.voices.map((v) => v.id).some((id) => first.voices.some((f) => f.id === id))).toBe(false);
  });

  it('gets one voice with its profiles', async () => {
    const v = await alice.caller.voices.get({ id: aliceVoice });
    expect(v).toMatchObject({ id: aliceVoice, name: 'Alice Narrator', saved: false });
    expect(v.profiles).toEqual([expect.objectContaining({ model_id: 'local-flite', status: 'ready' })]);
  });

  it('renames, retags and re-describes an own voice, and the search follows', async () => {
    const updated = await alice.caller.voices.update({
      id: aliceVoice,
      changes: { name: 'Alice Storyteller', tags: ['Calm', 'calm', 'bedtime'], description: 'for stories' },
    });
    expect(updated).toMatchObject({ name: 'Alice Storyteller', tags: ['calm', 'bedtime'], description: 'for stories' });
    expect((await alice.caller.voices.list({ q: 'storyteller' })).voices.map((v) => v.id)).toEqual([aliceVoice]);
    expect((await alice.caller.voices.list({ tag: 'bedtime' })).voices.map((v) => v.id)).toEqual([aliceVoice]);
  });

  it('saves and unsaves a platform voice; the saved scope follows', async () => {
    expect(await alice.caller.voices.setSaved({ id: 'flite-awb', saved: true })).toMatchObject({ id: 'flite-awb', saved: true });
    expect((await alice.caller.voices.list({ scope: 'saved' })).voices.map((v) => v.id)).toEqual(['flite-awb']);
    // Saving is per org: Bob does not see Alice's bookmark.
    expect((await bob.caller.voices.list({ scope: 'saved' })).voices).toEqual([]);
    expect(await alice.caller.voices.setSaved({ id: 'flite-awb', saved: false })).toMatchObject({ saved: false });
    expect((await alice.caller.voices.list({ scope: 'saved' })).voices).toEqual([]);
  });

  it('lists for a model only the voices with a ready profile for it', async () => {
    const flite = await alice.caller.voices.forModel({ modelId: 'local-flite' });
    expect(flite[0]).toMatchObject({ id: aliceVoice, isOwner: true }); // own voices first
    expect(flite.map((v) => v.id)).toEqual(expect.arrayContaining(['flite-slt', 'flite-rms']));
    expect(flite.some((v) => v.id.startsWith('espeak-'))).toBe(false);
    const espeak = await alice.caller.voices.forModel({ modelId: 'local-espeak' });
    expect(espeak.map((v) => v.id)).not.toContain(aliceVoice);
    expect(espeak.every((v) => v.id.startsWith('espeak-'))).toBe(true);
    expect((await bob.caller.voices.forModel({ modelId: 'local-flite' })).map((v) => v.id)).not.toContain(aliceVoice);
    // A queued (not yet ready) or expired profile does not count.
    await h.db.prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: aliceVoice, modelId: 'local-espeak', upstreamId: '', status: 'queued' } });
    expect((await alice.caller.voices.forModel({ modelId: 'local-espeak' })).map((v) => v.id)).not.toContain(aliceVoice);
    await h.db.prisma.voiceProfile.updateMany({
      where: { voiceId: aliceVoice, modelId: 'local-espeak' },
      data: { status: 'ready', expiresAt: new Date(Date.now() - 1000) },
    });
    expect((await alice.caller.voices.forModel({ modelId: 'local-espeak' })).map((v) => v.id)).not.toContain(aliceVoice);
    expect(await alice.caller.voices.forModel({ modelId: 'no-such-model' })).toEqual([]);
  });

  it('lists the jobs of a voice', async () => {
    const job = await enqueueJob(h.db.prisma, {
      orgId: alice.orgId,
      kind: 'prepare_profile',
      voiceId: aliceVoice,
      payload: { modelId: 'local-espeak', apiKind: 'instant_clone' },
    });
    const jobs = await alice.caller.voices.jobs({ id: aliceVoice });
    expect(jobs[0]).toMatchObject({ id: job.id, status: 'queued', operation: 'prepare_profile', model_id: 'local-espeak' });
  });

  it('follows one job, as GET /jobs/{id} answers it', async () => {
    const job = await enqueueJob(h.db.prisma, {
      orgId: alice.orgId,
      kind: 'localize',
      voiceId: aliceVoice,
      payload: { modelId: 'local-flite', apiKind: 'localize' },
    });
    expect(await alice.caller.voices.job({ id: job.id })).toMatchObject({
      id: job.id,
      object: 'job',
      kind: 'localize',
      operation: 'localize',
      status: 'queued',
      voice_id: aliceVoice,
      model_id: 'local-flite',
    });
  });

  it('deletes an own voice: gone from lists and lookups', async () => {
    const doomed = await ownVoice(alice.orgId, 'Short lived');
    await expect(alice.caller.voices.delete({ id: doomed })).resolves.toEqual({ id: doomed, deleted: true });
    expect((await alice.caller.voices.list({ scope: 'mine' })).voices.map((v) => v.id)).not.toContain(doomed);
    await expect(alice.caller.voices.get({ id: doomed })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.delete({ id: doomed })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('voices: errors', () => {
  it('rejects bad filters and changes with a readable message', async () => {
    await expect(alice.caller.voices.list({ scope: 'everything' } as never)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('scope'),
    });
    await expect(alice.caller.voices.list({ language: 'english!' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('language'),
    });
    await expect(alice.caller.voices.list({ limit: 0 })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.voices.list({ limit: 201 })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.voices.list({ cursor: 'not-a-cursor' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('cursor'),
    });
    await expect(alice.caller.voices.update({ id: aliceVoice, changes: {} })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.voices.update({ id: aliceVoice, changes: { name: '   ' } })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('name'),
    });
    await expect(alice.caller.voices.update({ id: aliceVoice, changes: { tags: Array.from({ length: 21 }, (_, i) => `t${i}`) } })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    });
    await expect(alice.caller.voices.update({ id: aliceVoice, changes: { owner: 'x' } } as never)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.voices.get({ id: '' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.voices.get({ id: 'x'.repeat(101) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('answers NOT_FOUND for an unknown voice', async () => {
    await expect(alice.caller.voices.get({ id: 'voice_missing' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.setSaved({ id: 'voice_missing', saved: true })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.jobs({ id: 'voice_missing' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('platform voices are read-only: FORBIDDEN to change or delete', async () => {
    await expect(alice.caller.voices.update({ id: 'flite-slt', changes: { name: 'Mine now' } })).rejects.toMatchObject({
      code: 'FORBIDDEN',
      cause: { code: 'voice_read_only' },
    });
    await expect(alice.caller.voices.delete({ id: 'flite-slt' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect((await alice.caller.voices.get({ id: 'flite-slt' })).name).toBe('Sally');
  });

  it('requires a session', async () => {
    await expect(h.callerFor(null).voices.list({})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(h.callerFor(null).voices.delete({ id: aliceVoice })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});

describe('voices: other orgs', () => {
  it('another org’s voice is NOT_FOUND for every procedure, and stays unchanged', async () => {
    await expect(alice.caller.voices.get({ id: bobVoice })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.update({ id: bobVoice, changes: { name: 'Pwned' } })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.delete({ id: bobVoice })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.setSaved({ id: bobVoice, saved: true })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.voices.jobs({ id: bobVoice })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const bobJob = await enqueueJob(h.db.prisma, { orgId: bob.orgId, kind: 'prepare_profile', voiceId: bobVoice, payload: { modelId: 'local-espeak' } });
    await expect(alice.caller.voices.job({ id: bobJob.id })).rejects.toMatchObject({ code: 'NOT_FOUND', cause: { code: 'job_not_found' } });
    expect(await bob.caller.voices.get({ id: bobVoice })).toMatchObject({ name: 'Bob Secret', saved: false });
  });

  it('asking to act for an org the user is not a member of changes nothing', async () => {
    const pretending = h.callerFor(alice.user, bob.orgId);
    await expect(pretending.voices.get({ id: bobVoice })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await pretending.voices.list({ scope: 'mine' })).voices.map((v) => v.id)).toEqual([aliceVoice]);
  });
});
