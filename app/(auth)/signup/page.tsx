import type { Metadata } from 'next';
import { sameOriginPath } from '@/server/auth/callback-url';
import { processOAuthSetup } from '@/server/auth/oauth-providers';
import { signInErrorMessage } from '../sign-in-errors';
import { SignUpForm } from './sign-up-form';

export const metadata: Metadata = { title: 'Create account' };

export default async function SignUpPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  return (
    <SignUpForm callbackPath={sameOriginPath(params.callbackUrl)} oauthProviders={processOAuthSetup().info} initialError={signInErrorMessage(params.error)} />
  );
}
