'use client';
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Card, PageHeader } from '@/app/_components/card';
import { LoadingBlock } from '@/app/_components/spinner';
import { errorMessage, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

export function Overview() {
  const trpc = useTRPC();
  const overview = useQuery(trpc.account.overview.queryOptions());

  if (overview.isPending) return <LoadingBlock label="Loading overview" lines={4} />;
  if (overview.isError) {
    return (
      <Alert title="Could not load the overview" onRetry={() => void overview.refetch()}>
        {errorMessage(overview.error)}
      </Alert>
    );
  }
  const { org, role, balanceUsd, keys, gatewayUrl } = overview.data;
  const empty = balanceUsd.replace(/[-0.]/g, '') === '';
  return (
    <>
      <PageHeader title={org.name} description="Your organization's credit and API keys.">
        <Badge tone="indigo">{role === 'owner' ? 'Owner' : 'Member'}</Badge>
      </PageHeader>
      <div className="grid gap-4 sm:grid-cols-2">
        <Card title="Credit balance">
          <p className="font-mono text-3xl font-semibold tracking-tight" data-testid="balance">
            {usd(balanceUsd)}
          </p>
          <p className="mt-1 text-sm text-zinc-600">USD, prepaid. Metered requests stop with 402 at zero.</p>
          {empty && (
            <p className="mt-3 text-sm text-amber-800">No credit yet: keys work for free routes such as the model list, but metered requests are refused until credit is added.</p>
          )}
          <Link href="/credits" className="mt-4 inline-block text-sm font-semibold text-indigo-700 hover:text-indigo-600">
            View ledger →
          </Link>
        </Card>
        <Card title="API keys">
          <p className="text-3xl font-semibold tracking-tight">{keys.active}</p>
          <p className="mt-1 text-sm text-zinc-600">
            active {keys.active === 1 ? 'key' : 'keys'}
            {keys.total > keys.active ? `, ${keys.total - keys.active} revoked` : ''}
          </p>
          <Link href="/keys" className="mt-4 inline-block text-sm font-semibold text-indigo-700 hover:text-indigo-600">
            {keys.total === 0 ? 'Create your first key →' : 'Manage keys →'}
          </Link>
        </Card>
      </div>
      <Card title="Make a request" className="mt-4">
        <p className="text-sm text-zinc-600">The gateway is OpenAI-compatible under /v1. Send your key as a bearer token:</p>
        <pre className="mt-3 overflow-x-auto rounded-md bg-zinc-900 px-4 py-3 font-mono text-xs text-zinc-100">
          <code>{`curl ${gatewayUrl}/v1/models \\\n  -H "Authorization: Bearer $SVC_API_KEY"`}</code>
        </pre>
      </Card>
    </>
  );
}
