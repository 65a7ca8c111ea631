'use client';
// The Logs page: the org's requests and sessions, newest first. Every filter is in the URL (a
// filtered view can be shared, reloaded, linked to from Usage), a live tail polls the newest
// page, a request id (the x-request-id of any answer) finds its row, and the filtered rows
// export as CSV or JSON Lines. Rows open their detail (a session's per-turn waterfall).
import { keepPreviousData, useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import Link from 'next/link';
import { usePathname, useRouter, useSearchParams } from 'next/navigation';
import { useMemo, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterInputs, RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatMs, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

type LogRecord = RouterOutputs['logs']['list']['data'][number];
type LogQuery = Omit<RouterInputs['logs']['list'], 'cursor' | 'direction'>;

const RANGES = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 } as const;
type Range = keyof typeof RANGES;
const STATUSES = { ok: 'Succeeded', error: 'Failed (400+)', '4xx': '4xx', '5xx': '5xx' } as const;
const LIVE_MS = 2_000;
const PAGE = 50;

/** The filters as the URL holds them. */
function filtersOf(params: URLSearchParams) {
  const range = params.get('range');
  const status = params.get('status');
  const kind = params.get('kind');
  return {
    range: range && range in RANGES ? (range as Range) : null,
    key: params.get('key') || undefined,
    model: params.get('model') || undefined,
    route: params.get('route') || undefined,
    status: status && (status in STATUSES || /^\d{3}$/.test(status)) ? status : undefined,
    kind: kind === 'http' || kind === 'session' ? (kind as 'http' | 'session') : undefined,
    requestId: params.get('request_id') || undefined,
    live: params.get('live') === '1',
  };
}

export function LogsView() {
  const trpc = useTRPC();
  const router = useRouter();
  const pathname = usePathname();
  const params = useSearchParams();
  const f = filtersOf(new URLSearchParams(params.toString()));
  const setParam = (changes: Record<string, string | null>) => {
    const next = new URLSearchParams(params.toString());
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v);
      else next.delete(k);
    }
    const query = next.toString();
    router.replace(query ? `${pathname}?${query}` : pathname, { scroll: false });
  };

  // `from` is fixed when the range is chosen (a moving one would be a new query every render).
  const from = useMemo(() => (f.range ? new Date(Date.now() - RANGES[f.range]).toISOString() : undefined), [f.range]);
  const query: LogQuery = {
    from,
    key: f.key,
    model: f.model,
    route: f.route,
    status: f.status as LogQuery['status'],
    kind: f.kind,
    request_id: f.requestId,
    limit: PAGE,
  };
  const logs = useInfiniteQuery({
    ...trpc.logs.list.infiniteQueryOptions(query, { getNextPageParam: (page) => page.next_cursor ?? undefined }),
    placeholderData: keepPreviousData,
    refetchInterval: f.live ? LIVE_MS : false,
  });
  const rows = logs.data?.pages.flatMap((p) => p.data) ?? [];
  const filtered = Boolean(f.range || f.key || f.model || f.route || f.status || f.kind || f.requestId);

  return (
    <>
      <PageHeader
        title="Logs"
        description="Every request and session of your organization: status, model, key, latency and cost. Find one by the x-request-id its answer carried."
      >
        <Button
          variant={f.live ? 'primary' : 'secondary'}
          aria-pressed={f.live}
          onClick={() => setParam({ live: f.live ? null : '1' })}
          data-testid="logs-live"
        >
          {f.live ? 'Live: on' : 'Live tail'}
        </Button>
      </PageHeader>
      <div className="space-y-6">
        <RequestIdSearch initial={f.requestId ?? ''} onSearch={(id) => setParam({ request_id: id || null })} />
        <Filters f={f} setParam={setParam} />
        <Card
          title="Requests"
          description={f.live ? `Newest first; the newest page is read again every ${LIVE_MS / 1000} s.` : 'Newest first.'}
          actions={<ExportButtons query={query} disabled={rows.length === 0} />}
        >
          {logs.isPending ? (
            <LoadingBlock label="Loading logs" lines={6} />
          ) : logs.isError ? (
            <Alert title="Could not load the logs" onRetry={() => void logs.refetch()}>
              {errorMessage(logs.error)}
            </Alert>
          ) : rows.length === 0 ? (
            <EmptyState title={f.requestId ? 'No request with this id' : filtered ? 'No requests match these filters' : 'No requests yet'}>
              {f.requestId
                ? 'Request ids are the x-request-id header of each answer. Rows appear within a few seconds of the answer, and only for your organization.'
                : 'Requests made with your keys appear here within a few seconds.'}
            </EmptyState>
          ) : (
            <>
              <LogTable rows={rows} />
              {logs.hasNextPage && (
                <div className="mt-4 flex justify-center">
                  <Button variant="secondary" pending={logs.isFetchingNextPage} onClick={() => void logs.fetchNextPage()}>
                    Load older requests
                  </Button>
                </div>
              )}
            </>
          )}
        </Card>
        <LogSettings />
      </div>
    </>
  );
}

