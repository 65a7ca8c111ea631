'use client';
// Hearing a voice where it is browsed: a Play button on each library card and on a voice's page.
// It plays the voice's preview on a model (GET /voices/{id}/preview through the dashboard's
// gateway proxy): a fixed sentence in the voice's language, made once by the gateway's preview
// worker and served from storage, free — it plays at a $0 balance too. A preview still being made
// (a voice just cloned) is asked for again every few seconds for a minute, the button spinning
// meanwhile. Each take is kept for the page's lifetime. One <audio> element for the whole page:
// starting a sample stops the one playing.
import { createContext, useCallback, useContext, useEffect, useRef, useState } from 'react';
import { Spinner } from '@/app/_components/spinner';
import type { Voice } from '@/app/_lib/api-types';
import { errorMessage } from '@/app/_lib/format';
import { GatewayError, gatewayFetch } from '@/app/_lib/gateway';

/** A preview being made is asked for again after this long, this many times (a minute in all). */
const NOT_READY_RETRY_MS = 2_000;
const NOT_READY_TRIES = 30;

/** What a sample needs of a voice, whether it comes from the library list or a voice's page. */
export type SampleVoice = Pick<Voice, 'id' | 'name'>;

type State = { kind: 'idle' } | { kind: 'loading'; key: string } | { kind: 'playing'; key: string } | { kind: 'error'; key: string; message: string };

interface Samples {
  state: State;
  toggle(voice: SampleVoice, modelId: string): void;
}

const SamplesContext = createContext<Samples | null>(null);

const keyOf = (voiceId: string, modelId: string) => `${voiceId}|${modelId}`;

/** The page's one sample player; Play buttons below it share it. */
export function VoiceSamplesProvider({ children }: { children: React.ReactNode }) {
  const audio = useRef<HTMLAudioElement>(null);
  const takes = useRef(new Map<string, string>());
  const [state, setState] = useState<State>({ kind: 'idle' });
  // The request of the latest click; an older one that answers late is dropped.
  const latest = useRef<AbortController | null>(null);

  useEffect(() => {
    const urls = takes.current;
    return () => {
      latest.current?.abort();
      for (const url of urls.values()) URL.revokeObjectURL(url);
    };
  }, []);

  const toggle = useCallback(
    (voice: SampleVoice, modelId: string) => {
      const el = audio.current;
      if (!el) return;
      const key = keyOf(voice.id, modelId);
      if ((state.kind === 'playing' || state.kind === 'loading') && state.key === key) {
        latest.current?.abort();
        el.pause();
        setState({ kind: 'idle' });
        return;
      }
      latest.current?.abort();
      el.pause();
      const play = (url: string) => {
        el.src = url;
        el.currentTime = 0;
        void el.play().catch((e: unknown) => {
          if ((e as Error).name !== 'AbortError') setState({ kind: 'error', key, message: 'This browser would not play the sample.' });
        });
      };
      const cached = takes.current.get(key);
      setState({ kind: 'loading', key });
      if (cached) return play(cached);
      const controller = new AbortController();
      latest.current = controller;
      void (async () => {
        try {
          const res = await fetchPreview(voice.id, modelId, controller.signal);
          const url = URL.createObjectURL(new Blob([await res.arrayBuffer()], { type: res.headers.get('content-type') ?? 'audio/wav' }));
          takes.current.set(key, url);
          if (!controller.signal.aborted) play(url);
        } catch (e) {
          if (controller.signal.aborted) return;
          setState({ kind: 'error', key, message: errorMessage(e) });
        }
      })();
    },
    [state],
  );

  return (
    <SamplesContext.Provider value={{ state, toggle }}>
      {children}
      {/* Not shown: each Play button is the control. The state follows what the element does. */}
      <audio
        ref={audio}
        hidden
        preload="none"
        data-testid="voice-sample-audio"
        onPlaying={() => setState((s) => (s.kind === 'loading' ? { kind: 'playing', key: s.key } : s))}
        onEnded={() => setState({ kind: 'idle' })}
        onError={() => setState((s) => (s.kind === 'loading' ? { kind: 'error', key: s.key, message: 'This browser could not play the sample.' } : s))}
      />
    </SamplesContext.Provider>
  );
}

