'use client';
import { useMutation } from '@tanstack/react-query';
import Link from 'next/link';
import { signIn } from 'next-auth/react';
import { useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { TextField } from '@/app/_components/text-field';
import { errorMessage, withCallback } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import type { OAuthProviderInfo } from '@/server/auth/oauth-providers';
import { OAuthButtons } from '../oauth-buttons';

const MIN_PASSWORD = 8;

/** callbackPath: where to go once signed in (a same-site path, e.g. back to the claim page). */
export function SignUpForm({
  callbackPath = '/',
  oauthProviders = [],
  initialError = null,
}: {
  callbackPath?: string;
  oauthProviders?: OAuthProviderInfo[];
  initialError?: string | null;
}) {
  const trpc = useTRPC();
  const signUp = useMutation(trpc.auth.signUp.mutationOptions());
  const [passwordError, setPasswordError] = useState<string | null>(null);
  const [signInError, setSignInError] = useState<string | null>(null);
  const [signingIn, setSigningIn] = useState(false);

  async function onSubmit(event: React.FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const email = String(form.get('email'));
    const password = String(form.get('password'));
    const name = String(form.get('name') ?? '').trim();
    setSignInError(null);
    if (password.length < MIN_PASSWORD) {
      setPasswordError(`Use at least ${MIN_PASSWORD} characters.`);
      return;
    }
    setPasswordError(null);
    try {
      await signUp.mutateAsync({ email, password, ...(name ? { name } : {}) });
    } catch {
      return; // shown from signUp.error
    }
    setSigningIn(true);
    const result = await signIn('credentials', { email, password, redirect: false }).catch(() => undefined);
    if (!result || result.error) {
      setSigningIn(false);
      setSignInError('Your account was created, but signing in failed. Sign in to continue.');
      return;
    }
    window.location.assign(callbackPath);
  }

  return (
    <div className="rounded-lg border border-zinc-200 bg-white px-5 py-6 shadow-xs sm:px-8">
      <h1 className="text-xl font-bold tracking-tight">Create your account</h1>
      <p className="mt-1 text-sm text-zinc-600">You get a personal organization to hold your keys and credits.</p>
      {initialError && (
        <div className="mt-4">
          <Alert>{initialError}</Alert>
        </div>
      )}
      <OAuthButtons providers={oauthProviders} callbackPath={callbackPath} />
      <form onSubmit={onSubmit} className="mt-6 space-y-4">
        <TextField label="Name (optional)" name="name" autoComplete="name" maxLength={100} />
        <TextField label="Email" name="email" type="email" autoComplete="email" required autoFocus />
        <TextField
          label="Password"
          name="password"
          type="password"
          autoComplete="new-password"
          required
          minLength={MIN_PASSWORD}
          hint={`At least ${MIN_PASSWORD} characters.`}
          error={passwordError}
        />
        {signUp.error && <Alert>{errorMessage(signUp.error)}</Alert>}
        {signInError && (
          <Alert tone="warning">
            {signInError}{' '}
            <Link href={withCallback('/signin', callbackPath)} className="font-semibold underline">
              Sign in
            </Link>
          </Alert>
        )}
        <Button type="submit" pending={signUp.isPending || signingIn} className="w-full">
          Create account
        </Button>
      </form>
      <p className="mt-6 text-center text-sm text-zinc-600">
        Already have an account?{' '}
        <Link href={withCallback('/signin', callbackPath)} className="font-semibold text-indigo-700 hover:text-indigo-600">
          Sign in
        </Link>
      </p>
    </div>
  );
}
