'use client';
// Streaming speech: the browser opens the gateway's /tts/websocket itself (Cartesia's protocol,
// docs/tts-websocket.md) with a 60 s access token the dashboard server mints
// (playground.speechToken), never a key, sends one context and plays each audio chunk as it
// arrives (Web Audio, scheduled back to back), showing the time from sending the text to the
// first audio.
import { useMutation, useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { Card } from '@/app/_components/card';
import { SelectField, TextAreaField } from '@/app/_components/fields';
import { ReasonButton } from '@/app/_components/reason-button';
import { errorMessage } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import type { CodeRequest } from './code-samples';
import { CopyAsCode } from './copy-as-code';

const SAMPLE_RATE = 24000;
const MAX_CHARS = 5000;
/** Cartesia's API version the page speaks (any date is served alike). */
const CARTESIA_VERSION = '2025-04-16';

type Phase = 'idle' | 'connecting' | 'streaming' | 'done';

interface Figures {
  /** From sending the text on the open socket to its first audio chunk. */
  firstAudioMs: number | null;
  /** From asking for the token to the socket being open. */
  connectMs: number | null;
  seconds: number;
  chunks: number;
}

/** Plays 16-bit PCM chunks back to back as they come; a chunk may end mid-sample (the rest waits for the next). */
class ChunkPlayer {
  readonly context = new AudioContext();
  private next = 0;
  private carry: Uint8Array = new Uint8Array(0);

  /** Plays the base64 chunk; its length in seconds. */
  play(base64: string): number {
    const raw = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    const bytes = new Uint8Array(this.carry.length + raw.length);
    bytes.set(this.carry);
    bytes.set(raw, this.carry.length);
    const whole = bytes.length - (bytes.length % 2);
    this.carry = bytes.slice(whole);
    if (whole === 0) return 0;
    const view = new DataView(bytes.buffer, 0, whole);
    const samples = new Float32Array(whole / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(i * 2, true) / 0x8000;
    const buffer = this.context.createBuffer(1, samples.length, SAMPLE_RATE);
    buffer.copyToChannel(samples, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    // A little lead for the first chunk; then each starts where the last ends.
    const at = Math.max(this.next, this.context.currentTime + 0.03);
    source.start(at);
    this.next = at + buffer.duration;
    return buffer.duration;
  }

  close(): void {
    void this.context.close().catch(() => undefined);
  }
}

export function StreamSpeech({ gatewayUrl }: { gatewayUrl: string }) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'tts' }));
  const mint = useMutation(trpc.playground.speechToken.mutationOptions());
  const [modelId, setModelId] = useState('');
  const [voiceId, setVoiceId] = useState('');
  const [text, setText] = useState('Streaming speech starts playing while the rest is still being made. Listen to how soon the first words arrive.');
  const [phase, setPhase] = useState<Phase>('idle');
  const [figures, setFigures] = useState<Figures | null>(null);
  const [error, setError] = useState<string | null>(null);
  const socket = useRef<WebSocket | null>(null);
  const player = useRef<ChunkPlayer | null>(null);
  const model = modelId || models.data?.[0]?.id || '';
  const voices = useQuery({ ...trpc.voices.forModel.queryOptions({ modelId: model }), enabled: model !== '' });
  const voice = voices.data?.some((v) => v.id === voiceId) ? voiceId : (voices.data?.[0]?.id ?? '');

  const end = () => {
    socket.current?.close(1000);
    socket.current = null;
  };
  useEffect(
    () => () => {
      end();
      player.current?.close();
    },
    [],
  );

  const message = {
    context_id: 'playground',
    model_id: model,
    transcript: text,
    voice: { mode: 'id', id: voice },
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: SAMPLE_RATE },
  };

  async function speak() {
    end();
    player.current?.close();
    // Made in the click: browsers let audio start from a user's gesture.
    const p = new ChunkPlayer();
    player.current = p;
    setError(null);
    setPhase('connecting');
    const figures: Figures = { firstAudioMs: null, connectMs: null, seconds: 0, chunks: 0 };
    setFigures(null);
    const asked = performance.now();
    let minted: { token: string; websocketUrl: string };
    try {
      minted = await mint.mutateAsync();
    } catch (e) {
      setPhase('idle');
      return setError(errorMessage(e));
    }
    const ws = new WebSocket(`${minted.websocketUrl}?${new URLSearchParams({ access_token: minted.token, cartesia_version: CARTESIA_VERSION })}`);
    socket.current = ws;
    let sentAt = 0;
    let finished = false;
    ws.onopen = () => {
      figures.connectMs = performance.now() - asked;
      sentAt = performance.now();
      ws.send(JSON.stringify(message));
      setPhase('streaming');
      setFigures({ ...figures });
    };
    ws.onmessage = (m) => {
      if (socket.current !== ws || typeof m.data !== 'string') return;
      const event = JSON.parse(m.data) as { type?: string; data?: string; message?: string; error?: string };
      if (event.type === 'chunk' && event.data) {
        if (figures.firstAudioMs === null) figures.firstAudioMs = performance.now() - sentAt;
        figures.seconds += p.play(event.data);
        figures.chunks++;
        setFigures({ ...figures });
      } else if (event.type === 'done') {
        finished = true;
        setPhase('done');
        end();
      } else if (event.type === 'error') {
        finished = true;
        setError(event.message ?? event.error ?? 'The gateway reported an error.');
        setPhase('idle');
        end();
      }
    };
    ws.onclose = (e) => {
      // Closed by the page (done, Stop, a new take) or after an error event: nothing more to say.
      if (socket.current !== ws || finished) return;
      socket.current = null;
      setPhase('idle');
      // Refused before the upgrade (no credit, a limit): the browser is told nothing more than that.
      setError(
        e.code === 1006
          ? 'The gateway refused or dropped the connection (no credit left, a rate limit, or the gateway is unreachable).'
          : `The socket closed: ${e.reason || e.code}.`,
      );
    };
  }

  function stop() {
    const ws = socket.current;
    if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ context_id: 'playground', cancel: true }));
    socket.current = null;
    ws?.close(1000);
    player.current?.close();
    player.current = null;
    setPhase('idle');
  }

  const chars = [...text].length;
  const busy = phase === 'connecting' || phase === 'streaming';
  const why =
    models.isPending || (model && voices.isPending)
      ? 'Loading the models and voices…'
      : !model
        ? 'No TTS model is available.'
        : !voice
          ? 'No voice is ready for this model: pick another model, or prepare a voice for it on the Voices page.'
          : text.trim() === ''
            ? 'Enter some text to speak.'
            : chars > MAX_CHARS
              ? `The text is over ${MAX_CHARS.toLocaleString('en')} characters.`
              : null;
  const wsBase = `${gatewayUrl.replace(/^http/, 'ws')}/tts/websocket`;
  const code: CodeRequest | null = model ? { kind: 'tts-socket', url: wsBase, sseUrl: `${gatewayUrl}/tts/sse`, message, saveAs: 'speech.pcm' } : null;

  if (models.isError)
    return (
      <Alert title="Could not load the models" onRetry={() => void models.refetch()}>
        {errorMessage(models.error)}
      </Alert>
    );
  return (
    <Card
      title="Streaming speech"
      description="Speak text over the gateway's /tts/websocket (Cartesia's protocol) and hear it as it arrives. The page opens the socket with a 60-second access token, never a key. Billed per character."
    >
      <form
        aria-label="Stream speech"
        className="grid gap-4 sm:grid-cols-2"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (!why && !busy) void speak();
        }}
      >
        <SelectField label="TTS model" value={model} onChange={(e) => setModelId(e.target.value)} disabled={busy || !models.data?.length}>
          {models.data?.map((m) => (
            <option key={m.id} value={m.id}>
              {m.id}
              {m.displayName ? ` — ${m.displayName}` : ''}
            </option>
          ))}
        </SelectField>
        <SelectField label="Voice" value={voice} onChange={(e) => setVoiceId(e.target.value)} disabled={busy || !voices.data?.length}>
          {voices.data?.length ? (
            voices.data.map((v) => (
              <option key={v.id} value={v.id}>
                {v.name} ({v.language})
              </option>
            ))
          ) : (
            <option value="">{voices.isPending ? 'Loading voices…' : 'No voice is ready for this model'}</option>
          )}
        </SelectField>
        <TextAreaField label="Text" value={text} onChange={(e) => setText(e.target.value)} rows={3} className="sm:col-span-2" disabled={busy} />
        <div className="flex flex-wrap items-center gap-3 sm:col-span-2">
          {busy ? (
            <Button variant="secondary" onClick={stop}>
              Stop
            </Button>
          ) : (
            <ReasonButton type="submit" reason={why}>
              Speak
            </ReasonButton>
          )}
          <span className="text-sm text-zinc-600" data-testid="stream-status" data-phase={phase} aria-live="polite">
            {phase === 'connecting' ? 'Connecting…' : phase === 'streaming' ? 'Playing as it arrives…' : phase === 'done' ? 'Done.' : ''}
          </span>
        </div>
      </form>
      {error && (
        <div className="mt-4">
          <Alert title="Streaming failed">{error}</Alert>
        </div>
      )}
      {figures && (
        <dl className="mt-5 grid grid-cols-2 gap-3 border-t border-zinc-100 pt-4 text-sm sm:grid-cols-3" data-testid="stream-figures">
          <div>
            <dt className="text-zinc-500">Time to first audio</dt>
            <dd className="font-mono font-semibold text-zinc-900" data-testid="first-audio-ms" data-ms={figures.firstAudioMs ?? undefined}>
              {figures.firstAudioMs === null ? '—' : `${Math.round(figures.firstAudioMs)} ms`}
            </dd>
          </div>
          <div>
            <dt className="text-zinc-500">Audio received</dt>
            <dd className="font-mono text-zinc-900" data-testid="stream-seconds" data-seconds={figures.seconds.toFixed(2)}>
              {figures.seconds.toFixed(1)} s in {figures.chunks} {figures.chunks === 1 ? 'chunk' : 'chunks'}
            </dd>
          </div>
          <div>
            <dt className="text-zinc-500">Token and connection</dt>
            <dd className="font-mono text-zinc-900">{figures.connectMs === null ? '—' : `${Math.round(figures.connectMs)} ms`}</dd>
          </div>
        </dl>
      )}
      <CopyAsCode request={code} section="Streaming speech" />
    </Card>
  );
}
