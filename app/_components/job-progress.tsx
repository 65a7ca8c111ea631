'use client';
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import type { JobRecord } from '@/app/_lib/api-types';
import { errorMessage } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { Alert } from './alert';
import { ProgressBar } from './progress-bar';

const STATUS_TEXT: Record<JobRecord['status'], string> = {
  queued: 'Queued: waiting for a worker…',
  running: 'Running…',
  succeeded: 'Done.',
  failed: 'Failed.',
};

const OPERATION_TEXT: Record<JobRecord['operation'], string> = {
  clone: 'Cloning the voice',
  localize: 'Localizing the voice',
  prepare_profile: 'Preparing the voice',
};

const ended = (job: JobRecord | undefined) => job?.status === 'succeeded' || job?.status === 'failed';

/** Follows a voice job (voices.job, polled every second) until it ends; calls onDone once. */
export function JobProgress({ jobId, onDone }: { jobId: string; onDone?: (job: JobRecord) => void }) {
  const trpc = useTRPC();
  const job = useQuery({ ...trpc.voices.job.queryOptions({ id: jobId }), refetchInterval: (query) => (ended(query.state.data) ? false : 1000), retry: 2 });
  const reported = useRef<string | null>(null);
  const status = job.data?.status;
  useEffect(() => {
    if (job.data && ended(job.data) && reported.current !== jobId) {
      reported.current = jobId;
      onDone?.(job.data);
    }
  }, [job.data, status, jobId, onDone]);

  if (job.isError)
    return (
      <Alert title="Could not follow the job" onRetry={() => void job.refetch()}>
        {errorMessage(job.error)}
      </Alert>
    );
  const data = job.data;
  const label = data ? `${OPERATION_TEXT[data.operation]}${data.model_id ? ` for ${data.model_id}` : ''}` : 'Starting the job';
  return (
    <div className="space-y-2 rounded-md border border-zinc-200 bg-zinc-50 p-3" data-testid="job-progress" data-status={status ?? 'loading'}>
      <ProgressBar
        label={label}
        value={status === 'succeeded' || status === 'failed' ? 1 : status === 'running' ? null : 0.05}
        tone={status === 'failed' ? 'red' : status === 'succeeded' ? 'green' : 'indigo'}
      />
      <p role="status" aria-live="polite" className="text-sm text-zinc-700">
        {data ? STATUS_TEXT[data.status] : 'Loading…'}
        {data?.status === 'failed' && data.error ? ` Reason: ${data.error}.` : ''}
        <span className="ml-1 font-mono text-xs text-zinc-500">{jobId}</span>
      </p>
    </div>
  );
}
