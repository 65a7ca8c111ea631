// `cartesia`: the Cartesia API (`url` = https://api.cartesia.ai; sockets on the same host over
// ws/wss). Speech (Sonic, /tts/bytes as raw 16-bit PCM), transcription in batch (/stt) and live
// over the manual-finalize socket (/stt/websocket, Ink), instant cloning and the voice catalogue.
// Every request carries `Authorization: Bearer <key>` and `Cartesia-Version: <settings.version>`.
// No chat.
//
// Reference (read 2026-11-27), and the official SDK @cartesia/cartesia-js 4.2.0 (src/resources/
// tts.ts, stt/stt.ts, stt/manual-finalize/*, voices.ts, core/pagination.ts):
//   https://docs.cartesia.ai/use-the-api/api-conventions        (Bearer auth, Cartesia-Version)
//   https://docs.cartesia.ai/use-the-api/api-errors             ({error_code,title,message,request_id})
//   https://docs.cartesia.ai/api-reference/tts/bytes
//   https://docs.cartesia.ai/api-reference/stt/websocket        (Realtime STT, manual finalize)
//   https://docs.cartesia.ai/2024-11-13/api-reference/stt/stt   (idle sockets closed after 20 s)
//   https://docs.cartesia.ai/api-reference/stt/transcribe       (batch, as the SDK links it)
//   https://docs.cartesia.ai/2026-03-01/api-reference/voices/clone
//   https://docs.cartesia.ai/build-with-cartesia/capability-guides/clone-voices
//   https://docs.cartesia.ai/2024-11-13/api-reference/voices/list (limit, starting_after)
//   https://docs.cartesia.ai/build-with-cartesia/capability-guides/phonemes
//   github.com/livekit/agents livekit-plugins-cartesia (_recognize_streams/flush_finalize_recognize_stream.py)
// Choices the reference decided:
// - Speed is `generation_config.speed` (0.6-1.5; the top-level `speed` enum is deprecated).
// - Clones take `clip`, `name`, `language`; `mode` only for versions up to 2024-11-13.
// - Health is `GET /voices?limit=1`: cheap, and it needs the key, so a revoked key shows as down
//   (the API status `GET /` says only that the service is up).
import { defineProtocol } from '../../contract.ts';
import { checkHttpHealth } from '../../engine-http.ts';
import { clone, speech, transcription, voiceCatalogue } from './rest.ts';
import { streamingTranscription } from './stt-stream.ts';
import { cartesiaHeaders, settings } from './wire.ts';

export const cartesia = defineProtocol({
  name: 'cartesia',
  summary: 'the Cartesia API: /tts/bytes (Sonic), /stt and the /stt/websocket stream (Ink), /voices/clone, /voices',
  settings,
  capabilities: ['speech', 'transcription', 'streaming_transcription', 'clone', 'voice_catalogue'],
  create: () => ({
    health: (target, signal) => checkHttpHealth(target.url, '/voices?limit=1', cartesiaHeaders(target), signal, target.apiKey),
    speech,
    transcription,
    streamingTranscription,
    clone,
    voiceCatalogue,
  }),
});
