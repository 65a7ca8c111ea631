'use client';
import { useMutation, useQuery } from '@tanstack/react-query';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { LoadingBlock } from '@/app/_components/spinner';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime, formatMs, formatRate } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

type Model = RouterOutputs['models']['health'][number];
type Upstream = Model['upstreams'][number];
type History = RouterOutputs['models']['upstreamHistory'][string];

const HEALTH = { up: { tone: 'green', label: 'Up' }, down: { tone: 'amber', label: 'Down' }, unknown: { tone: 'gray', label: 'Not checked' } } as const;
const isForbidden = (error: unknown) => (error as { data?: { code?: string } } | null)?.data?.code === 'FORBIDDEN';

export function ModelsView() {
  const trpc = useTRPC();
  // The gateway's health checker writes these every few seconds; follow it while the page is open.
  const models = useQuery({ ...trpc.models.health.queryOptions(), refetchInterval: 10_000 });
  const history = useQuery({ ...trpc.models.upstreamHistory.queryOptions(), refetchInterval: 60_000 });
  return (
    <>
      <PageHeader
        title="Models"
        description="Every model of this instance with its upstreams, as the gateway's health checker last saw them. Platform admins only."
      />
      {models.isPending ? (
        <LoadingBlock label="Loading models" lines={5} />
      ) : models.isError ? (
        isForbidden(models.error) ? (
          <Alert tone="warning" title="Platform admins only">
            This page shows the operators' view of the instance.
          </Alert>
        ) : (
          <Alert title="Could not load the models" onRetry={() => void models.refetch()}>
            {errorMessage(models.error)}
          </Alert>
        )
      ) : models.data.length === 0 ? (
        <EmptyState title="No models">Add one with `svc model upsert`.</EmptyState>
      ) : (
        <div className="space-y-4">
          {models.data.map((m) => (
            <ModelCard key={m.id} model={m} history={history.data} />
          ))}
        </div>
      )}
    </>
  );
}

function ModelCard({ model: m, history }: { model: Model; history: Record<string, History> | undefined }) {
  const up = m.upstreams.filter((u) => u.health === 'up').length;
  return (
    <Card
      title={m.id}
      description={m.displayName || undefined}
      actions={
        <div className="flex flex-wrap gap-1">
          <Badge tone="indigo">{m.modality.toUpperCase()}</Badge>
          {m.status === 'disabled' ? <Badge tone="gray">Disabled</Badge> : <Badge tone={up > 0 ? 'green' : 'amber'}>{`${up}/${m.upstreams.length} up`}</Badge>}
        </div>
      }
    >
      {m.upstreams.length === 0 ? (
        <p className="text-sm text-zinc-600">No upstreams: requests for this model answer model_offline.</p>
      ) : (
        <ul className="divide-y divide-zinc-100" aria-label={`Upstreams of ${m.id}`}>
          {m.upstreams.map((u) => (
            <UpstreamRow key={u.id} u={u} history={history?.[u.id]} />
          ))}
        </ul>
      )}
      {/* Only engines with a voice list (Cartesia, ElevenLabs, Deepgram): the bundled ones have none, and the import could only fail. */}
      {m.listsVoices && <ImportVoices modelId={m.id} />}
    </Card>
  );
}

/** The engine's own voices (Cartesia, ElevenLabs, Deepgram Aura) as platform voices of this model. */
function ImportVoices({ modelId }: { modelId: string }) {
  const trpc = useTRPC();
  const importVoices = useMutation(trpc.models.importVoices.mutationOptions());
  return (
    <div className="mt-3 flex flex-wrap items-center gap-3 border-t border-zinc-100 pt-3 text-sm">
      <Button variant="secondary" pending={importVoices.isPending} onClick={() => importVoices.mutate({ modelId })}>
        Import the engine&apos;s voices
      </Button>
      {importVoices.isError ? (
        <div className="w-full" data-testid="import-voices-error">
          <Alert title="Could not import the engine's voices">
            <ErrorText text={errorMessage(importVoices.error)} />
          </Alert>
        </div>
      ) : (
        <span className="text-zinc-600" role="status">
          {importVoices.isSuccess
            ? `${importVoices.data.listed} listed by the engine: ${importVoices.data.created} imported, ${importVoices.data.updated} updated. Every org sees them in Voices.`
            : "Lists the voices of this model's engine and makes each a platform voice with a ready profile (again: updates them)."}
        </span>
      )}
    </div>
  );
}

