import type { Metadata } from 'next';
import { Suspense } from 'react';
import { LoadingBlock } from '@/app/_components/spinner';
import { LogsView } from './logs-view';

export const metadata: Metadata = { title: 'Logs' };

export default function LogsPage() {
  // The filters live in the URL (useSearchParams), read on the client.
  return (
    <Suspense fallback={<LoadingBlock label="Loading logs" lines={6} />}>
      <LogsView />
    </Suspense>
  );
}
