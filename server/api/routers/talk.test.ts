// The Talk page's procedures against a real gateway (test/support/gateway-harness.ts): the
// realtime profiles of the shipped file, a client secret minted through the gateway with the
// org's dashboard key, and the refusals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/env.ts';
import { DEFAULT_PROFILES_FILE, loadRealtimeProfiles } from '../../config/realtime-profiles.ts';
import { DASHBOARD_KEY_NAME } from '../../services/keys/get-dashboard-key.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';
import { startGateway, type GatewayHarness } from '../../../test/support/gateway-harness.ts';

let g: GatewayHarness;
let api: ApiHarness;
let user: TestUser;

beforeAll(async () => {
  g = await startGateway();
  api = await createApiHarness({ database: g.testDb, gatewayUrl: g.url });
  user = await api.signUpUser('talker@example.com');
}, 60_000);
afterAll(async () => {
  await g?.close();
});

describe('talk', () => {
  it('lists the shipped realtime profiles and says the new org has no credit', async () => {
    const { profiles, hasCredit } = await user.caller.talk.profiles();
    expect(profiles.map((p) => p.id)).toEqual([...loadRealtimeProfiles(DEFAULT_PROFILES_FILE).keys()]);
    expect(profiles[0]).toMatchObject({ id: 'local-realtime', llm: 'local-llm', stt: 'local-stt', tts: 'local-flite' });
    expect(hasCredit).toBe(false);
  });

  it('refuses a profile that does not exist, before asking the gateway', async () => {
    await expect(user.caller.talk.startCall({ profile: 'no-such-profile' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("mints an ek_ secret through the gateway with the org's dashboard key, and names the calls URL", async () => {
    const minted = await user.caller.talk.startCall({ profile: 'local-realtime', instructions: '  Be brief. ' });
    expect(minted.callsUrl).toBe(`${loadConfig().publicBaseUrl}/v1/realtime/calls`);
    // ek_<payload>.<signature> (docs/realtime.md, "WebRTC"): the user's org, the dashboard key's hash, the session.
    expect(minted.secret).toMatch(/^ek_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const payload = JSON.parse(Buffer.from(minted.secret.slice(3).split('.')[0]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    expect(payload).toMatchObject({ o: user.orgId, e: minted.expiresAt, s: { type: 'realtime', model: 'local-realtime', instructions: 'Be brief.' } });
    const dashboardKey = await g.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: user.orgId, name: DASHBOARD_KEY_NAME } });
    expect(payload.k).toBe(dashboardKey.hash);
    expect(JSON.stringify(minted)).not.toMatch(/sk_svc_/);
  });

  it('lists the LLMs and TTS models for a call without a profile, and mints its secret with them and the voice', async () => {
    const { llms, ttsModels } = await user.caller.talk.profiles();
    expect(llms.map((m) => m.id)).toContain('local-llm');
    expect(ttsModels.map((m) => m.id)).toContain('local-flite');
    const minted = await user.caller.talk.startCall({ llm: 'local-llm', tts: 'local-flite', voice: 'flite-slt', instructions: 'Be brief.' });
    const payload = JSON.parse(Buffer.from(minted.secret.slice(3).split('.')[0]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    expect(payload.s).toEqual({
      type: 'realtime',
      model: 'local-llm',
      audio: { output: { model: 'local-flite', voice: 'flite-slt' } },
      instructions: 'Be brief.',
    });
    // A model the gateway does not have is its 404, before any call.
    await expect(user.caller.talk.startCall({ llm: 'no-such-llm', tts: 'local-flite', voice: 'flite-slt' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
