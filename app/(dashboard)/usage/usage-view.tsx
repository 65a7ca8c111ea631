'use client';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, plural, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

type Summary = RouterOutputs['usage']['summary'];

const WINDOWS = [7, 30, 90] as const;
const PALETTE = ['#4f46e5', '#059669', '#d97706', '#dc2626', '#0891b2', '#7c3aed', '#db2777', '#65a30d'];
/** Display only: charts need numbers; the figures shown as text stay the exact strings. */
const micros = (amountUsd: string) => Math.round(Number(amountUsd) * 1e6);

export function UsageView() {
  const trpc = useTRPC();
  const [days, setDays] = useState<number>(30);
  const summary = useQuery({ ...trpc.usage.summary.queryOptions({ days }), placeholderData: keepPreviousData });

  return (
    <>
      <PageHeader title="Usage" description="What your organization spent, per day, per model and per key. Days are UTC.">
        <SelectField label="Period" value={days} onChange={(e) => setDays(Number(e.target.value))} className="w-40">
          {WINDOWS.map((d) => (
            <option key={d} value={d}>
              Last {d} days
            </option>
          ))}
        </SelectField>
      </PageHeader>
      {summary.isPending ? (
        <LoadingBlock label="Loading usage" lines={6} />
      ) : summary.isError ? (
        <Alert title="Could not load usage" onRetry={() => void summary.refetch()}>
          {errorMessage(summary.error)}
        </Alert>
      ) : (
        <div className="space-y-6" aria-busy={summary.isFetching || undefined}>
          <Card title="Total">
            <p className="font-mono text-3xl font-semibold tracking-tight" data-testid="usage-total">
              {usd(summary.data.totalUsd)}
            </p>
            <p className="mt-1 text-sm text-zinc-600">
              {plural(summary.data.totalRequests, 'metered request')} in the last {summary.data.days.length} days.
            </p>
          </Card>
          {summary.data.totalRequests === 0 ? (
            <EmptyState title="No usage in this period">Metered requests (chat, speech, transcription) appear here once they are made.</EmptyState>
          ) : (
            <>
              <DailyChart summary={summary.data} />
              <ByModel summary={summary.data} />
              <ByKey summary={summary.data} />
            </>
          )}
        </div>
      )}
    </>
  );
}

