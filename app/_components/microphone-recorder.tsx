'use client';
// Recording from the microphone in the page, for the forms that take a recording (Transcribe,
// Clone): MediaRecorder records (off the main thread, so a busy page loses nothing), an
// AnalyserNode feeds the level meter; on Stop the take is decoded, mixed to mono, resampled to
// `sampleRate` and handed over as a 16-bit WAV file, the format those routes read.
import { useEffect, useRef, useState } from 'react';
import { encodeWav16, levelPercent } from '@/app/_lib/wav';
import { microphoneProblem, useMicrophonePermission } from '@/app/_lib/use-microphone-permission';
import { Button } from './button';
import { ReasonButton } from './reason-button';

type Phase = 'idle' | 'starting' | 'recording' | 'encoding';

interface Take {
  stream: MediaStream;
  context: AudioContext;
  recorder: MediaRecorder;
  chunks: Blob[];
  startedAt: number;
  frame: number;
}

/** Puts `file` in a file input, as if it had been chosen there (its form then sends it as it sends any file). */
export function putFileInInput(input: HTMLInputElement, file: File): void {
  const transfer = new DataTransfer();
  transfer.items.add(file);
  input.files = transfer.files;
}

const closeContext = (t: Take) => void t.context.close().catch(() => undefined);

const clock = (seconds: number) => `${Math.floor(seconds / 60)}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;

export function MicrophoneRecorder({
  onRecorded,
  sampleRate,
  minSeconds = 0,
  maxSeconds = 300,
  disabledReason = null,
}: {
  onRecorded: (file: File, seconds: number) => void;
  /** The WAV's rate: 16 kHz is what recognizers read, 24 kHz keeps more of a voice to clone. */
  sampleRate: number;
  /** Said while recording until reached (a clone needs 10 s). */
  minSeconds?: number;
  /** Recording stops by itself there (a WAV of 5 min at 24 kHz is 14 MB, under the 25 MB uploads). */
  maxSeconds?: number;
  disabledReason?: string | null;
}) {
  const permission = useMicrophonePermission();
  const [phase, setPhase] = useState<Phase>('idle');
  const [level, setLevel] = useState(0);
  const [seconds, setSeconds] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [result, setResult] = useState<{ url: string; seconds: number } | null>(null);
  const take = useRef<Take | null>(null);

  // Leaving the page mid-take releases the microphone.
  useEffect(
    () => () => {
      const t = take.current;
      take.current = null;
      if (!t) return;
      cancelAnimationFrame(t.frame);
      for (const track of t.stream.getTracks()) track.stop();
      // A recorder still running ends in finish(), which closes the context.
      if (t.recorder.state !== 'inactive') t.recorder.stop();
      else closeContext(t);
    },
    [],
  );
  useEffect(() => () => void (result && URL.revokeObjectURL(result.url)), [result]);

  async function start() {
    setError(null);
    setPhase('starting');
    let stream: MediaStream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true } });
    } catch (e) {
      setPhase('idle');
      return setError(`The microphone could not be opened: ${(e as Error).message}`);
    }
    if (typeof MediaRecorder === 'undefined') {
      for (const track of stream.getTracks()) track.stop();
      setPhase('idle');
      return setError('This browser cannot record audio (no MediaRecorder).');
    }
    const context = new AudioContext();
    const analyser = context.createAnalyser();
    analyser.fftSize = 2048;
    context.createMediaStreamSource(stream).connect(analyser);
    const recorder = new MediaRecorder(stream);
    const t: Take = { stream, context, recorder, chunks: [], startedAt: performance.now(), frame: 0 };
    recorder.ondataavailable = (e) => {
      if (e.data.size > 0) t.chunks.push(e.data);
    };
    recorder.onstop = () => void finish(t);
    recorder.start(250);
    take.current = t;
    setResult(null);
    setSeconds(0);
    setLevel(0);
    setPhase('recording');
    // The meter and the clock follow the screen's frames, repainted ~12 times a second.
    const block = new Float32Array(analyser.fftSize);
    let painted = 0;
    const tick = (now: number) => {
      if (take.current !== t) return;
      const elapsed = (now - t.startedAt) / 1000;
      if (now - painted >= 80) {
        painted = now;
        analyser.getFloatTimeDomainData(block);
        setLevel(levelPercent(block));
        setSeconds(Math.max(0, elapsed));
      }
      if (elapsed >= maxSeconds) return stop();
      t.frame = requestAnimationFrame(tick);
    };
    t.frame = requestAnimationFrame(tick);
  }

  function stop() {
    const t = take.current;
    if (!t || t.recorder.state === 'inactive') return;
    cancelAnimationFrame(t.frame);
    setPhase('encoding');
    t.recorder.stop();
  }

  async function finish(t: Take) {
    for (const track of t.stream.getTracks()) track.stop();
    if (take.current !== t) return closeContext(t); // the page went away
    take.current = null;
    try {
      const decoded = await t.context.decodeAudioData(await new Blob(t.chunks, { type: t.recorder.mimeType }).arrayBuffer());
      // One channel at the asked rate: the offline context mixes down and resamples.
      const offline = new OfflineAudioContext(1, Math.max(1, Math.ceil(decoded.duration * sampleRate)), sampleRate);
      const source = offline.createBufferSource();
      source.buffer = decoded;
      source.connect(offline.destination);
      source.start();
      const rendered = await offline.startRendering();
      const file = new File([encodeWav16(rendered.getChannelData(0), sampleRate)], 'recording.wav', { type: 'audio/wav' });
      setResult({ url: URL.createObjectURL(file), seconds: rendered.duration });
      onRecorded(file, rendered.duration);
    } catch (e) {
      setError(`The recording could not be read: ${(e as Error).message}`);
    } finally {
      closeContext(t);
      setLevel(0);
      setPhase('idle');
    }
  }

  const why = disabledReason ?? microphoneProblem(permission);
  return (
    <div className="space-y-2 rounded-md border border-dashed border-zinc-300 p-3" data-testid="microphone-recorder" data-phase={phase}>
      <div className="flex flex-wrap items-center gap-3">
        {phase === 'recording' || phase === 'encoding' ? (
          <Button variant="secondary" onClick={stop} pending={phase === 'encoding'}>
            {phase === 'encoding' ? 'Preparing the file…' : 'Stop recording'}
          </Button>
        ) : (
          <ReasonButton variant="secondary" onClick={() => void start()} pending={phase === 'starting'} reason={why}>
            {result ? 'Record again' : 'Record from the microphone'}
          </ReasonButton>
        )}
        {phase === 'recording' && (
          <>
            <div
              role="meter"
              aria-label="Microphone level"
              aria-valuemin={0}
              aria-valuemax={100}
              aria-valuenow={level}
              data-testid="mic-level"
              className="h-2.5 w-32 overflow-hidden rounded-full bg-zinc-200 sm:w-48"
            >
              <div className={`h-full ${level > 90 ? 'bg-red-500' : level > 70 ? 'bg-amber-500' : 'bg-emerald-500'}`} style={{ width: `${level}%` }} />
            </div>
            <span className="font-mono text-sm text-zinc-700 tabular-nums" data-testid="mic-elapsed" data-seconds={seconds.toFixed(1)}>
              {clock(seconds)}
            </span>
          </>
        )}
      </div>
      {phase === 'recording' && (
        <p className="text-xs text-zinc-600" aria-live="polite">
          {seconds < minSeconds ? `Recording… keep going: at least ${minSeconds} s are needed.` : 'Recording… press Stop when you are done.'}
        </p>
      )}
      {result && phase === 'idle' && (
        <div className="space-y-1" data-testid="mic-take">
          <p className="text-xs text-zinc-600">Recorded {result.seconds.toFixed(1)} s: it is the file above, sent as recording.wav.</p>
          <audio controls src={result.url} className="w-full" aria-label="Your recording" />
        </div>
      )}
      {error && (
        <p className="text-sm text-red-700" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}
