'use client';
import { signOut } from 'next-auth/react';

// While signing out, a query that refetches meets the ended session and would send the
// browser to /signin?callbackUrl=<this page>, racing the sign-out's own navigation.
let signingOut = false;

export function isSigningOut(): boolean {
  return signingOut;
}

export async function signOutToSignIn(): Promise<void> {
  signingOut = true;
  // redirect: false, then a relative navigation: stays on the host the browser uses.
  await signOut({ redirect: false }).catch(() => undefined);
  window.location.assign('/signin');
}
