import Link from 'next/link';
import { GatewayError } from '@/app/_lib/gateway';

/** Under a gateway error: the request id its answer carried, linking to the request's row on the Logs page. */
export function RequestLogLink({ error }: { error: unknown }) {
  if (!(error instanceof GatewayError) || !error.requestId) return null;
  return (
    <span className="mt-1 block text-xs">
      Request <span className="font-mono">{error.requestId}</span> ·{' '}
      <Link href={`/logs?${new URLSearchParams({ request_id: error.requestId })}`} className="font-semibold underline">
        See it in Logs
      </Link>
    </span>
  );
}
