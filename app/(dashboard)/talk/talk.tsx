'use client';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { Card } from '@/app/_components/card';
import { SelectField, TextAreaField } from '@/app/_components/fields';
import { errorMessage } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { microphoneProblem, useMicrophonePermission } from '@/app/_lib/use-microphone-permission';
import { TalkCall, type TalkLine } from './talk-call';

type Phase = 'idle' | 'connecting' | 'live';
/** The Agent choice that is no profile: an LLM, a TTS model and a voice picked here. */
const CUSTOM = '__custom__';

export function Talk() {
  const trpc = useTRPC();
  // Read again on every visit: credit granted elsewhere since must enable Start.
  const profiles = useQuery({ ...trpc.talk.profiles.queryOptions(), refetchOnMount: 'always' });
  const startCall = useMutation(trpc.talk.startCall.mutationOptions());
  const microphone = useMicrophonePermission();
  const [profile, setProfile] = useState('');
  const [llm, setLlm] = useState('');
  const [tts, setTts] = useState('');
  const [voice, setVoice] = useState('');
  const [instructions, setInstructions] = useState('');
  const [phase, setPhase] = useState<Phase>('idle');
  const [lines, setLines] = useState<TalkLine[]>([]);
  const [speaking, setSpeaking] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [ended, setEnded] = useState<string | null>(null);
  const call = useRef<TalkCall | null>(null);
  const audio = useRef<HTMLAudioElement>(null);
  const list = profiles.data?.profiles ?? [];
  // A profile, or CUSTOM: an LLM with a TTS model and one of its voices.
  const custom = profile === CUSTOM || (profiles.data !== undefined && list.length === 0);
  const chosen = custom ? undefined : (list.find((p) => p.id === profile) ?? list[0]);
  const llmId = llm || profiles.data?.llms[0]?.id || '';
  const ttsId = tts || profiles.data?.ttsModels[0]?.id || '';
  const voices = useQuery({ ...trpc.voices.forModel.queryOptions({ modelId: ttsId }), enabled: custom && ttsId !== '' });
  const voiceId = voice || voices.data?.[0]?.id || '';

  useEffect(() => () => call.current?.hangUp(), []);

  const why = !profiles.data
    ? 'Loading the realtime profiles…'
    : custom && (llmId === '' || ttsId === '')
      ? 'Talking needs an LLM and a TTS model: none is registered on the gateway.'
      : custom && voiceId === ''
        ? 'This TTS model has no voice ready to speak with: pick another model, or prepare a voice for it on the Voices page.'
        : !profiles.data.hasCredit
          ? 'Your organization has no credit: a call is billed per second of speech and per token.'
          : microphoneProblem(microphone);

  async function start() {
    if ((!chosen && !custom) || !audio.current) return;
    setError(null);
    setEnded(null);
    setLines([]);
    setPhase('connecting');
    let stream: MediaStream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true } });
    } catch (e) {
      setPhase('idle');
      return setError(`The microphone could not be opened: ${(e as Error).message}`);
    }
    try {
      const said = instructions.trim() || undefined;
      const minted = await startCall.mutateAsync(
        chosen ? { profile: chosen.id, instructions: said } : { llm: llmId, tts: ttsId, voice: voiceId, instructions: said },
      );
      call.current = await TalkCall.start({
        microphone: stream,
        secret: minted.secret,
        callsUrl: minted.callsUrl,
        audio: audio.current,
        handlers: {
          onLines: setLines,
          onSpeaking: setSpeaking,
          onError: setError,
          onEnded: (reason) => {
            call.current = null;
            setPhase('idle');
            setSpeaking(false);
            setEnded(reason);
          },
        },
      });
      setPhase('live');
    } catch (e) {
      for (const track of stream.getTracks()) track.stop();
      setPhase('idle');
      setError(errorMessage(e));
    }
  }

  function stop() {
    call.current?.hangUp();
    call.current = null;
    setPhase('idle');
    setSpeaking(false);
  }

  if (profiles.isError)
    return (
      <Alert title="Could not load the realtime profiles" onRetry={() => void profiles.refetch()}>
        {errorMessage(profiles.error)}
      </Alert>
    );
  return (
    <Card
      title="Talk to an agent"
      description="A realtime call through your microphone, over WebRTC. Talk over the answer to interrupt it. Billed per second of your speech and per token, with your organization's credit."
    >
      <form aria-label="Talk" onSubmit={(e) => e.preventDefault()} className="grid gap-4 sm:grid-cols-2">
        <SelectField label="Agent" value={chosen?.id ?? CUSTOM} onChange={(e) => setProfile(e.target.value)} disabled={phase !== 'idle'}>
          {list.map((p) => (
            <option key={p.id} value={p.id}>
              {p.id} — {[p.stt, p.llm, p.tts, p.voice].filter(Boolean).join(' · ')}
            </option>
          ))}
          <option value={CUSTOM}>A model and a voice of your choice</option>
        </SelectField>
        {custom && (
          <>
            <SelectField label="LLM" value={llmId} onChange={(e) => setLlm(e.target.value)} disabled={phase !== 'idle'}>
              {profiles.data?.llms.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name || m.id}
                </option>
              ))}
            </SelectField>
            <SelectField
              label="TTS model"
              value={ttsId}
              onChange={(e) => {
                setTts(e.target.value);
                setVoice('');
              }}
              disabled={phase !== 'idle'}
            >
              {profiles.data?.ttsModels.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name || m.id}
                </option>
              ))}
            </SelectField>
            <SelectField label="Voice" value={voiceId} onChange={(e) => setVoice(e.target.value)} disabled={phase !== 'idle' || !voices.data?.length}>
              {voices.data?.map((v) => (
                <option key={v.id} value={v.id}>
                  {v.name} ({v.language})
                </option>
              ))}
            </SelectField>
          </>
        )}
        <TextAreaField
          label="Instructions (optional)"
          value={instructions}
          onChange={(e) => setInstructions(e.target.value)}
          maxLength={4000}
          rows={2}
          placeholder={chosen ? (chosen.instructions ?? 'The profile’s instructions') : 'What the agent is told before the conversation'}
          disabled={phase !== 'idle'}
          className="sm:col-span-2"
        />
        <div className="flex flex-wrap items-center gap-3 sm:col-span-2">
          {phase === 'idle' ? (
            <Button onClick={() => void start()} disabled={why !== null} aria-describedby={why ? 'talk-why' : undefined}>
              Start talking
            </Button>
          ) : (
            <Button variant="secondary" onClick={stop} pending={phase === 'connecting'}>
              {phase === 'connecting' ? 'Connecting…' : 'Stop'}
            </Button>
          )}
          <span data-testid="talk-status" data-phase={phase} className="text-sm text-zinc-600" aria-live="polite">
            {phase === 'live' ? (speaking ? 'Hearing you…' : 'Listening — say something.') : phase === 'connecting' ? 'Connecting…' : ''}
          </span>
        </div>
        {why && (
          <p id="talk-why" className="text-sm text-zinc-600 sm:col-span-2">
            {why}
          </p>
        )}
      </form>
      {error && (
        <div className="mt-4">
          <Alert title="The call failed">{error}</Alert>
        </div>
      )}
      {ended && (
        <div className="mt-4">
          <Alert tone="info">{ended}</Alert>
        </div>
      )}
      <audio ref={audio} data-testid="talk-audio" autoPlay hidden />
      {lines.length > 0 && (
        <ol aria-label="Transcript" aria-live="polite" className="mt-5 space-y-2 border-t border-zinc-100 pt-4">
          {lines.map((line) => (
            <TranscriptLine key={line.id} line={line} />
          ))}
        </ol>
      )}
    </Card>
  );
}

function TranscriptLine({ line }: { line: TalkLine }) {
  const user = line.role === 'user';
  return (
    <li data-testid={`talk-line-${line.role}`} data-done={line.done} data-interrupted={line.interrupted} className={`flex ${user ? 'justify-end' : ''}`}>
      <div className={`max-w-[85%] rounded-lg px-3 py-2 text-sm ${user ? 'bg-zinc-900 text-white' : 'bg-zinc-100 text-zinc-900'}`}>
        <span className="sr-only">{user ? 'You: ' : 'Agent: '}</span>
        {line.text || <span className="opacity-60">…</span>}
        {line.interrupted && <span className="ml-1 text-xs opacity-70">(interrupted)</span>}
        {line.latency && (
          <span data-testid="talk-latency" className="mt-1 block text-xs text-zinc-500">
            first token {ms(line.latency.llmFirstTokenMs)} · first audio {ms(line.latency.firstAudioMs)}
          </span>
        )}
      </div>
    </li>
  );
}

const ms = (value: number | null) => (value === null ? '—' : `${Math.round(value)} ms`);
