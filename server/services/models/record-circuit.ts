// An upstream whose circuit opened on a gateway (gateway/registry/circuit.ts), told to the
// dashboard and the CLI through the upstream's row: its last error names the open circuit until
// the next health check writes its own verdict (a good one also closes the circuit).
import type { Prisma } from '../../db/database.ts';

/** How the last error of an upstream with an open circuit starts. */
export const CIRCUIT_OPEN_ERROR = 'circuit open';

export async function recordCircuitOpen(prisma: Prisma, upstreamId: string): Promise<void> {
  await prisma.upstream
    .update({ where: { id: upstreamId }, data: { lastError: `${CIRCUIT_OPEN_ERROR}: recent calls failed; new work skips it until a good health check` } })
    .catch(() => {
      // Removed since: nothing to show.
    });
}

export function isCircuitOpen(lastError: string | null): boolean {
  return lastError?.startsWith(CIRCUIT_OPEN_ERROR) ?? false;
}
