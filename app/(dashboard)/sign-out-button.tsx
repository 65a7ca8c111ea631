'use client';
import { useState } from 'react';
import { Button } from '@/app/_components/button';
import { signOutToSignIn } from '@/app/_lib/sign-out';

export function SignOutButton() {
  const [pending, setPending] = useState(false);
  return (
    <Button
      variant="ghost"
      pending={pending}
      className="min-h-9 px-3 py-1.5"
      onClick={async () => {
        setPending(true);
        await signOutToSignIn();
      }}
    >
      Sign out
    </Button>
  );
}
