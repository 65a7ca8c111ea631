'use client';
// One request or session: what it asked, who served it, how it ended, where its time went and
// what it cost. A session shows each turn as a waterfall (speech, end of turn, the LLM's first
// token, the first audio, the first audible sample, barge-ins and failovers) on one time scale.
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { CopyButton } from '@/app/_components/copy-button';
import { LoadingBlock } from '@/app/_components/spinner';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatMs, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { statusTone } from '../logs-view';

type Detail = RouterOutputs['logs']['get'];
type Turn = Detail['turns'][number];

const isNotFound = (error: unknown) => (error as { data?: { code?: string } } | null)?.data?.code === 'NOT_FOUND';

export function LogDetail({ id }: { id: string }) {
  const trpc = useTRPC();
  const log = useQuery({ ...trpc.logs.get.queryOptions({ id }), retry: (n, e) => !isNotFound(e) && n < 2 });
  return (
    <>
      <p className="mb-2 text-sm">
        <Link href="/logs" className="text-indigo-700 hover:underline">
          ← Logs
        </Link>
      </p>
      {log.isPending ? (
        <LoadingBlock label="Loading the request" lines={6} />
      ) : log.isError ? (
        isNotFound(log.error) ? (
          <Alert tone="warning" title="No such request">
            It is not in your organization&apos;s logs: it may have been made with another organization&apos;s key, or pruned.
          </Alert>
        ) : (
          <Alert title="Could not load the request" onRetry={() => void log.refetch()}>
            {errorMessage(log.error)}
          </Alert>
        )
      ) : (
        <Detail d={log.data} />
      )}
    </>
  );
}

function Field({ label, children, testId }: { label: string; children: React.ReactNode; testId?: string }) {
  return (
    <div className="min-w-0">
      <dt className="text-xs text-zinc-500">{label}</dt>
      <dd className="break-words text-zinc-900" data-testid={testId}>
        {children}
      </dd>
    </div>
  );
}

function Detail({ d }: { d: Detail }) {
  const session = d.kind === 'session';
  return (
    <>
      <PageHeader title={session ? 'Session' : 'Request'} description={<span className="font-mono">{d.request_id}</span>}>
        <CopyButton value={d.request_id} label="Copy request id" />
      </PageHeader>
      <div className="space-y-6">
        <Card title="Summary">
          <dl className="grid grid-cols-2 gap-x-6 gap-y-3 text-sm sm:grid-cols-4">
            <Field label="Status" testId="log-status">
              <span className="flex flex-wrap items-center gap-1">
                <Badge tone={statusTone(d.status)}>{d.status}</Badge>
                {d.error_code && <span className="font-mono text-xs">{d.error_code}</span>}
              </span>
            </Field>
            <Field label="Route">
              <span className="font-mono text-xs">
                {session ? 'WS ' : `${d.method} `}
                {d.route}
              </span>
            </Field>
            <Field label="Model">
              <span className="font-mono text-xs">{d.model ?? '—'}</span>
            </Field>
            <Field label="Key">{d.key.name || d.key.id || '—'}</Field>
            <Field label="Arrived">{new Date(d.created_at).toLocaleString('en')}</Field>
            <Field label="Client">{d.user_agent ?? '—'}</Field>
            <Field label="Cost">
              <span className="font-mono">{usd(d.cost_usd)}</span>
            </Field>
            <Field label="Usage">{usage(d)}</Field>
            <Field label="Served by">
              <span className="font-mono text-xs">{d.served_by ?? '—'}</span>
            </Field>
            <Field label="Failover">{d.failover_reason ?? '—'}</Field>
            <Field label="Trace id">{d.trace_id ? <span className="font-mono text-xs">{d.trace_id}</span> : '— (tracing off)'}</Field>
          </dl>
        </Card>
        <Card title="Timings" description="From the request's arrival. “—”: not measured for this request.">
          <Timings d={d} />
        </Card>
        {d.upstreams.length > 0 && (
          <Card title="Upstreams tried" description="In order; the last that answered served the request.">
            <ol className="list-decimal space-y-1 pl-5 text-sm">
              {d.upstreams.map((u, i) => (
                <li key={i}>
                  <span className="font-mono text-xs">{u.upstream_id}</span> — {u.outcome}
                  {u.ms !== null && ` after ${formatMs(u.ms)}`}
                </li>
              ))}
            </ol>
          </Card>
        )}
        {session && (
          <Card title="Turns" description="Each turn from the moment the user began speaking, on one scale.">
            {d.turns.length === 0 ? (
              <EmptyState title="No turns recorded">This session recorded no conversation turns.</EmptyState>
            ) : (
              <Waterfall turns={d.turns} />
            )}
          </Card>
        )}
        {d.content && (
          <Card title="Content" description="Kept because your organization keeps the text of requests.">
            {d.content.request !== null && <ContentBlock label="Request" text={d.content.request} />}
            {d.content.response !== null && <ContentBlock label="Answer" text={d.content.response} />}
          </Card>
        )}
      </div>
    </>
  );
}

