import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { normalizeEmail } from './normalize-email.ts';
import { dummyPasswordHash, verifyPassword } from './password.ts';

export interface AuthenticatedUser {
  id: string;
  email: string;
  name: string | null;
}

/** Checks an email and password; null when either is wrong (the caller must not say which). */
export async function authenticateUser(prisma: Prisma, input: { email: string; password: string }): Promise<AuthenticatedUser | null> {
  let email: string;
  try {
    email = normalizeEmail(input.email);
  } catch (e) {
    if (e instanceof ServiceError) return null;
    throw e;
  }
  const user = await prisma.user.findUnique({ where: { email }, select: { id: true, email: true, name: true, passwordHash: true } });
  // Always run one bcrypt comparison, so response time does not reveal whether the email exists.
  const ok = await verifyPassword(input.password, user?.passwordHash ?? (await dummyPasswordHash()));
  if (!user?.passwordHash || !ok) return null;
  return { id: user.id, email: user.email, name: user.name };
}
