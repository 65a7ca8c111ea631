'use client';
// The overview: balance, keys, recent usage, and until the org has made its first request a
// "Get started" list that leads from $0 to that request on this page alone: credit (a platform
// admin grants it right here; anyone else is told who adds credit and what to send them), a
// key, and a request to paste into a terminal.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import Link from 'next/link';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, PageHeader } from '@/app/_components/card';
import { CopyButton } from '@/app/_components/copy-button';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, plural, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { clearFields, positiveAmountError } from './credits/credits-view';
import { SpendChart } from './usage/usage-view';

type OverviewData = RouterOutputs['account']['overview'];
type Me = RouterOutputs['account']['me'];

/** What an org can do at $0: the one route the gateway does not meter. */
export const FREE_AT_ZERO =
  "At $0 a key works only for GET /v1/models (the model list) and voices' previews (GET /voices/{id}/preview: the Play buttons on the Voices page are free). Every other request (speech, transcription, chat, voices, dictionaries) is refused with 402 insufficient_quota until credit is added.";

const isZero = (amount: string) => amount.replace(/[-0.]/g, '') === '';

export function Overview() {
  const trpc = useTRPC();
  // Fresh on every visit: coming back after a first request must show it (and end the list).
  const overview = useQuery({ ...trpc.account.overview.queryOptions(), staleTime: 0 });
  const me = useQuery(trpc.account.me.queryOptions());
  const usage = useQuery({ ...trpc.usage.summary.queryOptions({ days: 7 }), staleTime: 0 });

  if (overview.isPending || me.isPending) return <LoadingBlock label="Loading overview" lines={4} />;
  if (overview.isError || me.isError) {
    const failed = overview.isError ? overview : me;
    return (
      <Alert title="Could not load the overview" onRetry={() => void failed.refetch()}>
        {errorMessage(failed.error)}
      </Alert>
    );
  }
  const { org, role, balanceUsd, keys } = overview.data;
  const empty = isZero(balanceUsd) || balanceUsd.startsWith('-');
  // Once a metered request went through, the org is started: the list gives way to the usage.
  const started = usage.data ? usage.data.totalRequests > 0 : false;
  return (
    <>
      <PageHeader title={org.name} description="Your organization's credit, API keys and usage.">
        <Badge tone="indigo">{role === 'owner' ? 'Owner' : 'Member'}</Badge>
      </PageHeader>
      {!started && usage.isSuccess && <GetStarted overview={overview.data} me={me.data} />}
      <div className="mt-4 grid gap-4 sm:grid-cols-2">
        <Card title="Credit balance">
          <p className="font-mono text-3xl font-semibold tracking-tight" data-testid="balance">
            {usd(balanceUsd)}
          </p>
          <p className="mt-1 text-sm text-zinc-600">USD, prepaid. Metered requests stop with 402 at zero.</p>
          {empty && (
            <p className="mt-3 text-sm text-amber-800" data-testid="zero-balance-hint">
              {FREE_AT_ZERO}
            </p>
          )}
          <div className="mt-4 flex flex-wrap gap-x-4 gap-y-1 text-sm font-semibold">
            <Link href="/credits" className="text-indigo-700 hover:text-indigo-600">
              View ledger →
            </Link>
            {me.data.user.isPlatformAdmin && (
              <Link href="/credits#grant" className="text-indigo-700 hover:text-indigo-600">
                Grant credit →
              </Link>
            )}
          </div>
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
      <RecentUsage summary={usage.data} loading={usage.isPending} error={usage.isError ? errorMessage(usage.error) : null} />
      <Card title="Make a request" className="mt-4">
        <p className="text-sm text-zinc-600">The gateway is OpenAI-compatible under /v1. Send your key as a bearer token; listing the models is free:</p>
        <CodeBlock testId="models-request">{`curl ${overview.data.gatewayUrl}/v1/models \\\n  -H "Authorization: Bearer $SVC_API_KEY"`}</CodeBlock>
        {/* Until the first request, the list above shows it. */}
        {started && (
          <>
            <p className="mt-3 text-sm text-zinc-600">A metered request, speech to a WAV file:</p>
            <FirstRequest gatewayUrl={overview.data.gatewayUrl} apiKey="$SVC_API_KEY" testId="speech-request" />
          </>
        )}
      </Card>
    </>
  );
}

