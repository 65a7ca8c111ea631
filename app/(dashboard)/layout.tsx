import Link from 'next/link';
import { redirect } from 'next/navigation';
import { getSessionUser } from '@/server/auth/session';
import { Nav } from './nav';
import { OrgSwitcher } from './org-switcher';
import { SignOutButton } from './sign-out-button';
import { VerifyEmailBanner } from './verify-email-banner';

export default async function DashboardLayout({ children }: { children: React.ReactNode }) {
  const user = await getSessionUser();
  if (!user) redirect('/signin');
  return (
    <div className="min-h-dvh">
      <a
        href="#main"
        className="sr-only focus:not-sr-only focus:absolute focus:top-2 focus:left-2 focus:z-10 focus:rounded focus:bg-white focus:px-3 focus:py-2"
      >
        Skip to content
      </a>
      <header className="border-b border-zinc-200 bg-white">
        <div className="mx-auto flex max-w-5xl flex-wrap items-center justify-between gap-x-4 gap-y-1 px-4 pt-3 sm:px-6">
          <Link href="/" className="text-lg font-bold tracking-tight text-indigo-700">
            svc
          </Link>
          <div className="flex min-w-0 flex-wrap items-center justify-end gap-x-3 gap-y-1">
            <OrgSwitcher />
            <span className="truncate text-sm text-zinc-600" title={user.email}>
              {user.email}
            </span>
            <SignOutButton />
          </div>
        </div>
        <div className="mx-auto max-w-5xl px-2 sm:px-4">
          <Nav />
        </div>
      </header>
      <main id="main" className="mx-auto max-w-5xl px-4 py-6 sm:px-6 sm:py-8">
        <VerifyEmailBanner />
        {children}
      </main>
    </div>
  );
}
