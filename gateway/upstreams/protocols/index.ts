// The registry of upstream protocols: one definition per module, nothing else to edit to add one
// (docs/adding-a-protocol.md). An upstream's `protocol` names one of these; a model's modality
// needs the capability below, checked when the upstream is registered (`svc model upsert`, the
// seed file), so a typo is refused there rather than found as a 502 at request time.
import { offers, type Capability, type EngineConfig, type Protocol, type ProtocolRuntime } from '../contract.ts';
import { cartesia } from './cartesia/index.ts';
import { deepgram } from './deepgram.ts';
import { elevenlabs } from './elevenlabs.ts';
import { llamaCpp } from './llama-cpp.ts';
import { espeakNg, flite } from './local-tts.ts';
import { openai } from './openai.ts';
import { openaiRealtime } from './openai-realtime/index.ts';
import { pocketsphinx } from './pocketsphinx.ts';

export const PROTOCOLS: readonly Protocol[] = [openai, llamaCpp, flite, espeakNg, pocketsphinx, openaiRealtime, deepgram, cartesia, elevenlabs];

type Modality = 'llm' | 'tts' | 'stt';

/** What a model of each modality needs from its upstreams' protocol (any one of them). */
const NEEDS: Record<Modality, readonly Capability[]> = {
  llm: ['chat'],
  tts: ['speech'],
  stt: ['transcription', 'streaming_transcription'],
};

const byName = new Map(PROTOCOLS.map((p) => [p.name, p]));

export const protocolNamed = (name: string): Protocol | undefined => byName.get(name);

const fits = (p: Protocol, modality: Modality) => NEEDS[modality].some((c) => offers(p, c));

/** The protocols that can serve a modality, for messages and help. */
export const protocolsFor = (modality: Modality): string[] => PROTOCOLS.filter((p) => fits(p, modality)).map((p) => p.name);

export type ProtocolCheck = { ok: true; settings: Record<string, unknown> } | { ok: false; message: string; param: string };

/** Whether an upstream may be registered with this protocol and settings for a model of this modality. */
export function checkProtocol(name: string, modality: Modality, settings: unknown): ProtocolCheck {
  const protocol = byName.get(name);
  const fitting = protocolsFor(modality).join(', ');
  if (!protocol) return { ok: false, message: `Unknown protocol ${JSON.stringify(name)}; a ${modality} model can use: ${fitting}.`, param: 'protocol' };
  if (!fits(protocol, modality)) {
    return {
      ok: false,
      message: `Protocol '${name}' cannot serve a ${modality} model (it has ${protocol.capabilities.join(', ')}); a ${modality} model can use: ${fitting}.`,
      param: 'protocol',
    };
  }
  const parsed = protocol.settings.safeParse(settings ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || 'settings'}: ${i.message}`).join('; ');
    return { ok: false, message: `Invalid settings for protocol '${name}': ${issues}.`, param: 'settings' };
  }
  return { ok: true, settings: parsed.data };
}

/** The protocols as this process runs them (created once, with the process's engine settings). */
export class ProtocolRuntimes {
  private readonly runtimes = new Map<string, ProtocolRuntime>();
  constructor(private readonly engines: EngineConfig) {}

  get(name: string): ProtocolRuntime | undefined {
    let runtime = this.runtimes.get(name);
    if (!runtime) {
      const definition = byName.get(name);
      if (!definition) return undefined;
      this.runtimes.set(name, (runtime = definition.create(this.engines)));
    }
    return runtime;
  }
}
