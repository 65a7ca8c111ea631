// An org's request-log settings (docs/logs.md, "Content"): whether the text of its requests and
// answers is kept with its rows (never audio), and how many days its rows are kept (never more
// than the gateway's SVC_LOG_RETENTION_DAYS). Gateways pick a change up within seconds.
import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

export interface LogSettings {
  logContent: boolean;
  /** null: the gateway's retention. */
  logRetentionDays: number | null;
}

export const LogSettingsInput = z.strictObject({
  logContent: z.boolean().optional(),
  logRetentionDays: z.number().int().min(1).max(3650).nullable().optional(),
});

export async function getLogSettings(prisma: Prisma, orgId: string): Promise<LogSettings> {
  const org = await prisma.org.findUnique({ where: { id: orgId }, select: { logContent: true, logRetentionDays: true } });
  if (!org) throw new ServiceError('not_found', 'No such organization.');
  return org;
}

/** `maxRetentionDays`: the gateway's SVC_LOG_RETENTION_DAYS; an org may keep its rows for less, not more. */
export async function updateLogSettings(
  prisma: Prisma,
  orgId: string,
  input: z.infer<typeof LogSettingsInput>,
  maxRetentionDays: number,
): Promise<LogSettings> {
  if (input.logRetentionDays != null && input.logRetentionDays > maxRetentionDays) {
    throw new ServiceError(
      'invalid_request',
      `logRetentionDays: must be at most ${maxRetentionDays} (this gateway keeps request logs ${maxRetentionDays} days)`,
      'logRetentionDays',
    );
  }
  return prisma.org.update({ where: { id: orgId }, data: input, select: { logContent: true, logRetentionDays: true } });
}
