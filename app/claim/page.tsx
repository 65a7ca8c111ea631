// {dashboard_url}/claim: the verification page of agent registration
// (docs/agent-registration.md). Outside the dashboard layout: a visitor who is not signed in is
// offered sign-in or sign-up and comes back here (with the code, when the link carried one).
import type { Metadata } from 'next';
import { LinkCard, LinkPage, SignInChoices } from '@/app/_components/link-page';
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
    <LinkPage>
      {user ? (
        <ClaimForm initialCode={code} email={user.email} returnTo={returnTo} />
      ) : (
        <LinkCard title="Authorise an agent">
          <p className="text-sm text-zinc-600">
            An AI agent asked for an API key on your account. Sign in, or create an account, with the email address you gave the agent; then enter the 6-digit
            code it showed you.
          </p>
          <SignInChoices returnTo={returnTo} />
        </LinkCard>
      )}
    </LinkPage>
  );
}
