import NextAuth from 'next-auth';
import type { NextRequest } from 'next/server';
import { getAuthOptions } from '@/server/auth/auth-options';

// Options are built per process on first request, so the secret is read at run time.
type RouteContext = { params: Promise<{ nextauth: string[] }> };
const handler = (req: NextRequest, context: RouteContext) => NextAuth(req, context, getAuthOptions());

export { handler as GET, handler as POST };
