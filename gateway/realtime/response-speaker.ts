// The speech of one /v1/realtime response (response-run.ts): its text spoken as it arrives by
// the one span speaker (gateway/tts/span-speaker.ts), each span paid for before its engine
// starts; the response's abort stops it at once.
import type { CreditHold } from '../core/gateway-core.ts';
import { SpanCredit } from '../tts/span-credit.ts';
import { SpanSpeaker } from '../tts/span-speaker.ts';
import type { ResponseEngines } from './engines.ts';
import type { ResponseHost, ResponseRun } from './response-run.ts';
import { FORMAT_AUDIO } from './session-config.ts';

/** Words waiting this long without a sentence's end are spoken anyway. */
const SPAN_DELAY_MS = 300;

export function responseSpeaker(
  run: ResponseRun,
  host: ResponseHost,
  tts: NonNullable<ResponseEngines['tts']>,
  hold: CreditHold,
  signal: AbortSignal,
): SpanSpeaker {
  const { ctx, auth, requestId } = host;
  const speaker = new SpanSpeaker({
    ctx,
    model: tts.model,
    voice: tts.voice,
    language: tts.language,
    speed: tts.speed,
    output: { container: 'raw', ...FORMAT_AUDIO[tts.format] },
    route: 'realtime',
    credit: new SpanCredit({
      ctx,
      auth,
      requestId,
      hold,
      refusal: () => hold.refusal("The organization's credit does not cover the answer's speech; add credits to continue."),
      onBalance: (remaining) => host.onBalance(remaining),
    }),
    failover: { ref: { orgId: auth.orgId, requestId }, log: host.log },
    cutting: { delayMs: SPAN_DELAY_MS, wholeAfterDelay: false, joinUpToChars: 0, trim: true },
    sink: {
      started: (span) => {
        run.usage.ttsCharacters += span.characters;
        run.usage.ttsMicros += span.costMicros;
        void run.spoke(span.text, Buffer.alloc(0), 0);
      },
      audio: (chunk, ms) => run.spoke('', chunk, ms),
    },
    around: (span, speak) => run.traced('realtime.tts', { 'svc.model': tts.model.id, 'svc.characters': span.characters }, speak),
  });
  if (signal.aborted) speaker.cancel();
  else signal.addEventListener('abort', () => speaker.cancel(), { once: true });
  return speaker;
}
