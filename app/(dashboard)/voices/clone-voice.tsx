'use client';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import Link from 'next/link';
import { useCallback, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Card } from '@/app/_components/card';
import { FileField, SelectField, TextAreaField } from '@/app/_components/fields';
import { JobProgress } from '@/app/_components/job-progress';
import { MicrophoneRecorder, putFileInInput } from '@/app/_components/microphone-recorder';
import { ProgressBar } from '@/app/_components/progress-bar';
import { ReasonButton } from '@/app/_components/reason-button';
import { TextField } from '@/app/_components/text-field';
import type { JobRecord, Voice } from '@/app/_lib/api-types';
import { humanError } from '@/app/_lib/format';
import { GatewayError, uploadForm } from '@/app/_lib/gateway';
import { useTRPC } from '@/app/_lib/trpc';
// The gateway's 202 answer is the job the service queued, sent as it is.
import type { QueuedVoiceJob } from '@/server/services/jobs/queue-voice-job';

const MAX_BYTES = 25 * 1024 * 1024;
const MIN_SECONDS = 10;
const LANGUAGE = /^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/;
/** The fields a refusal can name, as their labels read: its message goes under the field, worded for people. */
const FIELD_LABELS: Record<string, string> = { name: 'Voice name', language: 'Language', tags: 'Tags', description: 'Description', transcript: 'Transcript' };

type Outcome = { kind: 'created'; voice: Voice } | { kind: 'queued'; jobId: string; voiceId: string; name: string };

/** The clip's length as the browser measures it; null when it cannot tell (then the gateway decides). */
function measureSeconds(file: File): Promise<number | null> {
  return new Promise((resolve) => {
    const url = URL.createObjectURL(file);
    const audio = new Audio();
    const done = (value: number | null) => {
      URL.revokeObjectURL(url);
      resolve(value);
    };
    audio.preload = 'metadata';
    audio.onloadedmetadata = () => done(Number.isFinite(audio.duration) ? audio.duration : null);
    audio.onerror = () => done(null);
    audio.src = url;
  });
}

