import type { Prisma } from '../../db/database.js';

export interface UserProfile {
  id: string;
  email: string;
  name: string | null;
  isPlatformAdmin: boolean;
}

export async function getUser(prisma: Prisma, userId: string): Promise<UserProfile | null> {
  return prisma.user.findUnique({ where: { id: userId }, select: { id: true, email: true, name: true, isPlatformAdmin: true } });
}
