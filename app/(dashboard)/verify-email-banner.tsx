'use client';
import { useMutation, useQuery } from '@tanstack/react-query';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { errorMessage } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

/**
 * Only where the server sends mail: until the account verifies its address, invitations to it
 * wait (an invite link works regardless). The sign-up email has the link; this sends another.
 */
export function VerifyEmailBanner() {
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  const send = useMutation(trpc.account.sendVerificationEmail.mutationOptions());
  if (!me.data?.mailEnabled || me.data.user.emailVerified) return null;
  return (
    <div className="mb-6" data-testid="verify-email-banner">
      <Alert tone="warning" title="Verify your email address">
        <p>
          We emailed a link to <strong className="break-all">{me.data.user.email}</strong>. Open it while signed in here; until then, invitations sent to this
          address wait.
        </p>
        <div className="mt-2 flex flex-wrap items-center gap-3">
          <Button variant="secondary" className="min-h-8 px-3 py-1" pending={send.isPending} disabled={send.isSuccess} onClick={() => send.mutate()}>
            {send.isSuccess ? 'Link sent' : 'Send the link again'}
          </Button>
          {send.isError && <span className="text-sm">{errorMessage(send.error)}</span>}
        </div>
      </Alert>
    </div>
  );
}