function RequestIdSearch({ initial, onSearch }: { initial: string; onSearch: (id: string) => void }) {
  const [value, setValue] = useState(initial);
  return (
    <form
      role="search"
      className="flex flex-wrap items-end gap-3"
      onSubmit={(e) => {
        e.preventDefault();
        onSearch(value.trim());
      }}
    >
      <TextField
        label="Request id"
        name="request_id"
        value={value}
        onChange={(e) => setValue(e.target.value)}
        placeholder="req_… (the x-request-id header)"
        className="min-w-64 flex-1"
        autoComplete="off"
        spellCheck={false}
      />
      <Button type="submit">Find</Button>
      {initial && (
        <Button
          variant="ghost"
          onClick={() => {
            setValue('');
            onSearch('');
          }}
        >
          Clear
        </Button>
      )}
    </form>
  );
}

function Filters({ f, setParam }: { f: ReturnType<typeof filtersOf>; setParam: (changes: Record<string, string | null>) => void }) {
  const trpc = useTRPC();
  const keys = useQuery(trpc.keys.list.queryOptions());
  const models = useQuery(trpc.models.catalog.queryOptions({}));
  const [route, setRoute] = useState(f.route ?? '');
  return (
    <div className="grid grid-cols-2 gap-3 sm:grid-cols-3 lg:grid-cols-6" aria-label="Filters" role="group">
      <SelectField label="Time" value={f.range ?? ''} onChange={(e) => setParam({ range: e.target.value || null })}>
        <option value="">Any time</option>
        <option value="1h">Last hour</option>
        <option value="24h">Last 24 hours</option>
        <option value="7d">Last 7 days</option>
        <option value="30d">Last 30 days</option>
      </SelectField>
      <SelectField label="Key" value={f.key ?? ''} onChange={(e) => setParam({ key: e.target.value || null })}>
        <option value="">Every key</option>
        {keys.data?.map((k) => (
          <option key={k.id} value={k.id}>
            {k.name || k.prefix}
            {k.status === 'revoked' ? ' (revoked)' : ''}
          </option>
        ))}
      </SelectField>
      <SelectField label="Model" value={f.model ?? ''} onChange={(e) => setParam({ model: e.target.value || null })}>
        <option value="">Every model</option>
        {/* A model filtered on from a link may no longer be in the catalogue: keep it selectable. */}
        {f.model && !models.data?.some((m) => m.id === f.model) && <option value={f.model}>{f.model}</option>}
        {models.data?.map((m) => (
          <option key={m.id} value={m.id}>
            {m.id}
          </option>
        ))}
      </SelectField>
      <SelectField label="Status" value={f.status ?? ''} onChange={(e) => setParam({ status: e.target.value || null })}>
        <option value="">Any status</option>
        {Object.entries(STATUSES).map(([value, label]) => (
          <option key={value} value={value}>
            {label}
          </option>
        ))}
        {f.status && !(f.status in STATUSES) && <option value={f.status}>{f.status}</option>}
      </SelectField>
      <SelectField label="Kind" value={f.kind ?? ''} onChange={(e) => setParam({ kind: e.target.value || null })}>
        <option value="">Requests and sessions</option>
        <option value="http">HTTP requests</option>
        <option value="session">Sessions (WebSocket)</option>
      </SelectField>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setParam({ route: route.trim() || null });
        }}
      >
        <TextField
          label="Route"
          value={route}
          onChange={(e) => setRoute(e.target.value)}
          onBlur={() => setParam({ route: route.trim() || null })}
          placeholder="/v1/chat/completions"
        />
      </form>
    </div>
  );
}

export function statusTone(status: number): 'green' | 'amber' | 'red' | 'indigo' {
  if (status === 101) return 'indigo';
  if (status >= 500) return 'red';
  if (status >= 400) return 'amber';
  return 'green';
}

const time = new Intl.DateTimeFormat('en', { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });

