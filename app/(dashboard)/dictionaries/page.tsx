import type { Metadata } from 'next';
import { DictionariesManager } from './dictionaries-manager';

export const metadata: Metadata = { title: 'Pronunciation dictionaries' };

export default function DictionariesPage() {
  return <DictionariesManager />;
}
