import { getServerSession } from 'next-auth';
import type { SessionUser } from '../api/trpc.js';
import { getAuthOptions } from './auth-options.js';

/** The signed-in user of the current request (server components, route handlers), or null. */
export async function getSessionUser(): Promise<SessionUser | null> {
  const session = await getServerSession(getAuthOptions());
  const user = session?.user;
  return user?.id ? { id: user.id, email: user.email, name: user.name } : null;
}
