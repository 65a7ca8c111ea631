import { redirect } from 'next/navigation';
import { getSessionUser } from '@/server/auth/session';

export default async function AuthLayout({ children }: { children: React.ReactNode }) {
  if (await getSessionUser()) redirect('/');
  return (
    <main className="flex min-h-dvh flex-col items-center justify-center px-4 py-10">
      <div className="w-full max-w-sm">
        <p className="mb-6 text-center text-lg font-bold tracking-tight text-indigo-700">svc</p>
        {children}
      </div>
    </main>
  );
}
