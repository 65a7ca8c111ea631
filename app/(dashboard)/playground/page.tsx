import type { Metadata } from 'next';
import { PageHeader } from '@/app/_components/card';
import { loadConfig } from '@/server/config/env';
import { Chat } from './chat';
import { LocalEnginesNote } from './local-engines-note';
import { StreamSpeech } from './stream-speech';
import { Synthesize } from './synthesize';
import { Transcribe } from './transcribe';

export const metadata: Metadata = { title: 'Playground' };

export default async function PlaygroundPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { voice } = await searchParams;
  const initialVoiceId = typeof voice === 'string' && /^[A-Za-z0-9_-]{1,100}$/.test(voice) ? voice : null;
  // Where API clients reach the gateway: what "Copy as code" writes.
  const gatewayUrl = loadConfig().publicBaseUrl;
  return (
    <>
      <PageHeader
        title="Playground"
        description="Chat with an LLM, synthesize and stream speech, and transcribe recordings with your organization's credit. The dashboard calls the gateway with your organization's “Dashboard (playground)” key; “Copy as code” under each section gives the same request for your own key."
      />
      <div className="space-y-6">
        <LocalEnginesNote />
        <Chat gatewayUrl={gatewayUrl} />
        <Synthesize initialVoiceId={initialVoiceId} gatewayUrl={gatewayUrl} />
        <StreamSpeech gatewayUrl={gatewayUrl} />
        <Transcribe gatewayUrl={gatewayUrl} />
      </div>
    </>
  );
}
