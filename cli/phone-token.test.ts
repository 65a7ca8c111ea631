// `svc phone token create|list|revoke` as an operator runs them: the real CLI in its own
// process (bin/svc.mjs) against the test database, its one JSON object read from stdout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../server/services/keys/create-api-key.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { verifyPhoneToken } from '../server/services/phone/verify-phone-token.ts';
import { svcCli } from '../test/support/svc-cli.ts';
import { createTestDatabase, type TestDatabase } from '../test/support/test-database.ts';

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const { svc, svcOk } = svcCli(() => t);

describe('svc phone token', () => {
  it('create prints {"token": …} once; list shows it without the token; revoke ends it', async () => {
    const org = await createOrg(t.db, { name: 'cli phone' });
    const key = await createApiKey(t.db.prisma, { orgId: org.id, name: 'calls' });
    const made = await svcOk('phone', 'token', 'create', '--org', org.id, '--key-id', key.id, '--profile', 'local-realtime', '--name', '+15550100');
    expect(made).toMatchObject({ org_id: org.id, key_id: key.id, profile: 'local-realtime', name: '+15550100' });
    expect(made.token).toMatch(/^pt_svc_[A-Za-z0-9_-]{43}$/);
    await expect(verifyPhoneToken(t.db.prisma, made.token as string)).resolves.toMatchObject({ tokenId: made.id, apiKeyId: key.id });

    const listed = await svcOk('phone', 'token', 'list', '--org', org.id);
    expect(listed.tokens).toEqual([
      expect.objectContaining({ id: made.id, prefix: made.prefix, status: 'active', profile: 'local-realtime', revoked_at: null }),
    ]);
    expect(JSON.stringify(listed)).not.toContain(made.token as string);

    expect(await svcOk('phone', 'token', 'revoke', '--id', made.id as string)).toEqual({ id: made.id, status: 'revoked' });
    await expect(verifyPhoneToken(t.db.prisma, made.token as string)).rejects.toMatchObject({ code: 'api_key_disabled' });
  }, 60_000);

  it.each([
    {
      name: 'a key of another org',
      args: (o: string) => ['create', '--org', o, '--key-id', 'key_elsewhere', '--profile', 'p'],
      stderr: /No API key with id key_elsewhere/,
    },
    { name: 'no profile', args: (o: string) => ['create', '--org', o, '--key-id', 'key_x'], stderr: /--profile/ },
    { name: 'an unknown token id', args: () => ['revoke', '--id', 'ptok_nope'], stderr: /No phone token with id ptok_nope/ },
  ])(
    'refuses $name with a message and a non-zero exit',
    async ({ args, stderr }) => {
      const org = await createOrg(t.db, { name: 'cli refusals' });
      const r = await svc('phone', 'token', ...args(org.id));
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(stderr);
      expect(r.stdout).toBe('');
    },
    60_000,
  );
});
