import type { Metadata } from 'next';
import { VoiceDetail } from './voice-detail';

export const metadata: Metadata = { title: 'Voice' };

export default async function VoicePage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  return <VoiceDetail id={id} />;
}
