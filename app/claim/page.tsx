// {dashboard_url}/claim: the verification page of agent registration (README, "Agent
// registration"). Outside the dashboard layout: a visitor who is not signed in is offered
// sign-in or sign-up and comes back here (with the code, when the link carried one).
import type { Metadata } from 'next';
import Link from 'next/link';
import { withCallback } from '@/app/_lib/format';
import { getSessionUser } from '@/server/auth/session';
import { ClaimForm } from './claim-form';

export const metadata: Metadata = { title: 'Authorise an agent' };

export default async function ClaimPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  const raw = typeof params.code === 'string' ? params.code.replace(/[\s-]/g, '') : '';
  const code = /^\d{6}$/.test(raw) ? raw : '';
  const returnTo = code ? `/claim?code=${code}` : '/claim';
  const user = await getSessionUser();
  return (
    <main className="flex min-h-dvh flex-col items-center justify-center px-4 py-10">
      <div className="w-full max-w-md">
        <p className="mb-6 text-center text-lg font-bold tracking-tight text-indigo-700">svc</p>
        {user ? (
          <ClaimForm initialCode={code} email={user.email} returnTo={returnTo} />
        ) : (
          <div className="rounded-lg border border-zinc-200 bg-white px-5 py-6 shadow-xs sm:px-8">
            <h1 className="text-xl font-bold tracking-tight">Authorise an agent</h1>
            <p className="mt-2 text-sm text-zinc-600">
              An AI agent asked for an API key on your account. Sign in, or create an account, with the email address you gave the agent; then enter the 6-digit code it showed you.
            </p>
            <div className="mt-6 flex flex-col gap-3 sm:flex-row">
              <Link href={withCallback('/signin', returnTo)} className="inline-flex min-h-10 flex-1 items-center justify-center rounded-md bg-indigo-600 px-4 py-2 text-sm font-semibold text-white shadow-xs hover:bg-indigo-500">
                Sign in
              </Link>
              <Link href={withCallback('/signup', returnTo)} className="inline-flex min-h-10 flex-1 items-center justify-center rounded-md bg-white px-4 py-2 text-sm font-semibold text-zinc-900 shadow-xs ring-1 ring-zinc-300 ring-inset hover:bg-zinc-50">
                Create account
              </Link>
            </div>
          </div>
        )}
      </div>
    </main>
  );
}
