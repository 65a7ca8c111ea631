/**
 * next-auth's error codes (and ours from the OAuth sign-in callback) as sentences. They arrive
 * as /signin?error=<code>; unknown codes get the generic one.
 */
const SIGN_IN_ERRORS: Record<string, string> = {
  OAuthEmailUnverified:
    'The provider did not confirm that your email address is verified, so it cannot be used to sign in here. Verify it with the provider (on GitHub, make a verified address your primary one) and try again, or use email and password.',
  OAuthEmailMissing:
    'The provider did not give an email address for your account, so it cannot be used to sign in here. Add one there, or use email and password.',
  OAuthPasswordAccountUnverified:
    "An account here already uses this email address, signs in with a password and has not verified the address, so the provider cannot sign into it: whoever typed the address at sign-up may not own it. If it is your account, sign in with its email and password instead; the provider works once the address is verified. If it is not yours, tell this server's operator.",
  TooManySignInAttempts: 'Too many sign-in attempts for this email or from your network. Wait a minute, then try again.',
  AccessDenied: 'Sign-in was cancelled or refused.',
  OAuthSignin: 'Could not start signing in with that provider. Try again, or use email and password.',
  OAuthCallback: 'Signing in with that provider failed. Try again, or use email and password.',
  OAuthCreateAccount: 'Could not create your account. Try again.',
  Callback: 'Signing in failed. Try again, or use email and password.',
  Configuration: 'Sign-in is not configured correctly on this server. Tell its operator.',
  SessionRequired: 'Sign in to continue.',
};

export function signInErrorMessage(code: string | string[] | undefined): string | null {
  const value = Array.isArray(code) ? code[0] : code;
  if (!value) return null;
  return SIGN_IN_ERRORS[value] ?? 'Signing in failed. Try again.';
}
