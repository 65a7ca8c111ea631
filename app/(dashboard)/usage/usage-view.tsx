'use client';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useEffect, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatMs, formatRate, plural, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

type Summary = RouterOutputs['usage']['summary'];
type Stats = RouterOutputs['logs']['stats'];
/** The figures both tables show. */
type RequestFigures = Omit<Stats['byModel'][number], 'modelId'>;

const WINDOWS = [7, 30, 90] as const;
const PALETTE = ['#4f46e5', '#059669', '#d97706', '#dc2626', '#0891b2', '#7c3aed', '#db2777', '#65a30d'];
/** Display only: charts need numbers; the figures shown as text stay the exact strings. */
const micros = (amountUsd: string) => Math.round(Number(amountUsd) * 1e6);

export function UsageView() {
  const trpc = useTRPC();
  const [days, setDays] = useState<number>(30);
  const summary = useQuery({ ...trpc.usage.summary.queryOptions({ days }), placeholderData: keepPreviousData });
  const stats = useQuery({ ...trpc.logs.stats.queryOptions({ days }), placeholderData: keepPreviousData });

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
          {stats.data && (stats.data.byModel.length > 0 || stats.data.byKey.length > 0) && <RequestStats stats={stats.data} days={summary.data.days.length} />}
        </div>
      )}
    </>
  );
}

