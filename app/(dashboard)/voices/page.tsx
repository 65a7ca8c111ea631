import type { Metadata } from 'next';
import { PageHeader } from '@/app/_components/card';
import { CloneVoice } from './clone-voice';
import { VoicesBrowser } from './voices-browser';

export const metadata: Metadata = { title: 'Voices' };

export default function VoicesPage() {
  return (
    <>
      <PageHeader title="Voices" description="Browse the voice library, clone a voice from a recording, and manage your own voices." />
      <div className="space-y-6">
        <CloneVoice />
        <VoicesBrowser />
      </div>
    </>
  );
}
