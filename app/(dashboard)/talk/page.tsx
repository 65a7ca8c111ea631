import type { Metadata } from 'next';
import { PageHeader } from '@/app/_components/card';
import { Talk } from './talk';

export const metadata: Metadata = { title: 'Talk' };

export default function TalkPage() {
  return (
    <>
      <PageHeader
        title="Talk"
        description="Talk to a realtime profile through your microphone. The page holds a short-lived client secret the dashboard mints with your organization's “Dashboard (playground)” key, never a key."
      />
      <Talk />
    </>
  );
}