export function CloneVoice() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'tts' }));
  const formRef = useRef<HTMLFormElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  // For the button's reason: whether a recording is chosen (or recorded) and the voice named.
  const [hasFile, setHasFile] = useState(false);
  const [named, setNamed] = useState(false);
  // A file chosen by hand, or the form reset, replaces the take: the recorder starts afresh.
  const [takeKey, setTakeKey] = useState(0);
  const [fileError, setFileError] = useState<string | null>(null);
  const [progress, setProgress] = useState<number | null | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const uploading = progress !== undefined;

  const refreshVoices = useCallback(() => void queryClient.invalidateQueries({ queryKey: trpc.voices.pathKey() }), [queryClient, trpc]);
  const onJobDone = useCallback((_job: JobRecord) => refreshVoices(), [refreshVoices]);

  async function onSubmit(event: React.FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setError(null);
    setFieldErrors({});
    setOutcome(null);
    const form = new FormData(event.currentTarget);
    const language = String(form.get('language') ?? '').trim();
    if (!LANGUAGE.test(language)) return setFieldErrors({ language: 'Use a language tag such as en, fr or en-US.' });
    const file = form.get('file');
    if (!(file instanceof File) || file.size === 0) return setFileError('Choose a recording to clone (a WAV file of at least 10 seconds).');
    if (file.size > MAX_BYTES) return setFileError(`The file is ${(file.size / 1024 / 1024).toFixed(1)} MB; the limit is 25 MB.`);
    const seconds = await measureSeconds(file);
    if (seconds !== null && seconds < MIN_SECONDS)
      return setFileError(`The recording is ${seconds.toFixed(1)} s long; a clone needs at least ${MIN_SECONDS} s of speech.`);
    setFileError(null);
    // Optional fields the user left empty are not sent, so the API's defaults apply.
    for (const name of ['transcript', 'model_id', 'description', 'tags']) if (!String(form.get(name) ?? '').trim()) form.delete(name);
    const name = String(form.get('name') ?? '').trim();
    setProgress(0);
    try {
      const res = await uploadForm<Voice | QueuedVoiceJob>('voices/clone', form, setProgress);
      if (res.status === 202) {
        const queued = res.body as QueuedVoiceJob;
        setOutcome({ kind: 'queued', jobId: queued.job_id, voiceId: queued.voice_id, name });
      } else {
        setOutcome({ kind: 'created', voice: res.body as Voice });
      }
      formRef.current?.reset();
      setHasFile(false);
      setNamed(false);
      setTakeKey((k) => k + 1);
      refreshVoices();
    } catch (e) {
      const refused = humanError(e, FIELD_LABELS);
      const field = refused.field ?? (e instanceof GatewayError ? e.param : null);
      if (field && field in FIELD_LABELS) setFieldErrors({ [field]: refused.message });
      else setError(refused.message);
    } finally {
      setProgress(undefined);
    }
  }

  return (
    <Card title="Clone a voice" description="Upload one clear recording of a single speaker: a WAV file of at least 10 seconds, up to 25 MB.">
      <form ref={formRef} onSubmit={onSubmit} noValidate className="grid gap-4 sm:grid-cols-2" aria-label="Clone a voice">
        <FileField
          label="Recording (WAV)"
          name="file"
          accept=".wav,audio/wav,audio/x-wav,audio/wave"
          required
          error={fileError}
          onChange={(e) => {
            setFileError(null);
            setHasFile((e.target.files?.length ?? 0) > 0);
            setTakeKey((k) => k + 1);
          }}
          ref={fileInput}
          className="sm:col-span-2"
        />
        <div className="sm:col-span-2">
          <MicrophoneRecorder
            key={takeKey}
            sampleRate={24000}
            minSeconds={MIN_SECONDS}
            disabledReason={uploading ? 'The recording is being uploaded.' : null}
            onRecorded={(file) => {
              if (!fileInput.current) return;
              putFileInInput(fileInput.current, file);
              setFileError(null);
              setHasFile(true);
            }}
          />
        </div>
        <TextField
          label="Voice name"
          name="name"
          required
          maxLength={100}
          placeholder="e.g. Support agent"
          error={fieldErrors.name}
          onChange={(e) => setNamed(e.target.value.trim() !== '')}
        />
        <TextField
          label="Language"
          name="language"
          defaultValue="en"
          required
          maxLength={12}
          pattern="[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?"
          hint="A language tag such as en or en-US."
          error={fieldErrors.language}
        />
        <SelectField
          label="Mode"
          name="mode"
          defaultValue="similarity"
          hint="Similarity follows the speaker closely; stability trades likeness for consistency."
        >
          <option value="similarity">Similarity</option>
          <option value="stability">Stability</option>
        </SelectField>
        <SelectField label="TTS model" name="model_id" defaultValue="" hint="The model to prepare the voice for; others can be added later.">
          <option value="">Automatic (first model that can clone)</option>
          {models.data?.map((m) => (
            <option key={m.id} value={m.id}>
              {m.id}
              {m.displayName ? ` — ${m.displayName}` : ''}
            </option>
          ))}
        </SelectField>
        <TextField label="Tags (optional)" name="tags" maxLength={400} placeholder="calm, support" hint="Comma-separated." error={fieldErrors.tags} />
        <TextField label="Description (optional)" name="description" maxLength={1000} error={fieldErrors.description} />
        <TextAreaField
          label="Transcript (optional)"
          name="transcript"
          rows={3}
          maxLength={20000}
          hint="What is said in the recording; helps engines that use it."
          className="sm:col-span-2"
        />
        <div className="space-y-3 sm:col-span-2">
          {uploading && <ProgressBar label="Uploading the recording" value={progress ?? null} testId="upload-progress" />}
          {error && <Alert title="The clone was not made">{error}</Alert>}
          {outcome?.kind === 'created' && (
            <Alert tone="success" title={`Voice “${outcome.voice.name}” is ready`}>
              <Link className="font-medium underline" href={`/voices/${encodeURIComponent(outcome.voice.id)}`}>
                Open the voice
              </Link>{' '}
              or try it in the{' '}
              <Link className="font-medium underline" href={`/playground?voice=${encodeURIComponent(outcome.voice.id)}`}>
                playground
              </Link>
              .
            </Alert>
          )}
          {outcome?.kind === 'queued' && (
            <div className="space-y-2">
              <JobProgress jobId={outcome.jobId} onDone={onJobDone} />
              <p className="text-sm text-zinc-600">
                “{outcome.name}” is being made in the background; you can leave this page.{' '}
                <Link className="font-medium text-indigo-700 underline" href={`/voices/${encodeURIComponent(outcome.voiceId)}`}>
                  Open the voice
                </Link>
              </p>
            </div>
          )}
          <ReasonButton type="submit" pending={uploading} reason={!hasFile ? 'Choose a recording, or record one.' : !named ? 'Name the voice.' : null}>
            Upload and clone
          </ReasonButton>
        </div>
      </form>
    </Card>
  );
}
