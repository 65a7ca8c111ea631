'use client';
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink } from '@trpc/client';
import { useState } from 'react';
import type { AppRouter } from '@/server/api/root';
// The server refuses bigger batches (server/api/trpc-http.ts); the constant is repeated, not
// imported, so the browser bundle does not pull in the server's tRPC handler.
const MAX_BATCH_CALLS = 10;
import { isUnauthorized } from './_lib/format';
import { isSigningOut } from './_lib/sign-out';
import { TRPCProvider } from './_lib/trpc';

/** A session that expires while a page is open sends the user to sign in, then back. */
function toSignIn(error: unknown) {
  if (!isUnauthorized(error) || isSigningOut() || window.location.pathname.startsWith('/signin')) return;
  window.location.assign(`/signin?callbackUrl=${encodeURIComponent(window.location.pathname + window.location.search)}`);
}

export function Providers({ children }: { children: React.ReactNode }) {
  const [queryClient] = useState(
    () =>
      new QueryClient({
        queryCache: new QueryCache({ onError: toSignIn }),
        mutationCache: new MutationCache({ onError: toSignIn }),
        defaultOptions: {
          queries: {
            staleTime: 5_000,
            // Do not retry what cannot succeed by retrying.
            retry: (count, error) =>
              count < 2 && !['UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'BAD_REQUEST'].includes((error as { data?: { code?: string } }).data?.code ?? ''),
          },
        },
      }),
  );
  const [trpcClient] = useState(() => createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: '/api/trpc', maxItems: MAX_BATCH_CALLS })] }));
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
