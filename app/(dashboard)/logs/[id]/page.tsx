import type { Metadata } from 'next';
import { LogDetail } from './log-detail';

export const metadata: Metadata = { title: 'Request log' };

export default async function LogPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  return <LogDetail id={id} />;
}
