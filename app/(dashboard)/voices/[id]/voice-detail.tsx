'use client';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import Link from 'next/link';
import { useRouter } from 'next/navigation';
import { useCallback, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { SelectField, TextAreaField } from '@/app/_components/fields';
import { JobProgress } from '@/app/_components/job-progress';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { JobRecord, Voice } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime, humanError } from '@/app/_lib/format';
import { GATEWAY_PROXY, gatewayJson } from '@/app/_lib/gateway';
import { useTRPC } from '@/app/_lib/trpc';
// POST /voices/{id}/profiles answers with what the service prepared, as it is.
import type { PreparedVoiceProfile } from '@/server/services/voices/prepare-voice-profile';
import { KIND_LABELS, sampleModelOf } from '../voices-browser';
import { PlaySampleButton, VoiceSamplesProvider } from '../voice-samples';

const isNotFound = (error: unknown) => (error as { data?: { code?: string } } | null)?.data?.code === 'NOT_FOUND';

export function VoiceDetail({ id }: { id: string }) {
  const trpc = useTRPC();
  const voice = useQuery(trpc.voices.get.queryOptions({ id }));

  if (voice.isPending) return <LoadingBlock label="Loading the voice" lines={6} />;
  if (voice.isError) {
    return (
      <>
        <BackLink />
        {isNotFound(voice.error) ? (
          <EmptyState title="Voice not found">It does not exist, was deleted, or belongs to another organization.</EmptyState>
        ) : (
          <Alert title="Could not load the voice" onRetry={() => void voice.refetch()}>
            {errorMessage(voice.error)}
          </Alert>
        )}
      </>
    );
  }
  const v = voice.data;
  return (
    <>
      <BackLink />
      <PageHeader title={v.name} description={v.description || undefined}>
        <div className="flex flex-wrap gap-1">
          {v.is_owner ? <Badge tone="indigo">Yours</Badge> : <Badge tone="gray">Platform voice</Badge>}
          <Badge tone="gray">{KIND_LABELS[v.kind]}</Badge>
          {v.featured && <Badge tone="amber">Featured</Badge>}
        </div>
      </PageHeader>
      <VoiceSamplesProvider>
        <div className="space-y-6">
          <Details voice={v} />
          <Profiles voice={v} />
          {v.is_owner && <EditVoice voice={v} />}
          <Actions voice={v} />
        </div>
      </VoiceSamplesProvider>
    </>
  );
}

function BackLink() {
  return (
    <p className="mb-4 text-sm">
      <Link href="/voices" className="font-medium text-indigo-700 hover:underline">
        ← All voices
      </Link>
    </p>
  );
}

function Details({ voice: v }: { voice: Voice }) {
  const rows: Array<[string, React.ReactNode]> = [
    [
      'Id',
      <span key="id" className="font-mono break-all">
        {v.id}
      </span>,
    ],
    ['Kind', KIND_LABELS[v.kind]],
    ['Language', v.language],
    ['Gender', v.gender || '—'],
    ['Tags', v.tags.length ? v.tags.join(', ') : '—'],
    ['Model family', v.model_family || '—'],
    ['Created', formatDateTime(v.created_at)],
  ];
  if (v.parent_voice_id)
    rows.push([
      'Localized from',
      <Link key="p" className="text-indigo-700 underline" href={`/voices/${encodeURIComponent(v.parent_voice_id)}`}>
        {v.parent_voice_id}
      </Link>,
    ]);
  if (v.source_transcript) rows.push(['Transcript of the clip', v.source_transcript]);
  return (
    <Card title="Details">
      <dl className="grid gap-x-6 gap-y-3 text-sm sm:grid-cols-[10rem_minmax(0,1fr)]">
        {rows.map(([k, value]) => (
          <div key={k} className="contents">
            <dt className="font-medium text-zinc-500">{k}</dt>
            <dd className="min-w-0 text-zinc-900">{value}</dd>
          </div>
        ))}
      </dl>
      {v.is_owner && v.source_audio_blob_id && (
        <div className="mt-4">
          <p className="text-sm font-medium text-zinc-900" id="source-clip-label">
            Source recording
          </p>
          {/* metadata: the length shows before Play; the proxy answers the player's byte ranges, so it can seek. */}
          <audio
            controls
            preload="metadata"
            aria-labelledby="source-clip-label"
            data-testid="source-audio"
            className="mt-1 w-full"
            src={`${GATEWAY_PROXY}/blobs/${encodeURIComponent(v.source_audio_blob_id)}/content`}
          />
        </div>
      )}
    </Card>
  );
}

