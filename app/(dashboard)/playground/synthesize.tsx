'use client';
import { useMutation, useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useEffect, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Card } from '@/app/_components/card';
import { CostLine } from '@/app/_components/cost-line';
import { SelectField, TextAreaField } from '@/app/_components/fields';
import { ReasonButton } from '@/app/_components/reason-button';
import { LoadingBlock, Spinner } from '@/app/_components/spinner';
import { errorMessage } from '@/app/_lib/format';
import { RequestLogLink } from '@/app/_components/request-log-link';
import { chargeOf, gatewayFetch, type Charge } from '@/app/_lib/gateway';
import { useTRPC } from '@/app/_lib/trpc';
import type { CodeRequest, Json } from './code-samples';
import { CopyAsCode } from './copy-as-code';

const SAMPLE_RATES = [8000, 16000, 22050, 24000, 44100, 48000] as const;
const ENCODINGS = [
  { value: 'pcm_s16le', label: '16-bit PCM' },
  { value: 'pcm_f32le', label: '32-bit float' },
  { value: 'pcm_mulaw', label: 'μ-law' },
  { value: 'pcm_alaw', label: 'A-law' },
] as const;
const BIT_RATES = [32000, 64000, 96000, 128000, 192000, 256000, 320000] as const;
const MAX_CHARS = 5000;

interface Result {
  url: string;
  contentType: string;
  bytes: number;
  container: string;
  charge: Charge;
}

