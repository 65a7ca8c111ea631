'use client';
import { useMutation, useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { signOut } from 'next-auth/react';
import { useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { LinkCard } from '@/app/_components/link-page';
import { LoadingBlock } from '@/app/_components/spinner';
import { errorMessage, formatDateTime, withCallback } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { chooseOrg } from '../../(dashboard)/org-switcher';

/**
 * Accepting takes a click rather than happening on load: the page first says which org, which
 * role and which account, so nobody joins an org by opening a link they did not expect.
 */
export function AcceptInvitation({ token, email, returnTo }: { token: string; email: string; returnTo: string }) {
  const trpc = useTRPC();
  const invitation = useQuery(trpc.orgs.invitation.queryOptions({ token }, { retry: false }));
  const accept = useMutation(trpc.orgs.acceptInvitation.mutationOptions({ onSuccess: (r) => chooseOrg(r.org.id) }));
  const [signingOut, setSigningOut] = useState(false);

  async function switchAccount() {
    setSigningOut(true);
    await signOut({ redirect: false }).catch(() => undefined);
    window.location.assign(withCallback('/signin', returnTo));
  }

  if (accept.data) {
    return (
      <LinkCard title={`You joined ${accept.data.org.name}`}>
        <Alert tone="success">
          {accept.data.alreadyMember
            ? 'You were already a member; the invitation is used up.'
            : `You are now ${accept.data.role === 'owner' ? 'an owner' : 'a member'}.`}{' '}
          The dashboard now acts for {accept.data.org.name}; switch organizations from the header.
        </Alert>
        <Link href="/" className="mt-4 inline-block font-semibold text-indigo-700 hover:text-indigo-600">
          Go to the dashboard
        </Link>
      </LinkCard>
    );
  }
  return (
    <LinkCard title="Join an organization?">
      <p className="text-sm text-zinc-600">
        Signed in as <strong className="break-all text-zinc-900">{email}</strong>.{' '}
        <button type="button" onClick={switchAccount} disabled={signingOut} className="font-semibold text-indigo-700 underline hover:text-indigo-600">
          Use another account
        </button>
      </p>
      <div className="mt-5 space-y-4">
        {invitation.isPending && <LoadingBlock label="Reading the invitation" />}
        {invitation.isError && <Alert>{errorMessage(invitation.error)}</Alert>}
        {invitation.data && (
          <>
            <p className="text-sm text-zinc-800" data-testid="invitation-offer">
              An owner of <strong>{invitation.data.org.name}</strong> invited <strong className="break-all">{invitation.data.email}</strong> to join as{' '}
              {invitation.data.role === 'owner' ? 'an owner' : 'a member'}. The link works once, until {formatDateTime(invitation.data.expiresAt)}.
            </p>
            {accept.error && <Alert>{errorMessage(accept.error)}</Alert>}
            <Button className="w-full" pending={accept.isPending} onClick={() => accept.mutate({ token })}>
              Join {invitation.data.org.name}
            </Button>
          </>
        )}
      </div>
    </LinkCard>
  );
}
