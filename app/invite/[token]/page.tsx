// {dashboard_url}/invite/<token>: an invite link an owner shared (docs/dashboard.md, "Roles,
// members and organizations"). Signed in, the page shows what it offers and accepts it on a click.
import type { Metadata } from 'next';
import { LinkCard, LinkPage, SignInChoices } from '@/app/_components/link-page';
import { getSessionUser } from '@/server/auth/session';
import { AcceptInvitation } from './accept-invitation';

export const metadata: Metadata = { title: 'Invitation' };

export default async function InvitePage({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  // Only the link's own characters go into the return path (it is the visitor's to write).
  const clean = token.replace(/[^A-Za-z0-9_-]/g, '').slice(0, 100);
  const returnTo = `/invite/${clean}`;
  const user = await getSessionUser();
  return (
    <LinkPage>
      {user ? (
        <AcceptInvitation token={clean} email={user.email} returnTo={returnTo} />
      ) : (
        <LinkCard title="You are invited">
          <p className="text-sm text-zinc-600">
            Someone invited you to their organization. Sign in, or create an account, to see the invitation and accept it.
          </p>
          <SignInChoices returnTo={returnTo} />
        </LinkCard>
      )}
    </LinkPage>
  );
}
