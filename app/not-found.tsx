// Any URL the dashboard does not have: a 404 with the way back (Next's bare page had none).
// Signed in, the dashboard's pages; signed out, sign-in and sign-up.
import type { Metadata } from 'next';
import Link from 'next/link';
import { getSessionUser } from '@/server/auth/session';
import { PageLink, PageLinks } from './(dashboard)/page-links';

export const metadata: Metadata = { title: 'Page not found' };

export default async function NotFound() {
  const user = await getSessionUser().catch(() => null);
  const signedOut = [
    { href: '/signin', label: 'Sign in' },
    { href: '/signup', label: 'Create an account' },
  ];
  return (
    <div className="min-h-dvh">
      <header className="border-b border-zinc-200 bg-white">
        <div className="mx-auto flex max-w-5xl items-center justify-between gap-4 px-4 py-3 sm:px-6">
          <Link href="/" className="text-lg font-bold tracking-tight text-indigo-700">
            svc
          </Link>
          {user && <span className="truncate text-sm text-zinc-600">{user.email}</span>}
        </div>
      </header>
      <main id="main" className="mx-auto max-w-5xl px-4 py-10 sm:px-6 sm:py-16">
        <p className="text-sm font-semibold text-indigo-700">404</p>
        <h1 className="mt-1 text-2xl font-bold tracking-tight text-zinc-900">Page not found</h1>
        <p className="mt-2 max-w-xl text-sm text-zinc-600">
          There is no page at this address: the link may be mistyped, or what it pointed to was deleted.{' '}
          {user ? 'Go on from one of these:' : 'Sign in to reach the dashboard:'}
        </p>
        <nav aria-label="Pages" className="mt-6">
          <ul className="grid max-w-xl gap-2 sm:grid-cols-2">
            {user ? (
              <PageLinks />
            ) : (
              signedOut.map((item) => (
                <li key={item.href}>
                  <PageLink href={item.href} label={item.label} />
                </li>
              ))
            )}
          </ul>
        </nav>
      </main>
    </div>
  );
}