/** A profile's status as the job box words it while a job works on it ("Running…" in both places). */
function profileStatusLabel(status: string, jobStatus: JobRecord['status'] | undefined): string {
  if (status === 'ready' || status === 'failed' || !jobStatus) return status;
  return jobStatus === 'running' ? 'Running…' : 'Queued';
}

function Profiles({ voice: v }: { voice: Voice }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'tts' }));
  const jobs = useQuery({
    ...trpc.voices.jobs.queryOptions({ id: v.id }),
    refetchInterval: (q) => (q.state.data?.some((j) => j.status === 'queued' || j.status === 'running') ? 2000 : false),
  });
  const [jobId, setJobId] = useState<string | null>(null);
  // The job box's own query (the same cache entry JobProgress polls), so a row and the box never disagree.
  const followed = useQuery({ ...trpc.voices.job.queryOptions({ id: jobId ?? '' }), enabled: jobId !== null });
  const activeJobFor = (modelId: string) =>
    [followed.data, ...(jobs.data ?? [])].find((j) => j && j.model_id === modelId && (j.status === 'queued' || j.status === 'running'));
  const [message, setMessage] = useState<string | null>(null);
  const ready = new Set(v.profiles.filter((p) => p.status === 'ready').map((p) => p.model_id));
  const candidates = (models.data ?? []).filter((m) => !ready.has(m.id));
  const [picked, setPicked] = useState('');
  // Controlled, so the choice never points at a model that just became ready.
  const choice = candidates.some((m) => m.id === picked) ? picked : '';
  const refresh = useCallback(() => {
    void queryClient.invalidateQueries({ queryKey: trpc.voices.pathKey() });
  }, [queryClient, trpc]);
  const prepare = useMutation({
    mutationFn: (modelId: string) =>
      gatewayJson<PreparedVoiceProfile>(`voices/${encodeURIComponent(v.id)}/profiles`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model_id: modelId }),
      }),
    onSuccess: (res, modelId) => {
      if ('job_id' in res.body) {
        setJobId(res.body.job_id);
        setMessage(null);
      } else {
        setMessage(`The voice already has a ready profile for ${modelId}.`);
      }
      refresh();
    },
  });

  return (
    <Card title="Profiles" description="A voice can speak on a TTS model once it has a ready profile for that model.">
      {v.profiles.length === 0 ? (
        <EmptyState title="No profiles yet">Prepare one for a model below.</EmptyState>
      ) : (
        <div className="overflow-x-auto">
          <table className="w-full text-left text-sm">
            <caption className="sr-only">Profiles of this voice per TTS model</caption>
            <thead className="border-b border-zinc-200 text-xs tracking-wide text-zinc-500 uppercase">
              <tr>
                <th scope="col" className="py-2 pr-4 font-semibold">
                  Model
                </th>
                <th scope="col" className="py-2 pr-4 font-semibold">
                  Status
                </th>
                <th scope="col" className="hidden py-2 pr-4 font-semibold sm:table-cell">
                  Version
                </th>
                <th scope="col" className="hidden py-2 pr-4 font-semibold sm:table-cell">
                  Prepared
                </th>
                <th scope="col" className="hidden py-2 pr-4 font-semibold md:table-cell">
                  Expires
                </th>
                <th scope="col" className="py-2 font-semibold">
                  <span className="sr-only">Sample</span>
                </th>
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100">
              {v.profiles.map((p) => (
                <tr key={p.model_id} data-testid="profile-row">
                  <td className="py-2 pr-4 font-mono">{p.model_id}</td>
                  <td className="py-2 pr-4">
                    <Badge tone={p.status === 'ready' ? 'green' : p.status === 'failed' ? 'amber' : 'gray'}>
                      {profileStatusLabel(p.status, activeJobFor(p.model_id)?.status)}
                    </Badge>
                  </td>
                  <td className="hidden py-2 pr-4 sm:table-cell">{p.profile_version}</td>
                  <td className="hidden py-2 pr-4 whitespace-nowrap sm:table-cell">{formatDateTime(p.cached_at)}</td>
                  <td className="hidden py-2 pr-4 whitespace-nowrap md:table-cell">{formatDateTime(p.expires_at, 'Never')}</td>
                  <td className="py-2 text-right">{p.status === 'ready' && <PlaySampleButton voice={v} modelId={p.model_id} compact />}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      {v.is_owner ? (
        <form
          className="mt-4 flex flex-col gap-3 sm:flex-row sm:items-end"
          aria-label="Prepare a profile"
          onSubmit={(e) => {
            e.preventDefault();
            if (choice) prepare.mutate(choice);
          }}
        >
          <SelectField
            label="Prepare for another model"
            name="model_id"
            className="flex-1"
            disabled={candidates.length === 0}
            value={choice}
            onChange={(e) => setPicked(e.target.value)}
          >
            {candidates.length === 0 ? (
              <option value="">{models.isPending ? 'Loading models…' : 'Ready on every TTS model'}</option>
            ) : (
              <>
                <option value="" disabled>
                  Choose a TTS model
                </option>
                {candidates.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.id}
                  </option>
                ))}
              </>
            )}
          </SelectField>
          <Button type="submit" pending={prepare.isPending} disabled={!choice}>
            Prepare profile
          </Button>
        </form>
      ) : (
        <p className="mt-4 text-sm text-zinc-600">Platform voices come with their profiles; they cannot be prepared for other models.</p>
      )}
      <div className="mt-3 space-y-3">
        {prepare.error && <Alert>{errorMessage(prepare.error)}</Alert>}
        {message && <Alert tone="info">{message}</Alert>}
        {jobId && <JobProgress jobId={jobId} onDone={refresh} />}
        {jobs.data && jobs.data.length > 0 && (
          <details className="text-sm">
            <summary className="cursor-pointer font-medium text-zinc-700">Recent jobs ({jobs.data.length})</summary>
            <ul className="mt-2 space-y-1">
              {jobs.data.map((j) => (
                <li key={j.id} className="flex flex-wrap items-center gap-2">
                  <Badge tone={j.status === 'succeeded' ? 'green' : j.status === 'failed' ? 'amber' : 'gray'}>{j.status}</Badge>
                  <span>{j.operation.replace('_', ' ')}</span>
                  {j.model_id && <span className="font-mono text-xs">{j.model_id}</span>}
                  <span className="text-xs text-zinc-500">{formatDateTime(j.updated_at)}</span>
                  {j.error && <span className="text-xs text-red-700">{j.error}</span>}
                </li>
              ))}
            </ul>
          </details>
        )}
      </div>
    </Card>
  );
}

function EditVoice({ voice: v }: { voice: Voice }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [saved, setSaved] = useState(false);
  const refused = useRef<HTMLFormElement>(null);
  const update = useMutation(
    trpc.voices.update.mutationOptions({
      onSuccess: () => {
        setSaved(true);
        void queryClient.invalidateQueries({ queryKey: trpc.voices.pathKey() });
      },
      // The field the server refused gets the keyboard, as its message is shown under it.
      onError: (e) => {
        const field = humanError(e, EDIT_LABELS).field;
        if (field) refused.current?.querySelector<HTMLElement>(`[name="${field}"]`)?.focus();
      },
    }),
  );
  const problem = update.error ? humanError(update.error, EDIT_LABELS) : null;
  const fieldError = (name: string) => (problem?.field === name ? problem.message : null);
  return (
    <Card title="Edit" description="Rename, retag or re-describe your voice. API clients see the change at once.">
      <form
        ref={refused}
        noValidate
        key={`${v.name}|${v.tags.join(',')}|${v.description}|${v.gender}|${v.language}`}
        aria-label="Edit voice"
        className="grid gap-4 sm:grid-cols-2"
        onSubmit={(e) => {
          e.preventDefault();
          setSaved(false);
          const f = new FormData(e.currentTarget);
          const text = (n: string) => String(f.get(n) ?? '');
          update.mutate({
            id: v.id,
            changes: {
              name: text('name'),
              description: text('description'),
              tags: text('tags')
                .split(',')
                .map((t) => t.trim())
                .filter(Boolean),
              gender: text('gender') as 'female' | 'male' | 'neutral' | '',
              language: text('language'),
            },
          });
        }}
      >
        <TextField label="Name" name="name" defaultValue={v.name} required maxLength={100} error={fieldError('name')} />
        <TextField label="Tags" name="tags" defaultValue={v.tags.join(', ')} maxLength={900} hint="Comma-separated, up to 20." error={fieldError('tags')} />
        <SelectField label="Gender" name="gender" defaultValue={['female', 'male', 'neutral'].includes(v.gender) ? v.gender : ''} error={fieldError('gender')}>
          <option value="">Not set</option>
          <option value="female">Female</option>
          <option value="male">Male</option>
          <option value="neutral">Neutral</option>
        </SelectField>
        <TextField label="Language" name="language" defaultValue={v.language} required maxLength={12} error={fieldError('language')} />
        <TextAreaField
          label="Description"
          name="description"
          defaultValue={v.description}
          rows={3}
          maxLength={1000}
          className="sm:col-span-2"
          error={fieldError('description')}
        />
        <div className="space-y-3 sm:col-span-2">
          {problem && !problem.field && <Alert>{problem.message}</Alert>}

          {saved && !update.isPending && <Alert tone="success">Saved.</Alert>}
          <Button type="submit" pending={update.isPending}>
            Save changes
          </Button>
        </div>
      </form>
    </Card>
  );
}

/** The edit form's fields as the API names them (changes.<field>), with the labels the form shows. */
const EDIT_LABELS: Record<string, string> = {
  'changes.name': 'name',
  'changes.tags': 'tags',
  'changes.gender': 'gender',
  'changes.language': 'language',
  'changes.description': 'description',
};

function Actions({ voice: v }: { voice: Voice }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const [confirming, setConfirming] = useState(false);
  const save = useMutation(trpc.voices.setSaved.mutationOptions({ onSuccess: () => void queryClient.invalidateQueries({ queryKey: trpc.voices.pathKey() }) }));
  const remove = useMutation(
    trpc.voices.delete.mutationOptions({
      onSuccess: () => {
        setConfirming(false);
        void queryClient.invalidateQueries({ queryKey: trpc.voices.pathKey() });
        // The library says it was deleted (a page that just vanished would leave the user guessing).
        router.push(`/voices?deleted=${encodeURIComponent(v.name)}`);
      },
    }),
  );
  return (
    <Card title="Actions">
      <div className="flex flex-wrap items-start gap-3">
        <PlaySampleButton voice={v} modelId={sampleModelOf(v)} label="Play a sample" className="self-center" />
        <Link
          href={`/playground?voice=${encodeURIComponent(v.id)}`}
          className="inline-flex min-h-10 items-center rounded-md bg-indigo-600 px-4 py-2 text-sm font-semibold text-white hover:bg-indigo-500 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600"
        >
          Try in the playground
        </Link>
        <Button variant="secondary" aria-pressed={v.saved} pending={save.isPending} onClick={() => save.mutate({ id: v.id, saved: !v.saved })}>
          {/* Not "Save": it sat next to the edit form's "Save changes". */}
          {v.saved ? 'Remove from saved voices' : 'Add to saved voices'}
        </Button>
        {v.is_owner && (
          <Button
            variant="danger"
            onClick={() => {
              remove.reset();
              setConfirming(true);
            }}
          >
            Delete voice
          </Button>
        )}
      </div>
      {save.error && (
        <div className="mt-3">
          <Alert>{errorMessage(save.error)}</Alert>
        </div>
      )}
      <ConfirmDialog
        open={confirming}
        title="Delete this voice?"
        confirmLabel="Delete voice"
        pending={remove.isPending}
        error={remove.error ? errorMessage(remove.error) : null}
        onCancel={() => setConfirming(false)}
        onConfirm={() => remove.mutate({ id: v.id })}
      >
        <p>
          <span className="font-semibold">{v.name}</span> disappears from your library and the API at once; requests that name it will get voice_not_found.
        </p>
      </ConfirmDialog>
    </Card>
  );
}