function GetStarted({ overview, me }: { overview: OverviewData; me: Me }) {
  const hasCredit = !isZero(overview.balanceUsd) && !overview.balanceUsd.startsWith('-');
  const hasKey = overview.keys.active > 0;
  return (
    <section
      aria-labelledby="get-started"
      className="rounded-lg border border-indigo-200 bg-indigo-50/60 px-4 py-4 shadow-xs sm:px-6"
      data-testid="getting-started"
    >
      <h2 id="get-started" className="text-base font-semibold text-zinc-900">
        Get started: from $0 to your first request
      </h2>
      <ol className="mt-3 space-y-4">
        <Step n={1} title="Add credit" done={hasCredit} testId="step-credit">
          {hasCredit ? (
            <p>
              {overview.org.name} has {usd(overview.balanceUsd)}.
            </p>
          ) : me.user.isPlatformAdmin ? (
            <QuickGrant org={overview.org} />
          ) : (
            <NoCreditPath overview={overview} />
          )}
        </Step>
        <Step n={2} title="Create an API key" done={hasKey} testId="step-key">
          {hasKey ? (
            <p>
              {plural(overview.keys.active, 'active key')}.{' '}
              <Link href="/keys" className="font-semibold text-indigo-700 underline">
                Manage keys
              </Link>
            </p>
          ) : me.canManage ? (
            <p>
              <Link href="/keys" className="font-semibold text-indigo-700 underline">
                Create a key
              </Link>{' '}
              on the API keys page: it is shown once, with the request to try it.
            </p>
          ) : (
            <p>
              Only owners of {overview.org.name} create keys: ask one (see{' '}
              <Link href="/members" className="font-semibold underline">
                Members
              </Link>
              ).
            </p>
          )}
        </Step>
        <Step n={3} title="Make your first request" done={false} testId="step-request">
          <p>
            With credit and a key, paste this into a terminal (put your key in SVC_API_KEY first). It speaks a sentence into hello.wav and costs a few
            hundredths of a cent.
          </p>
          <FirstRequest gatewayUrl={overview.gatewayUrl} apiKey="$SVC_API_KEY" />
        </Step>
      </ol>
    </section>
  );
}

function Step({ n, title, done, testId, children }: { n: number; title: string; done: boolean; testId: string; children: React.ReactNode }) {
  return (
    <li className="flex gap-3" data-testid={testId} data-done={done}>
      <span
        aria-hidden="true"
        className={`flex size-7 shrink-0 items-center justify-center rounded-full text-sm font-semibold ${done ? 'bg-emerald-600 text-white' : 'bg-white text-indigo-700 ring-1 ring-indigo-300'}`}
      >
        {done ? '✓' : n}
      </span>
      <div className="min-w-0 flex-1 text-sm text-zinc-700">
        <p className="font-semibold text-zinc-900">
          {title}
          {done && <span className="sr-only"> (done)</span>}
        </p>
        <div className="mt-1">{children}</div>
      </div>
    </li>
  );
}

/** A platform admin at $0 (the first account of an instance is one): credit for this org, here. */
function QuickGrant({ org }: { org: OverviewData['org'] }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const form = useRef<HTMLFormElement>(null);
  const [refused, setRefused] = useState<string | null>(null);
  const grant = useMutation(
    trpc.credits.grant.mutationOptions({
      onSuccess: () => {
        // Cleared, so that a second click does not grant the same amount again.
        clearFields(form.current, ['amount']);
        void queryClient.invalidateQueries({ queryKey: trpc.account.overview.queryKey() });
        void queryClient.invalidateQueries({ queryKey: trpc.credits.pathKey() });
      },
    }),
  );
  return (
    <>
      <p>You are a platform admin of this instance (its first account is), so you add credit yourself: grant some to {org.name}.</p>
      <form
        ref={form}
        aria-label="Grant credit to this organization"
        className="mt-2 flex flex-col gap-3 sm:flex-row sm:items-start"
        onSubmit={(e) => {
          e.preventDefault();
          const amountUsd = String(new FormData(e.currentTarget).get('amount') ?? '').trim();
          // Credit only goes up here; removing it is the Credits page's adjustment, with a confirmation.
          const refusal = positiveAmountError(amountUsd);
          setRefused(refusal);
          if (!refusal) grant.mutate({ orgId: org.id, amountUsd, description: 'first credit (from the overview)' });
        }}
      >
        <TextField
          label="Amount (USD)"
          name="amount"
          inputMode="decimal"
          placeholder="5.00"
          required
          className="sm:w-40"
          error={refused}
          onChange={() => setRefused(null)}
        />
        <Button type="submit" pending={grant.isPending} className="sm:mt-6">
          Grant credit
        </Button>
      </form>
      {grant.error && (
        <div className="mt-2">
          <Alert>{errorMessage(grant.error)}</Alert>
        </div>
      )}
      <p className="mt-2 text-xs text-zinc-500">
        Other organizations get credit on the{' '}
        <Link href="/credits#grant" className="underline">
          Credits
        </Link>{' '}
        page.
      </p>
    </>
  );
}

