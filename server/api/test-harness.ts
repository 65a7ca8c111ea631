// Test harness for tRPC procedures: a real migrated database (SQLite, or PostgreSQL with
// TEST_DB=postgresql), users made through the real sign-up service, and callers that carry
// those users' sessions exactly as the HTTP context would. Each harness has its own
// sign-up throttle and no mailer, so tests neither share limits nor send mail. A harness may
// share a gateway harness's database and call that gateway (procedures whose work is the engines').
import { createMemoryRateLimiter } from '../rate-limit/rate-limiter.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { createCredentialThrottle } from '../auth/credential-throttle.ts';
import { signUp } from '../services/users/sign-up.ts';
import { createCaller } from './root.ts';
import type { SessionUser } from './trpc.ts';

export const TEST_PASSWORD = 'correct horse battery';

export interface TestUser {
  user: SessionUser;
  orgId: string;
  isPlatformAdmin: boolean;
  caller: ReturnType<typeof createCaller>;
}

export interface ApiHarness extends TestDatabase {
  callerFor(user: SessionUser | null, requestedOrgId?: string | null): ReturnType<typeof createCaller>;
  /**
   * Signs a user up; the first one in a fresh database is the platform admin. The email is
   * marked verified (as if the link had been followed; verify-email.test.ts tests that)
   * unless `verified: false`.
   */
  signUpUser(email: string, options?: { verified?: boolean }): Promise<TestUser>;
}

/** `database`: one the caller owns (a gateway harness's, dropped with it); `gatewayUrl`: where procedures reach the gateway. */
export async function createApiHarness(options: { database?: TestDatabase; gatewayUrl?: string } = {}): Promise<ApiHarness> {
  const database = options.database ?? (await createTestDatabase());
  const credentialThrottle = createCredentialThrottle(createMemoryRateLimiter());
  const gateway = options.gatewayUrl === undefined ? {} : { gatewayUrl: options.gatewayUrl };
  const callerFor = (user: SessionUser | null, requestedOrgId: string | null = null) =>
    createCaller({ db: database.db, session: user ? { user } : null, requestedOrgId, credentialThrottle, mailer: null, ...gateway });
  return {
    ...database,
    callerFor,
    async signUpUser(email, { verified = true } = {}) {
      const created = await signUp(database.db, { email, password: TEST_PASSWORD });
      if (verified) await database.db.prisma.user.update({ where: { id: created.userId }, data: { emailVerifiedAt: new Date() } });
      const user = { id: created.userId, email: created.email, name: null };
      return { user, orgId: created.orgId, isPlatformAdmin: created.isPlatformAdmin, caller: callerFor(user) };
    },
  };
}