function DailyChart({ summary }: { summary: Summary }) {
  const models = summary.models.map((m) => m.modelId);
  const color = colorOf(models);
  return (
    <Card title="Spend per day" description="Stacked by model. Point at a day (or focus the chart and use the arrow keys) for its figures.">
      <SpendChart summary={summary} height={220} />
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
                <th scope="col" className="py-1 pr-4">
                  Day
                </th>
                <th scope="col" className="py-1 pr-4 text-right">
                  Requests
                </th>
                <th scope="col" className="py-1 text-right">
                  Spend
                </th>
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

const colorOf = (models: string[]) => (modelId: string) => PALETTE[Math.max(models.indexOf(modelId), 0) % PALETTE.length]!;

/** 1, 2 or 5 times a power of ten: a step for about `count` gridlines up to `max`. */
function niceStep(max: number, count: number): number {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = [1, 2, 5, 10].find((m) => m * power >= raw)!;
  return unit * power;
}

/** A tick in micro-USD as dollars with as many decimals as the step needs ($0.0004, $1.5, $20). */
function tickLabel(micros: number, stepMicros: number): string {
  if (micros === 0) return '$0';
  const decimals = Math.min(6, Math.max(0, 6 - Math.floor(Math.log10(stepMicros))));
  return `$${(micros / 1e6).toFixed(decimals)}`;
}

const dayLabel = new Intl.DateTimeFormat('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });
const dayLong = new Intl.DateTimeFormat('en', { weekday: 'short', month: 'short', day: 'numeric', year: 'numeric', timeZone: 'UTC' });
const asDate = (day: string) => new Date(`${day}T00:00:00Z`);

/** The width of an element, following it as it resizes (the chart draws in real pixels, so its text stays legible on a phone). */
function useWidth<T extends HTMLElement>(): [React.RefObject<T | null>, number] {
  const ref = useRef<T>(null);
  const [width, setWidth] = useState(0);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const observer = new ResizeObserver(([entry]) => setWidth(Math.floor(entry!.contentRect.width)));
    observer.observe(el);
    setWidth(Math.floor(el.getBoundingClientRect().width));
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}

/**
 * Spend per UTC day, bars stacked by model, with a y-axis in dollars and its gridlines, dates
 * along the bottom, and a tooltip that follows the pointer at once (the browser's own title
 * tooltip took a second to show). The tooltip also follows the arrow keys.
 */
export function SpendChart({ summary, height }: { summary: Summary; height: number }) {
  const models = summary.models.map((m) => m.modelId);
  const color = colorOf(models);
  const [box, width] = useWidth<HTMLDivElement>();
  const [active, setActive] = useState<number | null>(null);
  const days = summary.days;
  const max = Math.max(...days.map((d) => micros(d.costUsd)), 1);
  const step = Math.max(1, niceStep(max, 4));
  const top = Math.ceil(max / step) * step;
  const ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
  const left = Math.max(...ticks.map((t) => tickLabel(t, step).length)) * 6.5 + 10;
  const bottom = 20;
  const plotW = Math.max(width - left - 4, 10);
  const plotH = height - bottom - 8;
  const slot = plotW / days.length;
  const barW = Math.max(Math.min(slot * 0.7, 28), 1);
  const y = (v: number) => 8 + plotH - (v / top) * plotH;
  // About one date label per 70 px, always the first and last day.
  const every = Math.max(1, Math.ceil(70 / slot));
  const labelled = (i: number) => i === days.length - 1 || (i % every === 0 && days.length - 1 - i >= every);
  const busiest = days.reduce((a, b) => (micros(b.costUsd) > micros(a.costUsd) ? b : a));
  const shown = active === null ? null : days[active];
  const pick = (clientX: number, rect: DOMRect) => setActive(Math.min(days.length - 1, Math.max(0, Math.floor((clientX - rect.left - left) / slot))));

  return (
    <figure className="mt-2">
      <div ref={box} className="relative">
        {width > 0 && (
          <svg
            width={width}
            height={height}
            role="img"
            tabIndex={0}
            aria-label={`Spend per day from ${days[0]!.day} to ${days.at(-1)!.day}; the busiest day was ${busiest.day} with ${usd(busiest.costUsd)}. The same figures are in the table.`}
            data-testid="usage-chart"
            className="block touch-none focus-visible:outline-2 focus-visible:outline-indigo-600"
            onPointerMove={(e) => pick(e.clientX, e.currentTarget.getBoundingClientRect())}
            onPointerDown={(e) => pick(e.clientX, e.currentTarget.getBoundingClientRect())}
            onPointerLeave={() => setActive(null)}
            onBlur={() => setActive(null)}
            onKeyDown={(e) => {
              if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
              e.preventDefault();
              setActive((a) => Math.min(days.length - 1, Math.max(0, (a ?? days.length) + (e.key === 'ArrowLeft' ? -1 : 1))));
            }}
          >
            {ticks.map((t) => (
              <g key={t} data-testid="usage-y-tick">
                <line x1={left} x2={width} y1={y(t)} y2={y(t)} stroke={t === 0 ? '#a1a1aa' : '#e4e4e7'} strokeWidth={1} shapeRendering="crispEdges" />
                <text x={left - 6} y={y(t)} dy="0.32em" textAnchor="end" className="fill-zinc-500 text-[11px]">
                  {tickLabel(t, step)}
                </text>
              </g>
            ))}
            {days.map((d, i) => {
              let stacked = 0;
              const x = left + i * slot + (slot - barW) / 2;
              return (
                <g key={d.day}>
                  {active === i && <rect x={left + i * slot} y={8} width={slot} height={plotH} className="fill-indigo-50" />}
                  {d.byModel.map((m) => {
                    const from = stacked;
                    stacked += micros(m.costUsd);
                    const h = Math.max(y(from) - y(stacked), 1);
                    return <rect key={m.modelId} x={x} y={y(stacked)} width={barW} height={h} fill={color(m.modelId)} data-testid="usage-bar" />;
                  })}
                  {labelled(i) && (
                    <text
                      x={left + i * slot + slot / 2}
                      y={height - 4}
                      textAnchor={i === days.length - 1 ? 'end' : i === 0 ? 'start' : 'middle'}
                      className="fill-zinc-500 text-[11px]"
                      data-testid="usage-x-label"
                    >
                      {dayLabel.format(asDate(d.day))}
                    </text>
                  )}
                </g>
              );
            })}
          </svg>
        )}
        {shown && active !== null && (
          <div
            role="status"
            data-testid="usage-tooltip"
            className="pointer-events-none absolute top-0 z-10 w-56 rounded-md border border-zinc-200 bg-white px-3 py-2 text-xs text-zinc-700 shadow-lg"
            style={{ left: Math.min(Math.max(left + active * slot + slot / 2 - 112, 0), Math.max(width - 224, 0)) }}
          >
            <p className="font-semibold text-zinc-900">{dayLong.format(asDate(shown.day))}</p>
            <p className="mt-0.5">
              <span className="font-mono font-semibold">{usd(shown.costUsd)}</span> · {plural(shown.requests, 'request')}
            </p>
            {shown.byModel.length > 0 && (
              <ul className="mt-1 space-y-0.5">
                {shown.byModel.map((m) => (
                  <li key={m.modelId} className="flex items-center justify-between gap-2">
                    <span className="flex min-w-0 items-center gap-1.5">
                      <span aria-hidden="true" className="inline-block size-2.5 shrink-0 rounded-sm" style={{ background: color(m.modelId) }} />
                      <span className="truncate font-mono">{m.modelId}</span>
                    </span>
                    <span className="font-mono">{usd(m.costUsd)}</span>
                  </li>
                ))}
              </ul>
            )}
          </div>
        )}
      </div>
    </figure>
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
                <LogsLink query={{ model: m.modelId }} label={`Logs of ${m.modelId}`} />
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
                {k.keyId && <LogsLink query={{ key: k.keyId }} label={`Logs of the key ${k.name || k.prefix || k.keyId}`} />}
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

/** A link to the Logs page filtered as `query` says (the filters are in its URL). */
function LogsLink({ query, label }: { query: Record<string, string>; label: string }) {
  return (
    <Link href={`/logs?${new URLSearchParams(query)}`} className="text-xs text-indigo-700 hover:underline" aria-label={label}>
      Logs
    </Link>
  );
}

/** Requests (every one logged, failures included), latency percentiles and error rates per model and key, from the request logs. */
function RequestStats({ stats, days }: { stats: Stats; days: number }) {
  const head = ['Requests', 'Errors', 'p50', 'p95', 'p99'];
  const figures = (s: RequestFigures) => [
    s.requests.toLocaleString('en'),
    s.errors === 0 ? '0' : `${s.errors.toLocaleString('en')} (${formatRate(s.errorRate)})`,
    formatMs(s.p50Ms),
    formatMs(s.p95Ms),
    formatMs(s.p99Ms),
  ];
  const table = (caption: string, first: string, rows: { id: string; name: React.ReactNode; link: Record<string, string> | null; s: RequestFigures }[]) => (
    <div className="overflow-x-auto">
      <table className="w-full min-w-[36rem] text-left text-sm" data-testid={`request-stats-${first.toLowerCase()}`}>
        <caption className="sr-only">{caption}</caption>
        <thead className="text-xs text-zinc-500 uppercase">
          <tr>
            <th scope="col" className="py-1 pr-4">
              {first}
            </th>
            {head.map((h) => (
              <th key={h} scope="col" className="py-1 pr-4 text-right last:pr-0">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-100">
          {rows.map((r) => (
            <tr key={r.id}>
              <td className="py-1.5 pr-4">
                {r.link ? (
                  <Link href={`/logs?${new URLSearchParams(r.link)}`} className="text-indigo-700 hover:underline">
                    {r.name}
                  </Link>
                ) : (
                  r.name
                )}
              </td>
              {figures(r.s).map((v, i) => (
                <td key={i} className="py-1.5 pr-4 text-right font-mono text-xs last:pr-0">
                  {v}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
  return (
    <Card
      title="Requests, latency and errors"
      description={`Every logged request of the last ${days} days, failures included. Latency: to the answer's first byte (sessions count as requests, without a latency). “—”: nothing measured.`}
    >
      <div className="space-y-6">
        {table(
          'Requests per model',
          'Model',
          stats.byModel.map((s) => ({
            id: s.modelId || 'none',
            name: <span className="font-mono text-xs">{s.modelId || '(no model)'}</span>,
            link: s.modelId ? { model: s.modelId } : null,
            s,
          })),
        )}
        {table(
          'Requests per key',
          'Key',
          stats.byKey.map((s) => ({ id: s.keyId ?? 'none', name: s.name || '(unnamed)', link: s.keyId ? { key: s.keyId } : null, s })),
        )}
      </div>
    </Card>
  );
}
