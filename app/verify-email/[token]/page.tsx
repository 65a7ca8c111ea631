// {dashboard_url}/verify-email/<token>: the link the sign-up email carries. It verifies the
// address only for the account it was sent to, so it needs that account's session too.
import type { Metadata } from 'next';
import { LinkCard, LinkPage, SignInChoices } from '@/app/_components/link-page';
import { getSessionUser } from '@/server/auth/session';
import { VerifyEmail } from './verify-email';

export const metadata: Metadata = { title: 'Verify your email' };

export default async function VerifyEmailPage({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  const clean = token.replace(/[^A-Za-z0-9_-]/g, '').slice(0, 100);
  const user = await getSessionUser();
  return (
    <LinkPage>
      {user ? (
        <VerifyEmail token={clean} email={user.email} />
      ) : (
        <LinkCard title="Verify your email">
          <p className="text-sm text-zinc-600">
            Sign in to the account that signed up with this address; the address is verified as soon as you are back here.
          </p>
          <SignInChoices returnTo={`/verify-email/${clean}`} />
        </LinkCard>
      )}
    </LinkPage>
  );
}
