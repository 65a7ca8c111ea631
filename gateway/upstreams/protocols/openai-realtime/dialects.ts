// What each server of the Realtime API wants on the wire to open a transcription session: the
// socket URL, headers, the configuration message, and the event that confirms it.
//
// - ga: OpenAI's GA API (developers.openai.com/api/docs/guides/realtime-transcription;
//   the `openai` package's resources/realtime/realtime.d.ts, RealtimeTranscriptionSessionCreateRequest):
//   `wss://…/v1/realtime?intent=transcription` WITHOUT `model` (a model in the URL makes a
//   conversation session that refuses the transcription update), then `session.update`
//   `{type:'transcription', audio:{input:{format, transcription, turn_detection}}}` → `session.updated`.
//   LocalAI speaks the same events (core/http/endpoints/openai/realtime.go) but picks its pipeline
//   from `?model=`: setting `model_in_url`. (LocalAI answers a commit under server VAD with an
//   error, which fails the stream: use it with the gateway's turn detection.)
// - beta: OpenAI's beta events (removed by OpenAI on 2026-05-12; still what some deployments speak):
//   header `OpenAI-Beta: realtime=v1`, `transcription_session.update` `{input_audio_format:'pcm16',
//   input_audio_transcription, turn_detection}` → `transcription_session.updated`.
// - speaches (speaches-ai/speaches src/speaches/routers/realtime_ws.py, realtime/session_event_router.py):
//   `/v1/realtime?model=<transcription model>&intent=transcription` (model is required), and only
//   `session.update` with the beta session fields → `session.updated`. It answers
//   `input_audio_format` and `turn_detection.prefix_padding_ms` with error events, and
//   `input_audio_transcription` has no `prompt`: none of the three is sent. Its VAD times count
//   from the start of its current input buffer, not of the session: word times after its first
//   turn come out early by the audio before that buffer.
// - vllm (docs.vllm.ai: vllm/entrypoints/speech_to_text/realtime/connection.py, protocol.py):
//   `/v1/realtime`, `session.created` on connect, `{type:'session.update', model}` (top-level
//   model; confirmed by nothing, refused by an `error` event), PCM16 at 16 kHz. The session counts
//   as set up once the socket is open: `session.created` says nothing more, and connectEngine
//   resolves after ws has already emitted a message the server sends on accept (it is lost).
import type { StreamingTranscriptionOptions, UpstreamTarget } from '../../contract.ts';
import type { RealtimeSettings } from './settings.ts';

/** OpenAI's only PCM input rate (audio/pcm, pcm16). */
export const OPENAI_PCM_RATE = 24000;
/** vLLM's realtime input rate. */
export const VLLM_PCM_RATE = 16000;

export interface SessionPlan {
  url: string;
  headers: Record<string, string>;
  /** Sent as soon as the socket is open. */
  configure: Record<string, unknown>[];
  /** The server event that means the session is set up as asked; null: set up once the socket is open. */
  readyEvent: string | null;
  /** The rate the engine takes. */
  engineRate: number;
}

/** ISO-639-1, as OpenAI asks (`en-US` → `en`). */
const isoLanguage = (language: string | undefined) => (language ? language.split(/[-_]/)[0]!.toLowerCase() : undefined);

/** The upstream's prompt with the session's key terms after it (OpenAI has no other way to bias words). */
function promptOf(settings: RealtimeSettings, keyterms: string[]): string | undefined {
  const parts = [settings.prompt?.trim(), keyterms.join(', ')].filter((p): p is string => Boolean(p));
  return parts.length ? parts.join(' ') : undefined;
}

function socketUrl(base: string, query: Record<string, string | undefined>): string {
  const url = new URL(`${base.replace(/^http/i, 'ws')}/realtime`);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}

export function sessionPlan(target: UpstreamTarget, settings: RealtimeSettings, options: StreamingTranscriptionOptions): SessionPlan {
  const headers: Record<string, string> = target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {};
  const model = target.upstreamModel;
  const language = isoLanguage(options.language);
  const prompt = promptOf(settings, options.keyterms);
  const vad = {
    type: 'server_vad',
    threshold: settings.vad_threshold,
    prefix_padding_ms: settings.prefix_padding_ms,
    silence_duration_ms: settings.silence_duration_ms,
  };
  const urlModel = settings.model_in_url ? model : undefined;
  switch (settings.dialect) {
    case 'ga':
      return {
        url: socketUrl(target.url, { intent: 'transcription', model: urlModel }),
        headers,
        configure: [
          {
            type: 'session.update',
            session: {
              type: 'transcription',
              audio: {
                input: {
                  format: { type: 'audio/pcm', rate: OPENAI_PCM_RATE },
                  transcription: { model, ...(language ? { language } : {}), ...(prompt ? { prompt } : {}) },
                  turn_detection: options.engineTurns ? vad : null,
                },
              },
            },
          },
        ],
        readyEvent: 'session.updated',
        engineRate: OPENAI_PCM_RATE,
      };
    case 'beta':
      return {
        url: socketUrl(target.url, { intent: 'transcription', model: urlModel }),
        headers: { ...headers, 'openai-beta': 'realtime=v1' },
        configure: [
          {
            type: 'transcription_session.update',
            session: {
              input_audio_format: 'pcm16',
              input_audio_transcription: { model, ...(language ? { language } : {}), ...(prompt ? { prompt } : {}) },
              turn_detection: options.engineTurns ? vad : null,
            },
          },
        ],
        readyEvent: 'transcription_session.updated',
        engineRate: OPENAI_PCM_RATE,
      };
    case 'speaches':
      return {
        url: socketUrl(target.url, { model, intent: 'transcription' }),
        headers,
        configure: [
          {
            type: 'session.update',
            session: {
              input_audio_transcription: { model, ...(language ? { language } : {}) },
              turn_detection: options.engineTurns
                ? { type: 'server_vad', threshold: settings.vad_threshold, silence_duration_ms: settings.silence_duration_ms }
                : null,
            },
          },
        ],
        readyEvent: 'session.updated',
        engineRate: OPENAI_PCM_RATE,
      };
    case 'vllm':
      return {
        url: socketUrl(target.url, {}),
        headers,
        configure: [{ type: 'session.update', model }],
        // A refused model arrives later as an `error` event, which fails the stream.
        readyEvent: null,
        engineRate: VLLM_PCM_RATE,
      };
  }
}