function usage(d: Detail): string {
  const u = d.usage;
  const parts: string[] = [];
  if (u.input_tokens || u.output_tokens) parts.push(`${u.input_tokens.toLocaleString('en')} in / ${u.output_tokens.toLocaleString('en')} out tokens`);
  if (u.characters) parts.push(`${u.characters.toLocaleString('en')} characters`);
  if (u.audio_ms) parts.push(`${(u.audio_ms / 1000).toLocaleString('en', { maximumFractionDigits: 1 })} s of audio`);
  return parts.join(', ') || '—';
}

function ContentBlock({ label, text }: { label: string; text: string }) {
  return (
    <div className="mt-2 first:mt-0">
      <p className="text-xs font-semibold text-zinc-500">{label}</p>
      <pre className="mt-1 max-h-72 overflow-auto rounded-md bg-zinc-50 p-3 text-xs break-words whitespace-pre-wrap text-zinc-800">{text}</pre>
    </div>
  );
}

function Timings({ d }: { d: Detail }) {
  const t = d.timings;
  const marks = [
    { label: 'First byte', ms: d.kind === 'session' ? null : t.ttfb_ms },
    { label: 'First audio', ms: t.first_audio_ms },
    { label: 'First audible sample', ms: t.first_audible_ms },
    { label: d.kind === 'session' ? 'Length' : 'Total', ms: t.total_ms },
  ];
  const max = Math.max(t.total_ms, ...marks.map((m) => m.ms ?? 0), 1);
  return (
    <dl className="space-y-2 text-sm" data-testid="log-timings">
      {marks.map((m) => (
        <div key={m.label} className="grid grid-cols-[10rem_1fr_5rem] items-center gap-3">
          <dt className="text-zinc-600">{m.label}</dt>
          <div className="h-2 rounded-full bg-zinc-100" aria-hidden="true">
            {m.ms !== null && <div className="h-2 rounded-full bg-indigo-500" style={{ width: `${Math.max((m.ms / max) * 100, 0.5)}%` }} />}
          </div>
          <dd className="text-right font-mono text-xs">{formatMs(m.ms)}</dd>
        </div>
      ))}
    </dl>
  );
}

/** The legs of a turn, each from the previous mark to its own (a missing mark: no bar, "—" in the table). */
const LEGS = [
  { key: 'speech', label: 'Speech', from: () => 0, to: (t: Turn) => t.speech_end_ms, color: 'bg-sky-400' },
  { key: 'endpoint', label: 'End of turn', from: (t: Turn) => t.speech_end_ms, to: (t: Turn) => t.end_of_turn_ms, color: 'bg-zinc-400' },
  { key: 'llm', label: 'LLM first token', from: (t: Turn) => t.end_of_turn_ms, to: (t: Turn) => t.llm_first_token_ms, color: 'bg-indigo-500' },
  {
    key: 'tts',
    label: 'TTS first audio',
    from: (t: Turn) => t.llm_first_token_ms ?? t.end_of_turn_ms,
    to: (t: Turn) => t.tts_first_audio_ms,
    color: 'bg-emerald-500',
  },
  { key: 'audible', label: 'First audible sample', from: (t: Turn) => t.tts_first_audio_ms, to: (t: Turn) => t.first_audible_ms, color: 'bg-teal-300' },
] as const;