/**
 * Play / Stop for one voice on one model; `modelId` null: the voice has no ready profile, so
 * there is nothing it can say (the button says why).
 */
export function PlaySampleButton({
  voice,
  modelId,
  label,
  compact = false,
  className = '',
}: {
  voice: SampleVoice;
  modelId: string | null;
  label?: string;
  compact?: boolean;
  className?: string;
}) {
  const samples = useContext(SamplesContext);
  if (!samples) throw new Error('PlaySampleButton needs a VoiceSamplesProvider');
  const key = modelId ? keyOf(voice.id, modelId) : '';
  const { state } = samples;
  const mine = state.kind !== 'idle' && state.key === key;
  const status = mine ? state.kind : 'idle';
  const text = status === 'playing' ? 'Stop' : (label ?? 'Play');
  return (
    <span className={`inline-flex max-w-full min-w-0 flex-col items-start gap-1 ${className}`}>
      <button
        type="button"
        disabled={!modelId}
        title={modelId ? `The voice's preview on ${modelId} (free)` : 'No ready profile: this voice cannot speak on any model yet'}
        aria-label={`${status === 'playing' ? 'Stop' : 'Play'} a sample of ${voice.name}${modelId ? ` on ${modelId}` : ''}`}
        aria-pressed={status === 'playing'}
        data-testid="play-sample"
        data-state={status}
        onClick={() => modelId && samples.toggle(voice, modelId)}
        className={`inline-flex ${compact ? 'min-h-8' : 'min-h-10'} items-center gap-1.5 rounded-md bg-indigo-50 px-3 py-1 text-sm font-semibold text-indigo-700 ring-1 ring-indigo-200 ring-inset hover:bg-indigo-100 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600 disabled:cursor-not-allowed disabled:bg-zinc-50 disabled:text-zinc-400 disabled:ring-zinc-200`}
      >
        {status === 'loading' ? <Spinner className="size-3.5" /> : status === 'playing' ? <StopIcon /> : <PlayIcon />}
        {text}
      </button>
      {mine && state.kind === 'error' && (
        // Wraps within the card: a long message never widens it.
        <span role="alert" className="max-w-full text-xs break-words text-red-700" data-testid="play-sample-error">
          {state.message}
        </span>
      )}
    </span>
  );
}

/** The preview through the proxy; one still being made is asked for again, for a minute at most. */
async function fetchPreview(voiceId: string, modelId: string, signal: AbortSignal): Promise<Response> {
  const path = `voices/${encodeURIComponent(voiceId)}/preview?model_id=${encodeURIComponent(modelId)}`;
  for (let tries = 1; ; tries++) {
    try {
      return await gatewayFetch(path, { signal });
    } catch (e) {
      if (!(e instanceof GatewayError && e.code === 'preview_not_ready') || signal.aborted) throw e;
      if (tries >= NOT_READY_TRIES) throw new GatewayError('The preview of this voice is still being made. Try again in a minute.', e.status, e.code);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, NOT_READY_RETRY_MS);
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
      if (signal.aborted) throw e;
    }
  }
}

function PlayIcon() {
  return (
    <svg viewBox="0 0 16 16" className="size-3.5" aria-hidden="true" fill="currentColor">
      <path d="M4 2.5v11a.5.5 0 0 0 .76.43l9-5.5a.5.5 0 0 0 0-.86l-9-5.5A.5.5 0 0 0 4 2.5Z" />
    </svg>
  );
}

function StopIcon() {
  return (
    <svg viewBox="0 0 16 16" className="size-3.5" aria-hidden="true" fill="currentColor">
      <rect x="3.5" y="3.5" width="9" height="9" rx="1" />
    </svg>
  );
}