function LogTable({ rows }: { rows: LogRecord[] }) {
  return (
    <div className="-mx-4 overflow-x-auto sm:-mx-6">
      <table className="w-full min-w-[56rem] text-left text-sm">
        <caption className="sr-only">Requests and sessions, newest first</caption>
        <thead className="text-xs text-zinc-500 uppercase">
          <tr>
            {['Time', 'Status', 'Route', 'Model', 'Key', 'Latency', 'Cost', 'Request id'].map((h) => (
              <th
                key={h}
                scope="col"
                className={`px-2 py-2 first:pl-4 last:pr-4 sm:first:pl-6 sm:last:pr-6 ${h === 'Latency' || h === 'Cost' ? 'text-right' : ''}`}
              >
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-100">
          {rows.map((r) => (
            <tr key={r.id} className="hover:bg-zinc-50" data-testid="log-row" data-request-id={r.request_id}>
              <td className="px-2 py-2 pl-4 whitespace-nowrap text-zinc-600 sm:pl-6">{time.format(new Date(r.created_at))}</td>
              <td className="px-2 py-2">
                <span className="flex flex-wrap items-center gap-1">
                  <Badge tone={statusTone(r.status)}>{r.status}</Badge>
                  {r.error_code && <span className="font-mono text-xs text-zinc-600">{r.error_code}</span>}
                </span>
              </td>
              <td className="px-2 py-2">
                <span className="font-mono text-xs whitespace-nowrap">
                  {r.kind === 'session' ? 'WS ' : `${r.method} `}
                  {r.route}
                </span>
              </td>
              <td className="px-2 py-2 font-mono text-xs">{r.model ?? '—'}</td>
              <td className="px-2 py-2 text-xs">{r.key.name || '—'}</td>
              <td className="px-2 py-2 text-right font-mono text-xs whitespace-nowrap">
                {r.kind === 'session' ? formatMs(r.timings.total_ms) : formatMs(r.timings.ttfb_ms ?? r.timings.total_ms)}
              </td>
              <td className="px-2 py-2 text-right font-mono text-xs">{usd(r.cost_usd)}</td>
              <td className="px-2 py-2 pr-4 sm:pr-6">
                <Link
                  href={`/logs/${r.id}`}
                  className="font-mono text-xs text-indigo-700 underline-offset-2 hover:underline"
                  aria-label={`Details of ${r.request_id}`}
                >
                  {r.request_id}
                </Link>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The filtered rows as a file: the server makes it (the same export as GET /v1/logs), the browser saves it. */
function ExportButtons({ query, disabled }: { query: LogQuery; disabled: boolean }) {
  const trpc = useTRPC();
  const exported = useMutation(
    trpc.logs.export.mutationOptions({
      onSuccess: (file) => {
        const url = URL.createObjectURL(new Blob([file.text], { type: file.contentType }));
        const a = document.createElement('a');
        a.href = url;
        a.download = file.filename;
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10_000);
      },
    }),
  );
  const run = (format: 'csv' | 'jsonl') => exported.mutate({ ...query, limit: 10_000, format });
  return (
    <div className="flex flex-wrap items-center gap-2">
      <Button variant="secondary" disabled={disabled} pending={exported.isPending && exported.variables?.format === 'csv'} onClick={() => run('csv')}>
        Export CSV
      </Button>
      <Button variant="secondary" disabled={disabled} pending={exported.isPending && exported.variables?.format === 'jsonl'} onClick={() => run('jsonl')}>
        Export JSONL
      </Button>
      {exported.isError && (
        <span role="alert" className="text-sm text-red-700">
          {errorMessage(exported.error)}
        </span>
      )}
    </div>
  );
}

/** Content (opt-in) and retention of the org's logs: owners change them, members see them. */
function LogSettings() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const settings = useQuery(trpc.logs.settings.queryOptions());
  const update = useMutation(
    trpc.logs.updateSettings.mutationOptions({
      onSuccess: () => void queryClient.invalidateQueries({ queryKey: trpc.logs.settings.queryKey() }),
    }),
  );
  if (!settings.data) return null;
  const s = settings.data;
  const locked = !s.canManage || update.isPending;
  return (
    <Card
      title="Log settings"
      description={s.canManage ? 'What your organization keeps, and for how long.' : 'What your organization keeps, and for how long. Owners change these.'}
    >
      <div className="space-y-4 text-sm">
        <label className="flex items-start gap-3">
          <input
            type="checkbox"
            className="mt-0.5 size-4 rounded border-zinc-300 text-indigo-600"
            checked={s.logContent}
            disabled={locked}
            onChange={(e) => update.mutate({ logContent: e.target.checked })}
          />
          <span>
            <span className="font-medium text-zinc-900">Keep the text of requests and answers</span>
            <span className="block text-zinc-600">
              Prompts, transcripts and answers, cut at 16,384 characters, kept with each row. Off: only timings, status, usage and cost. Audio is never stored.
            </span>
          </span>
        </label>
        <SelectField
          label="Keep logs for"
          className="max-w-xs"
          value={s.logRetentionDays ?? ''}
          disabled={locked}
          onChange={(e) => update.mutate({ logRetentionDays: e.target.value ? Number(e.target.value) : null })}
          hint={`This gateway keeps logs ${s.gatewayRetentionDays} days at most.`}
        >
          <option value="">{s.gatewayRetentionDays} days (the gateway&apos;s retention)</option>
          {[1, 3, 7, 14]
            .filter((d) => d < s.gatewayRetentionDays)
            .map((d) => (
              <option key={d} value={d}>
                {d} {d === 1 ? 'day' : 'days'}
              </option>
            ))}
        </SelectField>
        {update.isError && (
          <p role="alert" className="text-red-700">
            {errorMessage(update.error)}
          </p>
        )}
      </div>
    </Card>
  );
}
