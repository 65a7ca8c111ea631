import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { presentRequestLog, presentTurn, type RequestLogRecord, type RequestLogTurnRecord } from './present-request-log.ts';

/** One of the org's log rows with its session's turns (in order); another org's row is not found, as an unknown one is. */
export async function getRequestLog(prisma: Prisma, orgId: string, id: string): Promise<RequestLogRecord & { turns: RequestLogTurnRecord[] }> {
  const row = await prisma.requestLog.findFirst({ where: { id, orgId } });
  if (!row) throw new ServiceError('not_found', `No request log '${id}' in this organization.`, 'id');
  const turns = await prisma.requestLogTurn.findMany({ where: { requestLogId: id, orgId }, orderBy: [{ turnIndex: 'asc' }, { id: 'asc' }] });
  return { ...presentRequestLog(row), turns: turns.map(presentTurn) };
}