function DailyChart({ summary }: { summary: Summary }) {
  const models = summary.models.map((m) => m.modelId);
  const color = (modelId: string) => PALETTE[models.indexOf(modelId) % PALETTE.length]!;
  const max = Math.max(...summary.days.map((d) => micros(d.costUsd)), 1);
  const width = summary.days.length * 10;
  const height = 100;
  const busiest = summary.days.reduce((a, b) => (micros(b.costUsd) > micros(a.costUsd) ? b : a));
  const first = summary.days[0]!.day;
  const last = summary.days.at(-1)!.day;
  return (
    <Card title="Spend per day" description="Stacked by model.">
      <figure>
        <svg
          viewBox={`0 0 ${width} ${height}`}
          preserveAspectRatio="none"
          className="h-40 w-full"
          role="img"
          aria-label={`Spend per day from ${first} to ${last}; the busiest day was ${busiest.day} with ${usd(busiest.costUsd)}. The same figures are in the table below.`}
          data-testid="usage-chart"
        >
          <line x1="0" y1={height} x2={width} y2={height} stroke="#e4e4e7" strokeWidth="0.5" />
          {summary.days.map((d, i) => {
            let y = height;
            return (
              <g key={d.day}>
                {d.byModel.map((m) => {
                  const h = (micros(m.costUsd) / max) * (height - 4);
                  y -= h;
                  return (
                    <rect key={m.modelId} x={i * 10 + 1} y={y} width={8} height={Math.max(h, 0.5)} fill={color(m.modelId)} data-testid="usage-bar">
                      <title>{`${d.day} · ${m.modelId}: ${usd(m.costUsd)} (${plural(m.requests, 'request')})`}</title>
                    </rect>
                  );
                })}
              </g>
            );
          })}
        </svg>
        <figcaption className="mt-1 flex justify-between text-xs text-zinc-500">
          <span>{first}</span>
          <span>max {usd((max / 1e6).toFixed(6))}/day</span>
          <span>{last}</span>
        </figcaption>
      </figure>
      <ul className="mt-3 flex flex-wrap gap-x-4 gap-y-1 text-xs text-zinc-700" aria-label="Legend">
        {models.map((m) => (
          <li key={m} className="flex items-center gap-1.5">
            <span aria-hidden="true" className="inline-block size-3 rounded-sm" style={{ background: color(m) }} />
            <span className="font-mono">{m}</span>
          </li>
        ))}
      </ul>
      <details className="mt-3 text-sm">
        <summary className="cursor-pointer font-medium text-zinc-700">Show as a table</summary>
        <div className="mt-2 max-h-72 overflow-auto">
          <table className="w-full text-left text-sm">
            <caption className="sr-only">Spend per day</caption>
            <thead className="text-xs text-zinc-500 uppercase">
              <tr>
                <th scope="col" className="py-1 pr-4">Day</th>
                <th scope="col" className="py-1 pr-4 text-right">Requests</th>
                <th scope="col" className="py-1 text-right">Spend</th>
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100">
              {summary.days
                .filter((d) => d.requests > 0)
                .map((d) => (
                  <tr key={d.day}>
                    <td className="py-1 pr-4 font-mono">{d.day}</td>
                    <td className="py-1 pr-4 text-right">{d.requests}</td>
                    <td className="py-1 text-right font-mono">{usd(d.costUsd)}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
      </details>
    </Card>
  );
}

function units(m: Summary['models'][number]): string {
  const parts: string[] = [];
  if (m.inputTokens || m.outputTokens) parts.push(`${m.inputTokens.toLocaleString('en')} in / ${m.outputTokens.toLocaleString('en')} out tokens`);
  if (m.characters) parts.push(`${m.characters.toLocaleString('en')} characters`);
  if (m.audioMillis) parts.push(`${(m.audioMillis / 1000).toLocaleString('en', { maximumFractionDigits: 1 })} s of audio`);
  return parts.join(', ') || '—';
}

function ShareBar({ share }: { share: number }) {
  return (
    <div className="mt-1 h-1.5 w-full overflow-hidden rounded-full bg-zinc-100" aria-hidden="true">
      <div className="h-full rounded-full bg-indigo-500" style={{ width: `${Math.max(share * 100, 1)}%` }} />
    </div>
  );
}

function ByModel({ summary }: { summary: Summary }) {
  const total = Math.max(micros(summary.totalUsd), 1);
  return (
    <Card title="Per model">
      <ul className="divide-y divide-zinc-100" aria-label="Spend per model">
        {summary.models.map((m) => (
          <li key={m.modelId} className="py-2.5" data-testid="usage-model-row">
            <div className="flex flex-wrap items-baseline justify-between gap-2">
              <span className="flex items-center gap-2">
                <span className="font-mono text-sm font-medium">{m.modelId}</span>
                <Badge tone="gray">{m.modality.toUpperCase()}</Badge>
              </span>
              <span className="font-mono text-sm">{usd(m.costUsd)}</span>
            </div>
            <ShareBar share={micros(m.costUsd) / total} />
            <p className="mt-1 text-xs text-zinc-500">
              {plural(m.requests, 'request')} · {units(m)}
            </p>
          </li>
        ))}
      </ul>
    </Card>
  );
}

function ByKey({ summary }: { summary: Summary }) {
  const total = Math.max(micros(summary.totalUsd), 1);
  return (
    <Card title="Per key">
      <ul className="divide-y divide-zinc-100" aria-label="Spend per key">
        {summary.keys.map((k) => (
          <li key={k.keyId ?? 'none'} className="py-2.5" data-testid="usage-key-row">
            <div className="flex flex-wrap items-baseline justify-between gap-2">
              <span className="flex min-w-0 items-center gap-2">
                <span className="truncate text-sm font-medium">{k.name || '(unnamed)'}</span>
                {k.prefix && <span className="font-mono text-xs text-zinc-500">{k.prefix}…</span>}
                {k.status === 'revoked' && <Badge tone="gray">Revoked</Badge>}
              </span>
              <span className="font-mono text-sm">{usd(k.costUsd)}</span>
            </div>
            <ShareBar share={micros(k.costUsd) / total} />
            <p className="mt-1 text-xs text-zinc-500">{plural(k.requests, 'request')}</p>
          </li>
        ))}
      </ul>
    </Card>
  );
}
