import type { Metadata } from 'next';
import { sameOriginPath } from '@/server/auth/callback-url';
import { processOAuthSetup } from '@/server/auth/oauth-providers';
import { signInErrorMessage } from '../sign-in-errors';
import { SignInForm } from './sign-in-form';

export const metadata: Metadata = { title: 'Sign in' };

export default async function SignInPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  return (
    <SignInForm callbackPath={sameOriginPath(params.callbackUrl)} oauthProviders={processOAuthSetup().info} initialError={signInErrorMessage(params.error)} />
  );
}