/** Anyone else at $0: who adds credit, and exactly what to send them. */
function NoCreditPath({ overview }: { overview: OverviewData }) {
  const idInput = useRef<HTMLInputElement>(null);
  return (
    <div data-testid="no-credit-path">
      <p>
        Credit is added by an operator of this instance (a platform admin), on their Credits page. Ask them to grant credit to{' '}
        <strong>{overview.org.name}</strong> and send them this organization id:
      </p>
      <div className="mt-2 flex flex-col gap-2 sm:flex-row">
        <label htmlFor="org-id" className="sr-only">
          Organization id
        </label>
        <input
          id="org-id"
          ref={idInput}
          readOnly
          value={overview.org.id}
          onFocus={(e) => e.currentTarget.select()}
          data-testid="org-id"
          className="block w-full min-w-0 rounded-md border-0 bg-white px-3 py-2 font-mono text-sm text-zinc-900 ring-1 ring-zinc-300 ring-inset sm:max-w-xs"
        />
        <CopyButton value={overview.org.id} fallbackTarget={() => idInput.current} label="Copy id" />
      </div>
      {overview.role === 'member' && <p className="mt-2">You can also ask an owner of {overview.org.name}: they may know who runs this instance.</p>}
      <p className="mt-2">The balance here updates as soon as it is granted.</p>
    </div>
  );
}

/**
 * A request that spends credit and proves the key works: speech from the first TTS model and a
 * voice ready on it, into hello.wav. `apiKey` is "$SVC_API_KEY" or, right after a key was made,
 * the key itself (the keys page).
 */
export function FirstRequest({ gatewayUrl, apiKey, testId = 'first-request' }: { gatewayUrl: string; apiKey: string; testId?: string }) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'tts' }));
  const modelId = models.data?.[0]?.id ?? '';
  const voices = useQuery({ ...trpc.voices.forModel.queryOptions({ modelId }), enabled: modelId !== '' });
  if (models.isPending || (modelId && voices.isPending)) return <LoadingBlock label="Loading the example" lines={2} />;
  const voice = voices.data?.find((v) => v.language.toLowerCase().startsWith('en')) ?? voices.data?.[0];
  if (!modelId || !voice) return <p className="mt-2 text-sm text-zinc-600">No TTS model with a ready voice on this instance: try GET /v1/models above.</p>;
  const body = JSON.stringify({ model: modelId, voice: voice.id, input: 'Hello! My first request to the gateway.', response_format: 'wav' });
  const auth = apiKey.startsWith('$') ? `"Authorization: Bearer ${apiKey}"` : `'Authorization: Bearer ${apiKey}'`;
  return (
    <CodeBlock
      testId={testId}
      copy
    >{`curl ${gatewayUrl}/v1/audio/speech \\\n  -H ${auth} \\\n  -H 'Content-Type: application/json' \\\n  -d '${body}' \\\n  -o hello.wav`}</CodeBlock>
  );
}

export function CodeBlock({ children, testId, copy = false }: { children: string; testId?: string; copy?: boolean }) {
  return (
    <div className="mt-2 flex flex-col gap-2 sm:flex-row sm:items-start">
      <pre className="min-w-0 flex-1 overflow-x-auto rounded-md bg-zinc-900 px-4 py-3 font-mono text-xs text-zinc-100" data-testid={testId}>
        <code>{children}</code>
      </pre>
      {copy && <CopyButton value={children} label="Copy" />}
    </div>
  );
}

function RecentUsage({ summary, loading, error }: { summary: RouterOutputs['usage']['summary'] | undefined; loading: boolean; error: string | null }) {
  return (
    <Card
      title="Usage, last 7 days"
      className="mt-4"
      actions={
        <Link href="/usage" className="text-sm font-semibold text-indigo-700 hover:text-indigo-600">
          All usage →
        </Link>
      }
    >
      {loading ? (
        <LoadingBlock label="Loading usage" lines={2} />
      ) : error || !summary ? (
        <p className="text-sm text-red-700">Could not load usage: {error}</p>
      ) : summary.totalRequests === 0 ? (
        <p className="text-sm text-zinc-600" data-testid="overview-usage-empty">
          No metered requests in the last 7 days.
        </p>
      ) : (
        <div data-testid="overview-usage">
          <p className="text-sm text-zinc-700">
            <span className="font-mono text-2xl font-semibold tracking-tight text-zinc-900" data-testid="overview-usage-total">
              {usd(summary.totalUsd)}
            </span>{' '}
            for {plural(summary.totalRequests, 'metered request')}
            {summary.models.length > 0 && (
              <>
                {' '}
                · most on <span className="font-mono">{summary.models[0]!.modelId}</span>
              </>
            )}
          </p>
          <SpendChart summary={summary} height={120} />
        </div>
      )}
    </Card>
  );
}
