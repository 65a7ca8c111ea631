'use client';
import { useQuery } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Card } from '@/app/_components/card';
import { CostLine } from '@/app/_components/cost-line';
import { FileField, SelectField } from '@/app/_components/fields';
import { MicrophoneRecorder, putFileInInput } from '@/app/_components/microphone-recorder';
import { ProgressBar } from '@/app/_components/progress-bar';
import { ReasonButton } from '@/app/_components/reason-button';
import { TextField } from '@/app/_components/text-field';
import { errorMessage } from '@/app/_lib/format';
import { RequestLogLink } from '@/app/_components/request-log-link';
import { uploadForm, type Charge } from '@/app/_lib/gateway';
import { useTRPC } from '@/app/_lib/trpc';
import type { CodeRequest } from './code-samples';
import { CopyAsCode } from './copy-as-code';

const MAX_BYTES = 25 * 1024 * 1024;
const SAMPLE_RATES = [8000, 16000, 22050, 24000, 44100, 48000] as const;

interface Transcription {
  text: string;
  words: { word: string; start: number; end: number }[];
  duration_seconds: number;
}

export function Transcribe({ gatewayUrl }: { gatewayUrl: string }) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'stt' }));
  const fileInput = useRef<HTMLInputElement>(null);
  // What "Copy as code" and the button's reason need; the form itself is sent as it stands.
  const [fileName, setFileName] = useState<string | null>(null);
  // A file chosen by hand replaces the take: the recorder starts afresh.
  const [takeKey, setTakeKey] = useState(0);
  const [modelId, setModelId] = useState('');
  const [sampleRate, setSampleRate] = useState('');
  const [language, setLanguage] = useState('');
  const [keyterms, setKeyterms] = useState('');
  const [fileError, setFileError] = useState<string | null>(null);
  const [progress, setProgress] = useState<number | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [result, setResult] = useState<{ body: Transcription; charge: Charge; model: string; local: boolean } | null>(null);
  const busy = progress !== undefined;
  const model = modelId || models.data?.[0]?.id || '';
  const why = !models.data ? 'Loading the models…' : !fileName ? 'Choose a recording, or record one.' : null;
  const fields = Object.fromEntries(
    Object.entries({ model, sample_rate: sampleRate, language: language.trim(), keyterms: keyterms.trim() }).filter(([, v]) => v !== ''),
  );
  const code: CodeRequest | null = model
    ? { kind: 'form', url: `${gatewayUrl}/v1/audio/transcriptions`, fields, file: { field: 'file', path: fileName ?? 'recording.wav' } }
    : null;
  const local = model.startsWith('local-');

  async function onSubmit(event: React.FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setError(null);
    const form = new FormData(event.currentTarget);
    const file = form.get('file');
    if (!(file instanceof File) || file.size === 0) return setFileError('Choose a WAV file or raw 16-bit PCM to transcribe.');
    if (file.size > MAX_BYTES) return setFileError(`The file is ${(file.size / 1024 / 1024).toFixed(1)} MB; the limit is 25 MB.`);
    setFileError(null);
    for (const name of ['sample_rate', 'language', 'keyterms']) if (!String(form.get(name) ?? '').trim()) form.delete(name);
    // The previous transcript goes while the new one runs: it must not pass for the answer.
    setResult(null);
    setProgress(0);
    try {
      const res = await uploadForm<Transcription>('v1/audio/transcriptions', form, (f) => setProgress(f));
      setResult({ body: res.body, charge: res.charge, model, local });
    } catch (e) {
      setError(e);
    } finally {
      setProgress(undefined);
    }
  }

  if (models.isError)
    return (
      <Alert title="Could not load the models" onRetry={() => void models.refetch()}>
        {errorMessage(models.error)}
      </Alert>
    );
  return (
    <Card
      title="Transcribe"
      description="Upload a recording and read what the STT model hears, as POST /v1/audio/transcriptions does. Billed per second of audio."
    >
      {models.data?.length === 0 ? (
        <Alert tone="info">No speech-to-text model is available.</Alert>
      ) : (
        <form aria-label="Transcribe a recording" noValidate onSubmit={onSubmit} className="grid gap-4 sm:grid-cols-2">
          <FileField
            ref={fileInput}
            label="Recording (WAV or raw 16-bit PCM)"
            name="file"
            accept=".wav,.pcm,.raw,audio/wav,audio/x-wav"
            error={fileError}
            onChange={(e) => {
              setFileError(null);
              setFileName(e.target.files?.[0]?.name ?? null);
              setTakeKey((k) => k + 1);
            }}
            className="sm:col-span-2"
          />
          <div className="sm:col-span-2">
            <MicrophoneRecorder
              key={takeKey}
              sampleRate={16000}
              disabledReason={busy ? 'A transcription is running.' : null}
              onRecorded={(file) => {
                if (!fileInput.current) return;
                putFileInInput(fileInput.current, file);
                setFileError(null);
                setFileName(file.name);
              }}
            />
          </div>
          <SelectField label="STT model" name="model" disabled={!models.data} value={model} onChange={(e) => setModelId(e.target.value)}>
            {models.data?.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
                {m.displayName ? ` — ${m.displayName}` : ''}
              </option>
            )) ?? <option>Loading…</option>}
          </SelectField>
          <SelectField
            label="Sample rate"
            name="sample_rate"
            value={sampleRate}
            onChange={(e) => setSampleRate(e.target.value)}
            hint="Needed for raw PCM only; WAV files carry theirs."
          >
            <option value="">From the WAV header</option>
            {SAMPLE_RATES.map((r) => (
              <option key={r} value={r}>
                {r.toLocaleString('en')} Hz
              </option>
            ))}
          </SelectField>
          <TextField
            label="Language (optional)"
            name="language"
            maxLength={12}
            placeholder="en"
            value={language}
            onChange={(e) => setLanguage(e.target.value)}
          />
          <TextField
            label="Key terms (optional)"
            name="keyterms"
            maxLength={500}
            placeholder="svc, Alice"
            hint="Words to listen for."
            value={keyterms}
            onChange={(e) => setKeyterms(e.target.value)}
          />
          <div className="space-y-3 sm:col-span-2">
            {busy && <ProgressBar label={progress === 1 ? 'Transcribing…' : 'Uploading the recording'} value={progress === 1 ? null : (progress ?? null)} />}
            {error !== null && (
              <Alert title="Transcription failed">
                {errorMessage(error)}
                <RequestLogLink error={error} />
              </Alert>
            )}
            <ReasonButton type="submit" pending={busy} reason={why}>
              Transcribe
            </ReasonButton>
          </div>
        </form>
      )}
      {result && (
        <div className="mt-5 space-y-3 border-t border-zinc-100 pt-4" aria-live="polite">
          <CostLine charge={result.charge} />
          <p className="text-xs text-zinc-500">{result.body.duration_seconds.toFixed(2)} s of audio</p>
          <blockquote className="rounded-md bg-zinc-50 p-3 text-zinc-900" data-testid="transcript">
            {result.body.text || <span className="text-zinc-500">(no speech recognized)</span>}
          </blockquote>
          {result.local && (
            <p className="text-xs text-zinc-500" data-testid="local-stt-note">
              {result.model} is the small offline recognizer bundled with the gateway: expect rough transcripts, even of the shipped voices. See the note at the
              top of the page for real engines.
            </p>
          )}
          {result.body.words.length > 0 && (
            <details className="text-sm">
              <summary className="cursor-pointer font-medium text-zinc-700">Word timings ({result.body.words.length})</summary>
              <ol className="mt-2 flex flex-wrap gap-1">
                {result.body.words.map((w, i) => (
                  <li key={i} className="rounded bg-zinc-100 px-1.5 py-0.5 text-xs">
                    {w.word}{' '}
                    <span className="text-zinc-500">
                      {w.start.toFixed(2)}–{w.end.toFixed(2)} s
                    </span>
                  </li>
                ))}
              </ol>
            </details>
          )}
        </div>
      )}
      <CopyAsCode request={code} section="Transcribe" />
    </Card>
  );
}
