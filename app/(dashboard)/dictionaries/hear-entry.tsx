'use client';
// "Hear" in the dictionary editor: speaks an entry's word through the dashboard's gateway proxy
// (POST /tts/bytes with this dictionary as pronunciation_dict_id), so the user hears what a TTS
// request naming the dictionary says. The gateway applies the dictionary as saved, so the
// editor offers Hear only on rows identical to a saved entry (see EntryForm).
import { useMutation, useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { CostLine } from '@/app/_components/cost-line';
import { SelectField } from '@/app/_components/fields';
import { errorMessage } from '@/app/_lib/format';
import { chargeOf, gatewayFetch, type Charge } from '@/app/_lib/gateway';
import { useTRPC } from '@/app/_lib/trpc';

/** eSpeak NG is the engine that honours phoneme entries; others say such a word as written. */
const PREFERRED_MODEL = 'local-espeak';

interface Take {
  rowKey: number;
  url: string;
  charge: Charge;
}

export type Hearing = ReturnType<typeof useHearing>;

/** The model and voice to hear entries with, and the latest take (one at a time). */
export function useHearing(dictId: string) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'tts' }));
  const [modelId, setModelId] = useState('');
  const [voiceId, setVoiceId] = useState('');
  const [take, setTake] = useState<Take | null>(null);

  useEffect(() => {
    if (modelId || !models.data?.length) return;
    setModelId((models.data.find((m) => m.id === PREFERRED_MODEL) ?? models.data[0]!).id);
  }, [models.data, modelId]);

  // Only voices with a ready profile for the model can speak (as in the playground); an English
  // one by default, since most dictionaries are for English words.
  const voices = useQuery({ ...trpc.voices.forModel.queryOptions({ modelId }), enabled: modelId !== '' });
  useEffect(() => {
    if (!voices.data || voices.data.some((v) => v.id === voiceId)) return;
    setVoiceId((voices.data.find((v) => v.language.toLowerCase().startsWith('en')) ?? voices.data[0])?.id ?? '');
  }, [voices.data, voiceId]);

  // A take's blob URL is released when the next one replaces it or the editor closes.
  useEffect(() => () => void (take && URL.revokeObjectURL(take.url)), [take]);

  const hear = useMutation({
    mutationFn: async ({ rowKey, grapheme }: { rowKey: number; grapheme: string }): Promise<Take> => {
      const res = await gatewayFetch('tts/bytes', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model_id: modelId,
          transcript: grapheme,
          voice: { mode: 'id', id: voiceId },
          output_format: { container: 'wav', sample_rate: 24000, encoding: 'pcm_s16le' },
          pronunciation_dict_id: dictId,
        }),
      });
      const blob = await res.blob();
      return { rowKey, url: URL.createObjectURL(new Blob([blob], { type: res.headers.get('content-type') ?? 'audio/wav' })), charge: chargeOf(res.headers) };
    },
    onMutate: () => setTake(null),
    onSuccess: setTake,
  });

  return {
    models,
    modelId,
    setModelId,
    voices,
    voiceId,
    setVoiceId,
    take,
    ready: voiceId !== '',
    pendingRow: hear.isPending ? hear.variables.rowKey : null,
    failedRow: hear.isError ? hear.variables.rowKey : null,
    error: hear.error,
    hear: (rowKey: number, grapheme: string) => hear.mutate({ rowKey, grapheme }),
  };
}

/** Which model and voice Hear uses. */
export function HearSettings({ hearing }: { hearing: Hearing }) {
  const { models, voices } = hearing;
  return (
    <fieldset className="grid min-w-0 gap-3 rounded-md bg-zinc-50 p-3 sm:grid-cols-2" data-testid="hear-settings">
      <legend className="sr-only">Voice for Hear</legend>
      <SelectField
        label="Hear with model"
        value={hearing.modelId}
        onChange={(e) => hearing.setModelId(e.target.value)}
        disabled={!models.data?.length}
        error={models.isError ? errorMessage(models.error) : models.data?.length === 0 ? 'No TTS model is available.' : null}
      >
        {models.data?.map((m) => (
          <option key={m.id} value={m.id}>
            {m.id}
          </option>
        ))}
      </SelectField>
      <SelectField
        label="Voice"
        value={hearing.voiceId}
        onChange={(e) => hearing.setVoiceId(e.target.value)}
        disabled={!voices.data?.length}
        error={voices.isError ? errorMessage(voices.error) : voices.data?.length === 0 ? `No voice is ready for ${hearing.modelId}.` : null}
      >
        {!voices.data ? (
          <option value="">Loading voices…</option>
        ) : (
          voices.data.map((v) => (
            <option key={v.id} value={v.id}>
              {v.name} ({v.language})
            </option>
          ))
        )}
      </SelectField>
      <p className="text-xs text-zinc-600 sm:col-span-2">
        <strong>Hear</strong> speaks an entry&apos;s word with this voice and the saved dictionary, billed like any TTS request. Phonemes are used by eSpeak
        models only.
      </p>
    </fieldset>
  );
}

/** Under the row that was heard: its audio and cost, or why it could not be heard. */
export function HearResult({ hearing, rowKey, grapheme, className = '' }: { hearing: Hearing; rowKey: number; grapheme: string; className?: string }) {
  if (hearing.failedRow === rowKey) {
    return (
      <div className={className}>
        <Alert title={`Could not hear “${grapheme}”`}>{errorMessage(hearing.error)}</Alert>
      </div>
    );
  }
  const take = hearing.take;
  if (take?.rowKey !== rowKey) return null;
  return (
    <div className={`flex flex-col gap-2 rounded-md bg-zinc-50 p-3 sm:flex-row sm:items-center ${className}`} data-testid="hear-result">
      <audio controls autoPlay src={take.url} data-testid="hear-audio" aria-label={`“${grapheme}” as the dictionary says it`} className="w-full sm:max-w-sm" />
      <CostLine charge={take.charge} />
    </div>
  );
}
