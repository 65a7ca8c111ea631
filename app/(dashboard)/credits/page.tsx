import type { Metadata } from 'next';
import { CreditsView } from './credits-view';

export const metadata: Metadata = { title: 'Credits' };

export default function CreditsPage() {
  return <CreditsView />;
}
