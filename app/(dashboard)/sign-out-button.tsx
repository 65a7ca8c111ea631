'use client';
import { signOut } from 'next-auth/react';
import { useState } from 'react';
import { Button } from '@/app/_components/button';

export function SignOutButton() {
  const [pending, setPending] = useState(false);
  return (
    <Button
      variant="ghost"
      pending={pending}
      className="min-h-9 px-3 py-1.5"
      onClick={async () => {
        setPending(true);
        // redirect: false, then a relative navigation: stays on the host the browser uses.
        await signOut({ redirect: false }).catch(() => undefined);
        window.location.assign('/signin');
      }}
    >
      Sign out
    </Button>
  );
}
