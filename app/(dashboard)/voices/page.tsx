import type { Metadata } from 'next';
import { VoicesView } from './voices-view';

export const metadata: Metadata = { title: 'Voices' };

export default async function VoicesPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  // Set by a voice's page after it deleted the voice, so this page can confirm it.
  const { deleted } = await searchParams;
  return <VoicesView deletedName={typeof deleted === 'string' ? deleted.slice(0, 100) : null} />;
}
