import { getServerSession } from 'next-auth';
import { getAuthOptions } from './auth-options.ts';

/** Who is signed in, as the dashboard's procedures and pages see them. */
export interface SessionUser {
  id: string;
  email: string;
  name: string | null;
}

/** The signed-in user of the current request (server components, route handlers), or null. */
export async function getSessionUser(): Promise<SessionUser | null> {
  const session = await getServerSession(getAuthOptions());
  const user = session?.user;
  return user?.id ? { id: user.id, email: user.email, name: user.name } : null;
}
