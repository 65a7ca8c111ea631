'use client';
import { signIn } from 'next-auth/react';
import { useState } from 'react';
import { Button } from '@/app/_components/button';
import type { OAuthProviderInfo } from '@/server/auth/oauth-providers';

/** One button per OAuth provider the operator configured, and an "or" rule before the form. */
export function OAuthButtons({ providers, callbackPath }: { providers: OAuthProviderInfo[]; callbackPath: string }) {
  const [pending, setPending] = useState<string | null>(null);
  if (providers.length === 0) return null;
  return (
    <div className="mt-6">
      <ul className="space-y-2" aria-label="Sign in with">
        {providers.map((p) => (
          <li key={p.id}>
            <Button
              variant="secondary"
              className="w-full"
              pending={pending === p.id}
              disabled={pending !== null}
              data-testid={`oauth-${p.id}`}
              onClick={() => {
                setPending(p.id);
                // A full-page redirect to the provider; it comes back to /api/auth/callback/<id>.
                void signIn(p.id, { callbackUrl: callbackPath }).catch(() => setPending(null));
              }}
            >
              Continue with {p.name}
            </Button>
          </li>
        ))}
      </ul>
      <div className="mt-6 flex items-center gap-3 text-xs text-zinc-500" aria-hidden="true">
        <span className="h-px flex-1 bg-zinc-200" />
        or with email
        <span className="h-px flex-1 bg-zinc-200" />
      </div>
    </div>
  );
}
