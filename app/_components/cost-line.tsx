import { usd } from '@/app/_lib/format';
import type { Charge } from '@/app/_lib/gateway';

/** What a metered call through the proxy cost and the credit left, from its x-svc-* headers. */
export function CostLine({ charge }: { charge: Charge }) {
  return (
    <p className="text-sm text-zinc-700" data-testid="request-cost">
      Cost <span className="font-mono font-semibold">{charge.costUsd ? usd(charge.costUsd) : '—'}</span>
      {charge.remainingUsd && (
        <>
          {' '}
          · credits left <span className="font-mono">{usd(charge.remainingUsd)}</span>
        </>
      )}
    </p>
  );
}
