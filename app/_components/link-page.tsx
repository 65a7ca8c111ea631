// The frame of the pages a link opens outside the dashboard layout (/claim, /invite/<token>,
// /verify-email/<token>): a visitor who is not signed in is offered sign-in or sign-up and
// comes back to the same link afterwards.
import Link from 'next/link';
import { withCallback } from '@/app/_lib/format';

export function LinkPage({ children }: { children: React.ReactNode }) {
  return (
    <main className="flex min-h-dvh flex-col items-center justify-center px-4 py-10">
      <div className="w-full max-w-md">
        <p className="mb-6 text-center text-lg font-bold tracking-tight text-indigo-700">svc</p>
        {children}
      </div>
    </main>
  );
}

export function LinkCard({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <div className="rounded-lg border border-zinc-200 bg-white px-5 py-6 shadow-xs sm:px-8">
      <h1 className="text-xl font-bold tracking-tight">{title}</h1>
      <div className="mt-2">{children}</div>
    </div>
  );
}

/** Sign in / Create account, both returning to `returnTo`. */
export function SignInChoices({ returnTo }: { returnTo: string }) {
  return (
    <div className="mt-6 flex flex-col gap-3 sm:flex-row">
      <Link
        href={withCallback('/signin', returnTo)}
        className="inline-flex min-h-10 flex-1 items-center justify-center rounded-md bg-indigo-600 px-4 py-2 text-sm font-semibold text-white shadow-xs hover:bg-indigo-500"
      >
        Sign in
      </Link>
      <Link
        href={withCallback('/signup', returnTo)}
        className="inline-flex min-h-10 flex-1 items-center justify-center rounded-md bg-white px-4 py-2 text-sm font-semibold text-zinc-900 shadow-xs ring-1 ring-zinc-300 ring-inset hover:bg-zinc-50"
      >
        Create account
      </Link>
    </div>
  );
}
