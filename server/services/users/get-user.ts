import type { Prisma } from '../../db/database.ts';

export interface UserProfile {
  id: string;
  email: string;
  name: string | null;
  isPlatformAdmin: boolean;
  /** Whether the account proved it owns `email` (a verification link, or an OAuth provider). */
  emailVerified: boolean;
}

export async function getUser(prisma: Prisma, userId: string): Promise<UserProfile | null> {
  const user = await prisma.user.findUnique({
    where: { id: userId },
    select: { id: true, email: true, name: true, isPlatformAdmin: true, emailVerifiedAt: true },
  });
  if (!user) return null;
  const { emailVerifiedAt, ...profile } = user;
  return { ...profile, emailVerified: emailVerifiedAt !== null };
}