/** An engine's message, with the `commands` it quotes set as code (the local-llm one says how to fix itself). */
function ErrorText({ text }: { text: string }) {
  return (
    <>
      {text.split(/(`[^`]+`)/).map((part, i) =>
        part.startsWith('`') && part.endsWith('`') && part.length > 2 ? (
          <code key={i} className="rounded bg-red-100 px-1 py-0.5 font-mono text-[0.8rem] break-words text-red-900">
            {part.slice(1, -1)}
          </code>
        ) : (
          <span key={i}>{part}</span>
        ),
      )}
    </>
  );
}

/**
 * One upstream: where it is and how it is reached, then each figure with its label (they used
 * to wrap unlabelled in a narrow column), then the last error in full.
 */
function UpstreamRow({ u, history }: { u: Upstream; history: History | undefined }) {
  const health = HEALTH[u.health];
  return (
    <li className="py-4" data-testid="upstream-row">
      <div className="flex flex-wrap items-start justify-between gap-2">
        <div className="min-w-0">
          <p className="font-mono text-sm break-all text-zinc-900">{u.url}</p>
          <p className="text-xs text-zinc-500">
            {u.protocol}
            {u.upstreamModel ? ` · as ${u.upstreamModel}` : ''} · weight {u.weight}
            {u.apiKeyEnv ? ` · key from $${u.apiKeyEnv}` : ''}
          </p>
        </div>
        <div className="flex gap-1">
          {u.circuitOpen && <Badge tone="red">Open circuit</Badge>}
          <Badge tone={health.tone}>{health.label}</Badge>
        </div>
      </div>
      <dl className="mt-3 grid grid-cols-2 gap-x-6 gap-y-2 text-sm sm:grid-cols-3">
        <div>
          <dt className="text-xs text-zinc-500">Latency</dt>
          <dd className="whitespace-nowrap text-zinc-900" data-testid="upstream-latency">
            {u.health !== 'up' || u.latencyMs === null ? '—' : formatMs(u.latencyMs)}
          </dd>
        </div>
        <div>
          <dt className="text-xs text-zinc-500">Errors, last 15 min</dt>
          <dd className="whitespace-nowrap text-zinc-900" data-testid="upstream-error-rate">
            {u.errorRate === null ? 'No calls' : `${(u.errorRate * 100).toFixed(1)}% (${u.recentErrors} of ${u.recentRequests})`}
          </dd>
        </div>
        <div>
          <dt className="text-xs text-zinc-500">Last checked</dt>
          <dd className="text-zinc-900">{formatDateTime(u.lastCheckedAt, 'Never')}</dd>
        </div>
      </dl>
      <UpstreamHistory hours={history} />
      {u.lastError && (
        <div className="mt-3 rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800" data-testid="upstream-last-error">
          <p className="text-xs font-semibold">Last error</p>
          <p className="mt-0.5 break-words whitespace-pre-wrap">
            <ErrorText text={u.lastError} />
          </p>
        </div>
      )}
    </li>
  );
}

const hourLabel = new Intl.DateTimeFormat('en', { hour: '2-digit', minute: '2-digit', hour12: false });

/**
 * The upstream's last 24 hours, an hour a bar: calls (errors in red) and the p95 latency of the
 * requests it served. "—" where nothing was measured, never "0 ms".
 */
function UpstreamHistory({ hours }: { hours: History | undefined }) {
  const list = hours ?? [];
  const calls = list.reduce((n, h) => n + h.requests, 0);
  const errors = list.reduce((n, h) => n + h.errors, 0);
  const measured = list.filter((h) => h.p95Ms !== null);
  const lastP95 = measured.at(-1)?.p95Ms ?? null;
  const worstP95 = measured.length > 0 ? Math.max(...measured.map((h) => h.p95Ms!)) : null;
  const top = Math.max(...list.map((h) => h.requests), 1);
  return (
    <div className="mt-3" data-testid="upstream-history">
      <dl className="grid grid-cols-2 gap-x-6 gap-y-2 text-sm sm:grid-cols-3">
        <div>
          <dt className="text-xs text-zinc-500">Calls, last 24 h</dt>
          <dd className="text-zinc-900">
            {calls === 0 ? 'No calls' : `${calls.toLocaleString('en')} (${errors.toLocaleString('en')} failed, ${formatRate(errors / calls)})`}
          </dd>
        </div>
        <div>
          <dt className="text-xs text-zinc-500">p95 latency, latest hour measured</dt>
          <dd className="text-zinc-900" data-testid="upstream-p95">
            {formatMs(lastP95)}
          </dd>
        </div>
        <div>
          <dt className="text-xs text-zinc-500">Worst hourly p95, 24 h</dt>
          <dd className="text-zinc-900">{formatMs(worstP95)}</dd>
        </div>
      </dl>
      {calls > 0 && (
        <div className="mt-2 flex h-10 items-end gap-px" role="img" aria-label={`Calls per hour over the last 24 hours: ${calls} calls, ${errors} failed.`}>
          {list.map((h) => (
            <div
              key={h.hour}
              className="flex flex-1 flex-col-reverse bg-zinc-50"
              style={{ height: '100%' }}
              title={`${hourLabel.format(new Date(h.hour))}: ${h.requests} calls, ${h.errors} failed, p50 ${formatMs(h.p50Ms)}, p95 ${formatMs(h.p95Ms)}`}
            >
              <div className="bg-indigo-400" style={{ height: `${((h.requests - h.errors) / top) * 100}%` }} />
              <div className="bg-red-500" style={{ height: `${(h.errors / top) * 100}%` }} />
            </div>
          ))}
        </div>
      )}
    </div>
  );
}
