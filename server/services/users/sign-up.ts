import type { Database } from '../../db/database.js';
import { sqlTimestamp } from '../../db/dialect.js';
import { newId } from '../../db/ids.js';
import { ServiceError } from '../errors.js';
import { normalizeEmail } from './normalize-email.js';
import { MAX_PASSWORD_BYTES, MIN_PASSWORD_LENGTH, hashPassword } from './password.js';

// Marker row in ServerSecret: the first account on an instance becomes platform admin. The
// row's primary key makes the claim atomic on both databases (see signUp).
export const FIRST_ADMIN_MARKER = 'platform-admin:first-user';

export interface SignUpInput {
  email: string;
  password: string;
  name?: string | null;
}

export interface SignedUpUser {
  userId: string;
  email: string;
  orgId: string;
  isPlatformAdmin: boolean;
}

/**
 * Creates a user, a personal org and an owner membership in one transaction. The first user
 * of an instance (no users yet, and nobody claimed the marker) becomes platform admin.
 */
export async function signUp(db: Database, input: SignUpInput): Promise<SignedUpUser> {
  const email = normalizeEmail(input.email);
  if (input.password.length < MIN_PASSWORD_LENGTH) {
    throw new ServiceError('invalid_request', `Password must be at least ${MIN_PASSWORD_LENGTH} characters.`, 'password');
  }
  if (Buffer.byteLength(input.password) > MAX_PASSWORD_BYTES) {
    throw new ServiceError('invalid_request', `Password must be at most ${MAX_PASSWORD_BYTES} bytes.`, 'password');
  }
  const name = input.name?.trim() || null;
  if (name && name.length > 100) throw new ServiceError('invalid_request', 'Name must be at most 100 characters.', 'name');

  const duplicate = () => new ServiceError('conflict', 'An account with this email already exists. Sign in instead.', 'email');
  if (await db.prisma.user.findUnique({ where: { email }, select: { id: true } })) throw duplicate();

  // Hash outside the transaction: it takes ~0.3 s and must not hold a database lock.
  const passwordHash = await hashPassword(input.password);
  const userId = newId('usr');
  const orgId = newId('org');
  const orgName = `${name ?? email.split('@')[0]}'s org`.slice(0, 200);
  try {
    const isPlatformAdmin = await db.prisma.$transaction(async (tx) => {
      let admin = false;
      if ((await tx.user.count()) === 0) {
        // Two first sign-ups racing both see zero users; only one inserts the marker row.
        const now = sqlTimestamp(db.dialect, new Date());
        const inserted = await tx.$executeRaw`INSERT INTO "ServerSecret" ("name", "value", "createdAt") VALUES (${FIRST_ADMIN_MARKER}, ${userId}, ${now}) ON CONFLICT DO NOTHING`;
        admin = inserted === 1;
      }
      await tx.user.create({ data: { id: userId, email, name, passwordHash, isPlatformAdmin: admin } });
      await tx.org.create({ data: { id: orgId, name: orgName } });
      await tx.membership.create({ data: { userId, orgId, role: 'owner' } });
      return admin;
    });
    return { userId, email, orgId, isPlatformAdmin };
  } catch (e) {
    // A concurrent sign-up with the same email won the unique index.
    if ((e as { code?: string }).code === 'P2002') throw duplicate();
    throw e;
  }
}
