'use client';
import Link from 'next/link';
import { signIn } from 'next-auth/react';
import { useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { TextField } from '@/app/_components/text-field';
import { withCallback } from '@/app/_lib/format';
import type { OAuthProviderInfo } from '@/server/auth/oauth-providers';
import { OAuthButtons } from '../oauth-buttons';
import { signInErrorMessage } from '../sign-in-errors';

export function SignInForm({
  callbackPath,
  oauthProviders = [],
  initialError = null,
}: {
  callbackPath: string;
  oauthProviders?: OAuthProviderInfo[];
  initialError?: string | null;
}) {
  const [pending, setPending] = useState(false);
  // initialError: an OAuth sign-in that came back refused (/signin?error=...).
  const [error, setError] = useState<string | null>(initialError);

  async function onSubmit(event: React.FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setPending(true);
    setError(null);
    try {
      // redirect: false keeps next-auth from building an absolute URL from NEXTAUTH_URL,
      // which may name a different host than the one the browser is on.
      const result = await signIn('credentials', { email: String(form.get('email')), password: String(form.get('password')), redirect: false });
      if (!result || result.error) {
        setError(
          result?.error === 'CredentialsSignin' || !result
            ? 'Incorrect email or password.'
            : (signInErrorMessage(result.error ?? undefined) ?? 'Sign-in failed. Try again.'),
        );
        setPending(false);
        return;
      }
      // A full navigation, so the server layout sees the new session cookie.
      window.location.assign(callbackPath);
    } catch {
      setError('Could not reach the server. Check your connection and try again.');
      setPending(false);
    }
  }

  return (
    <div className="rounded-lg border border-zinc-200 bg-white px-5 py-6 shadow-xs sm:px-8">
      <h1 className="text-xl font-bold tracking-tight">Sign in</h1>
      <p className="mt-1 text-sm text-zinc-600">Manage API keys and credits.</p>
      <OAuthButtons providers={oauthProviders} callbackPath={callbackPath} />
      <form onSubmit={onSubmit} className="mt-6 space-y-4">
        <TextField label="Email" name="email" type="email" autoComplete="email" required autoFocus />
        <TextField label="Password" name="password" type="password" autoComplete="current-password" required />
        {error && <Alert>{error}</Alert>}
        <Button type="submit" pending={pending} className="w-full">
          Sign in
        </Button>
      </form>
      <p className="mt-6 text-center text-sm text-zinc-600">
        No account yet?{' '}
        <Link href={withCallback('/signup', callbackPath)} className="font-semibold text-indigo-700 hover:text-indigo-600">
          Create one
        </Link>
      </p>
    </div>
  );
}
