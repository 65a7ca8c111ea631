import type { Database } from '../../db/database.ts';
import { sqlTimestamp } from '../../db/dialect.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { acceptInvitations } from '../orgs/invitations.ts';

// Marker row in ServerSecret: the first account on an instance becomes platform admin. The
// row's primary key makes the claim atomic on both databases (see createAccount).
export const FIRST_ADMIN_MARKER = 'platform-admin:first-user';

export interface CreatedAccount {
  userId: string;
  email: string;
  name: string | null;
  orgId: string;
  isPlatformAdmin: boolean;
  /** Orgs joined through pending invitations for this email. */
  joinedOrgIds: string[];
}

/**
 * The one way an account comes to exist, whether by email and password (signUp) or a first
 * OAuth sign-in: a user, a personal org with an owner membership and, only when the email is
 * verified (an OAuth provider vouched for it), the memberships of pending invitations for it,
 * in one transaction. A password sign-up's email is only claimed: its invitations wait for
 * the verification link or the invite link. The first user of an instance (no users yet, and
 * nobody claimed the marker) becomes platform admin. `email` must already be normalized. A
 * concurrent account with the same email: ServiceError conflict.
 */
export async function createAccount(
  db: Database,
  input: { email: string; name: string | null; passwordHash: string | null; emailVerified: boolean },
): Promise<CreatedAccount> {
  const { email, name, passwordHash } = input;
  const userId = newId('usr');
  const orgId = newId('org');
  const orgName = `${name ?? email.split('@')[0]}'s org`.slice(0, 200);
  const now = new Date();
  try {
    const { isPlatformAdmin, joinedOrgIds } = await db.prisma.$transaction(async (tx) => {
      let admin = false;
      if ((await tx.user.count()) === 0) {
        // Two first sign-ups racing both see zero users; only one inserts the marker row.
        const inserted =
          await tx.$executeRaw`INSERT INTO "ServerSecret" ("name", "value", "createdAt") VALUES (${FIRST_ADMIN_MARKER}, ${userId}, ${sqlTimestamp(db.dialect, now)}) ON CONFLICT DO NOTHING`;
        admin = inserted === 1;
      }
      await tx.user.create({ data: { id: userId, email, name, passwordHash, isPlatformAdmin: admin, emailVerifiedAt: input.emailVerified ? now : null } });
      await tx.org.create({ data: { id: orgId, name: orgName } });
      await tx.membership.create({ data: { userId, orgId, role: 'owner', createdAt: now } });
      // A millisecond later than the personal org: with no org chosen, the dashboard acts for
      // the user's oldest membership, which must be their own org, not one they were invited to.
      const joined = input.emailVerified ? await acceptInvitations(tx, { userId, email, now, joinedAt: new Date(now.getTime() + 1) }) : [];
      return { isPlatformAdmin: admin, joinedOrgIds: joined };
    });
    return { userId, email, name, orgId, isPlatformAdmin, joinedOrgIds };
  } catch (e) {
    // A concurrent sign-up with the same email won the unique index.
    if ((e as { code?: string }).code === 'P2002') throw new ServiceError('conflict', 'An account with this email already exists. Sign in instead.', 'email');
    throw e;
  }
}