function Waterfall({ turns }: { turns: Turn[] }) {
  const end = (t: Turn) =>
    Math.max(t.speech_end_ms ?? 0, t.end_of_turn_ms ?? 0, t.llm_first_token_ms ?? 0, t.tts_first_audio_ms ?? 0, t.first_audible_ms ?? 0, t.barge_in_ms ?? 0);
  const scale = Math.max(...turns.map(end), 1);
  const pct = (ms: number) => `${(ms / scale) * 100}%`;
  return (
    <div className="space-y-5" data-testid="turn-waterfall">
      <ul className="flex flex-wrap gap-x-4 gap-y-1 text-xs text-zinc-700" aria-label="Legend">
        {LEGS.map((l) => (
          <li key={l.key} className="flex items-center gap-1.5">
            <span aria-hidden="true" className={`inline-block size-3 rounded-sm ${l.color}`} />
            {l.label}
          </li>
        ))}
        <li className="flex items-center gap-1.5">
          <span aria-hidden="true" className="inline-block h-3 w-0.5 bg-red-600" />
          Barge-in
        </li>
      </ul>
      {turns.map((t) => (
        <div key={t.turn_index} data-testid="turn-row">
          <div className="flex flex-wrap items-baseline justify-between gap-2 text-sm">
            <span className="font-medium text-zinc-900">
              Turn {t.turn_index + 1} <span className="font-normal text-zinc-500">at {formatMs(t.start_ms)}</span>
            </span>
            <span className="flex gap-2">
              {t.barge_in_ms !== null && <Badge tone="red">Barge-in at {formatMs(t.barge_in_ms)}</Badge>}
              {t.failover_reason && <Badge tone="amber">Failover: {t.failover_reason}</Badge>}
            </span>
          </div>
          <div className="relative mt-1 h-5 rounded bg-zinc-50" role="img" aria-label={turnSummary(t)}>
            {LEGS.map((l) => {
              const from = l.from(t);
              const to = l.to(t);
              if (from === null || to === null || to < from) return null;
              return (
                <div key={l.key} className={`absolute top-0.5 h-4 rounded-sm ${l.color}`} style={{ left: pct(from), width: `max(2px, ${pct(to - from)})` }} />
              );
            })}
            {t.barge_in_ms !== null && <div className="absolute top-0 h-5 w-0.5 bg-red-600" style={{ left: pct(t.barge_in_ms) }} />}
          </div>
          <dl className="mt-1 grid grid-cols-2 gap-x-4 text-xs text-zinc-600 sm:grid-cols-5">
            {[
              ['Speech end', t.speech_end_ms],
              ['End of turn', t.end_of_turn_ms],
              ['LLM first token', t.llm_first_token_ms],
              ['TTS first audio', t.tts_first_audio_ms],
              ['First audible', t.first_audible_ms],
            ].map(([label, ms]) => (
              <div key={label as string} className="flex justify-between gap-2">
                <dt>{label}</dt>
                <dd className="font-mono">{formatMs(ms as number | null)}</dd>
              </div>
            ))}
          </dl>
          {(t.user_text || t.assistant_text) && (
            <p className="mt-1 text-xs text-zinc-700">
              {t.user_text && <span>“{t.user_text}”</span>}
              {t.assistant_text && <span className="text-zinc-500"> → “{t.assistant_text}”</span>}
            </p>
          )}
        </div>
      ))}
    </div>
  );
}

function turnSummary(t: Turn): string {
  const parts = [
    `speech ended ${formatMs(t.speech_end_ms)}`,
    `end of turn ${formatMs(t.end_of_turn_ms)}`,
    `LLM first token ${formatMs(t.llm_first_token_ms)}`,
    `TTS first audio ${formatMs(t.tts_first_audio_ms)}`,
    `first audible ${formatMs(t.first_audible_ms)}`,
  ];
  if (t.barge_in_ms !== null) parts.push(`barge-in ${formatMs(t.barge_in_ms)}`);
  return `Turn ${t.turn_index + 1}: ${parts.join(', ')} after the user began speaking`;
}
