// `openai-realtime`: streaming transcription over the OpenAI Realtime API's WebSocket, as served by
// OpenAI (GA), LocalAI (GA events, `model_in_url`), speaches and vLLM (their own dialects):
// dialects.ts says what each one wants. Target `url` is the API base with `/v1`
// (`https://api.openai.com/v1`, `http://speaches:8000/v1`); the socket is `{url}/realtime`.
// References: developers.openai.com/api/docs/guides/realtime-transcription,
// developers.openai.com/api/reference/resources/realtime/client-events and /server-events, the
// `openai` npm package's resources/realtime/realtime.d.ts (6.x), speaches-ai/speaches
// src/speaches/realtime/*, mudler/LocalAI core/http/endpoints/openai/realtime*.go, vLLM's
// vllm/entrypoints/speech_to_text/realtime/{connection,protocol}.py.
import { defineProtocol, type StreamingTranscriptionCapability, type UpstreamTarget } from '../../contract.ts';
import { checkHttpHealth } from '../../engine-http.ts';
import { OPENAI_PCM_RATE, sessionPlan } from './dialects.ts';
import { openLink } from './link.ts';
import { openaiStream } from './openai-stream.ts';
import { realtimeSettings, type RealtimeSettings } from './settings.ts';
import { vllmStream } from './vllm-stream.ts';

const bearer = (target: UpstreamTarget): Record<string, string> => (target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {});

const streamingTranscription: StreamingTranscriptionCapability<RealtimeSettings> = {
  // 24 kHz for every dialect: `engineRate` does not know the upstream, so the vLLM dialect
  // (16 kHz) resamples what it is given itself (as every dialect does for another written rate).
  engineRate: () => OPENAI_PCM_RATE,
  // Server VAD finds turns; vLLM has none (the gateway's turn detection drives finalize()).
  // speaches times its VAD from the start of its current buffer, not the session: its turns would come out early.
  findsTurns: (target) => ['ga', 'beta'].includes(target.settings.dialect),
  async open(target, options) {
    const { settings } = target;
    const plan = sessionPlan(target, settings, options);
    const make = settings.dialect === 'vllm' ? vllmStream : openaiStream;
    return openLink(plan, options, target.apiKey, (link) => make(link, target.apiKey));
  },
};

export const openaiRealtime = defineProtocol({
  name: 'openai-realtime',
  summary: 'streaming transcription over the OpenAI Realtime API (/realtime WebSocket): OpenAI, LocalAI, speaches, vLLM (setting dialect)',
  settings: realtimeSettings,
  capabilities: ['streaming_transcription'],
  create: () => ({
    // Healthy when GET {url}/models answers 2xx.
    health: (target, signal) => checkHttpHealth(target.url, '/models', bearer(target), signal, target.apiKey),
    streamingTranscription,
  }),
});