export function Synthesize({ initialVoiceId, gatewayUrl }: { initialVoiceId: string | null; gatewayUrl: string }) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'tts' }));
  const dicts = useQuery(trpc.dicts.list.queryOptions());
  // A voice named in the URL (from a voice page) picks the first model it is ready on.
  const initialVoice = useQuery({ ...trpc.voices.get.queryOptions({ id: initialVoiceId ?? '' }), enabled: initialVoiceId !== null, retry: false });
  const [modelId, setModelId] = useState('');
  const [voiceId, setVoiceId] = useState(initialVoiceId ?? '');
  const [text, setText] = useState('Hello! This is how I sound when I read a sentence aloud.');
  const [container, setContainer] = useState('wav');
  const [sampleRate, setSampleRate] = useState(24000);
  const [encoding, setEncoding] = useState('pcm_s16le');
  const [bitRate, setBitRate] = useState(128000);
  const [dictId, setDictId] = useState('');
  const [result, setResult] = useState<Result | null>(null);
  const [playError, setPlayError] = useState(false);
  const audioRef = useRef<HTMLAudioElement>(null);

  useEffect(() => {
    if (modelId || !models.data?.length) return;
    const readyOn = initialVoice.data?.profiles.find((p) => p.status === 'ready' && models.data.some((m) => m.id === p.model_id))?.model_id;
    if (initialVoiceId && initialVoice.isPending) return;
    setModelId(readyOn ?? models.data[0]!.id);
  }, [models.data, modelId, initialVoice.data, initialVoice.isPending, initialVoiceId]);

  const voices = useQuery({ ...trpc.voices.forModel.queryOptions({ modelId }), enabled: modelId !== '' });
  useEffect(() => {
    if (!voices.data) return;
    if (!voices.data.some((v) => v.id === voiceId)) setVoiceId(voices.data[0]?.id ?? '');
  }, [voices.data, voiceId]);

  // The previous take's blob URL is released when a new one replaces it or the page goes.
  useEffect(() => () => void (result && URL.revokeObjectURL(result.url)), [result]);

  // The request as sent, and as "Copy as code" writes it.
  const body: { [key: string]: Json } = {
    model_id: modelId,
    transcript: text,
    voice: { mode: 'id', id: voiceId },
    output_format: container === 'mp3' ? { container, sample_rate: sampleRate, bit_rate: bitRate } : { container, sample_rate: sampleRate, encoding },
    ...(dictId ? { pronunciation_dict_id: dictId } : {}),
  };
  const synth = useMutation({
    mutationFn: async () => {
      const res = await gatewayFetch('tts/bytes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const contentType = res.headers.get('content-type') ?? 'application/octet-stream';
      const blob = await res.blob();
      return { url: URL.createObjectURL(new Blob([blob], { type: contentType })), contentType, bytes: blob.size, container, charge: chargeOf(res.headers) };
    },
    // The previous take goes as soon as a new one is asked for: it must not pass for the answer.
    onMutate: () => {
      setPlayError(false);
      setResult(null);
    },
    onSuccess: (r) => setResult(r),
  });

  // A new take plays on its own: the click on Synthesize is the gesture browsers ask for.
  useEffect(() => {
    if (result && result.container !== 'raw') void audioRef.current?.play().catch(() => undefined);
  }, [result]);

  // Counted in characters (code points), as the API bills and limits them. No maxLength on the
  // field: it would cut a paste at 5,000 UTF-16 units without a word; over the limit, the
  // counter turns red and Synthesize waits.
  const chars = [...text].length;
  const over = chars - MAX_CHARS;
  const textError =
    text.trim().length === 0
      ? 'Enter some text to speak.'
      : over > 0
        ? `${over.toLocaleString('en')} ${over === 1 ? 'character' : 'characters'} over the ${MAX_CHARS.toLocaleString('en')}-character limit of one request: shorten the text.`
        : null;
  const why = !voiceId
    ? voices.isPending && modelId
      ? 'Loading the voices…'
      : 'No voice is ready for this model: pick another model, or prepare a voice for it on its voice page.'
    : text.trim() === ''
      ? 'Enter some text to speak.'
      : over > 0
        ? 'Shorten the text to send it.'
        : null;
  const code: CodeRequest | null = modelId
    ? { kind: 'json', url: `${gatewayUrl}/tts/bytes`, body, saveAs: `speech.${container === 'raw' ? 'pcm' : container}` }
    : null;
  const missingVoice = initialVoiceId && voiceId !== initialVoiceId && voices.data && modelId ? !voices.data.some((v) => v.id === initialVoiceId) : false;

  if (models.isPending) return <LoadingBlock label="Loading models" />;
  if (models.isError)
    return (
      <Alert title="Could not load the models" onRetry={() => void models.refetch()}>
        {errorMessage(models.error)}
      </Alert>
    );
  if (models.data.length === 0)
    return (
      <Alert tone="info" title="No TTS model is available">
        An operator has to add one (svc model upsert).
      </Alert>
    );

  return (
    <Card title="Synthesize" description="Speak text with a model and voice, as POST /tts/bytes does, and hear it here. Billed per character like any request.">
      <form
        aria-label="Synthesize speech"
        className="grid gap-4 sm:grid-cols-2"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (!textError && voiceId) synth.mutate();
        }}
      >
        <SelectField label="TTS model" value={modelId} onChange={(e) => setModelId(e.target.value)}>
          {models.data.map((m) => (
            <option key={m.id} value={m.id}>
              {m.id}
              {m.displayName ? ` — ${m.displayName}` : ''}
            </option>
          ))}
        </SelectField>
        <SelectField
          label="Voice"
          value={voiceId}
          onChange={(e) => setVoiceId(e.target.value)}
          disabled={!voices.data?.length}
          hint={
            <>
              Only voices with a ready profile for {modelId || 'this model'} are listed. To use another voice, prepare a profile for this model on its{' '}
              <Link className="underline" href="/voices">
                voice page
              </Link>
              .
            </>
          }
          error={voices.isError ? errorMessage(voices.error) : missingVoice ? `Voice ${initialVoiceId} has no ready profile for ${modelId}.` : null}
        >
          {voices.isPending ? (
            <option value="">Loading voices…</option>
          ) : !voices.data?.length ? (
            <option value="">No voice is ready for this model</option>
          ) : (
            voices.data.map((v) => (
              <option key={v.id} value={v.id}>
                {v.name} ({v.language}
                {v.isOwner ? ', yours' : ''})
              </option>
            ))
          )}
        </SelectField>
        <div className="sm:col-span-2">
          <TextAreaField label="Text" value={text} onChange={(e) => setText(e.target.value)} rows={4} error={text.length > 0 ? textError : null} />
          <p
            className={`mt-1 text-right text-xs tabular-nums ${over > 0 ? 'font-semibold text-red-700' : chars > MAX_CHARS * 0.9 ? 'text-amber-800' : 'text-zinc-500'}`}
            data-testid="char-counter"
            aria-live="polite"
          >
            {chars.toLocaleString('en')} / {MAX_CHARS.toLocaleString('en')} characters
          </p>
        </div>
        <SelectField
          label="Container"
          value={container}
          onChange={(e) => setContainer(e.target.value)}
          hint={container === 'raw' ? 'Raw PCM has no header: browsers cannot play it; download it instead.' : undefined}
        >
          <option value="wav">WAV</option>
          <option value="mp3">MP3</option>
          <option value="raw">Raw PCM</option>
        </SelectField>
        <SelectField label="Sample rate" value={sampleRate} onChange={(e) => setSampleRate(Number(e.target.value))}>
          {SAMPLE_RATES.map((r) => (
            <option key={r} value={r}>
              {r.toLocaleString('en')} Hz
            </option>
          ))}
        </SelectField>
        {container === 'mp3' ? (
          <SelectField label="Bit rate" value={bitRate} onChange={(e) => setBitRate(Number(e.target.value))}>
            {BIT_RATES.map((b) => (
              <option key={b} value={b}>
                {b / 1000} kbit/s
              </option>
            ))}
          </SelectField>
        ) : (
          <SelectField label="Encoding" value={encoding} onChange={(e) => setEncoding(e.target.value)}>
            {ENCODINGS.map((x) => (
              <option key={x.value} value={x.value}>
                {x.label}
              </option>
            ))}
          </SelectField>
        )}
        <SelectField
          label="Pronunciation dictionary"
          value={dictId}
          onChange={(e) => setDictId(e.target.value)}
          hint={
            dicts.isError ? `Could not load dictionaries: ${errorMessage(dicts.error)}` : dicts.data?.length === 0 ? 'You have no dictionaries yet.' : undefined
          }
        >
          <option value="">None</option>
          {dicts.data?.map((d) => (
            <option key={d.id} value={d.id}>
              {d.name} ({d.entry_count} entries)
            </option>
          ))}
        </SelectField>
        <div className="space-y-3 sm:col-span-2">
          {synth.error && (
            <Alert title="Synthesis failed">
              {errorMessage(synth.error)}
              <RequestLogLink error={synth.error} />
            </Alert>
          )}
          <ReasonButton type="submit" pending={synth.isPending} reason={why}>
            Synthesize
          </ReasonButton>
        </div>
      </form>
      {synth.isPending && (
        <p className="mt-5 flex items-center gap-2 border-t border-zinc-100 pt-4 text-sm text-zinc-600" role="status" data-testid="tts-pending">
          <Spinner className="size-4" /> Synthesizing…
        </p>
      )}
      {result && (
        <div className="mt-5 space-y-2 border-t border-zinc-100 pt-4" aria-live="polite">
          <CostLine charge={result.charge} />
          {result.container === 'raw' || playError ? (
            <p className="text-sm text-zinc-600">{playError ? 'This browser cannot play this format.' : 'Raw PCM cannot be played in the browser.'}</p>
          ) : (
            <audio
              ref={audioRef}
              controls
              src={result.url}
              data-testid="tts-audio"
              onError={() => setPlayError(true)}
              className="w-full"
              aria-label="Synthesized speech"
            />
          )}
          <a
            href={result.url}
            download={`speech.${result.container === 'raw' ? 'pcm' : result.container}`}
            className="text-sm font-medium text-indigo-700 underline"
          >
            Download ({(result.bytes / 1024).toFixed(1)} KB, {result.contentType})
          </a>
        </div>
      )}
      <CopyAsCode request={code} section="Synthesize" />
    </Card>
  );
}
