import type { Metadata } from 'next';
import { PageHeader } from '@/app/_components/card';
import { Synthesize } from './synthesize';
import { Transcribe } from './transcribe';

export const metadata: Metadata = { title: 'Playground' };

export default async function PlaygroundPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { voice } = await searchParams;
  const initialVoiceId = typeof voice === 'string' && /^[A-Za-z0-9_-]{1,100}$/.test(voice) ? voice : null;
  return (
    <>
      <PageHeader
        title="Playground"
        description="Try text to speech and speech to text with your organization's credit. The dashboard calls the gateway with your organization's “Dashboard (playground)” key."
      />
      <div className="space-y-6">
        <Synthesize initialVoiceId={initialVoiceId} />
        <Transcribe />
      </div>
    </>
  );
}
