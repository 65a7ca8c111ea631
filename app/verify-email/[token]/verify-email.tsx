'use client';
import { useMutation } from '@tanstack/react-query';
import Link from 'next/link';
import { useEffect, useRef } from 'react';
import { Alert } from '@/app/_components/alert';
import { LinkCard } from '@/app/_components/link-page';
import { LoadingBlock } from '@/app/_components/spinner';
import { errorMessage } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

/** Following the link is the request: it verifies on arrival (it needs the account's own session). */
export function VerifyEmail({ token, email }: { token: string; email: string }) {
  const trpc = useTRPC();
  const verify = useMutation(trpc.account.verifyEmail.mutationOptions());
  const { mutate } = verify;
  // Once per page: the link is single use, and React may run an effect twice in development.
  const sent = useRef(false);
  useEffect(() => {
    if (sent.current) return;
    sent.current = true;
    mutate({ token });
  }, [mutate, token]);

  return (
    <LinkCard title="Verify your email">
      {verify.isPending || verify.isIdle ? (
        <LoadingBlock label={`Verifying ${email}`} />
      ) : verify.isError ? (
        <Alert>{errorMessage(verify.error)}</Alert>
      ) : (
        <Alert tone="success" title="Email verified">
          <span className="break-all">{verify.data.email}</span> is verified.
          {verify.data.joinedOrgs > 0 &&
            ` You joined ${verify.data.joinedOrgs} organization${verify.data.joinedOrgs === 1 ? '' : 's'} that had invited this address.`}
        </Alert>
      )}
      <Link href="/" className="mt-4 inline-block font-semibold text-indigo-700 hover:text-indigo-600">
        Go to the dashboard
      </Link>
    </LinkCard>
  );
}
