import { redirect } from 'next/navigation';
import { getSessionUser } from '@/server/auth/session';
import { DashboardHeader } from './dashboard-header';
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
      <DashboardHeader email={user.email} />
      <main id="main" className="mx-auto max-w-5xl px-4 py-6 sm:px-6 sm:py-8">
        <VerifyEmailBanner />
        {children}
      </main>
    </div>
  );
}
