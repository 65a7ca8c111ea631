import type { Config } from '../../server/config/env.ts';
import type { Database } from '../../server/db/database.ts';
import { openRequestLogStore } from '../../server/db/request-log-store-open.ts';
import type { GatewayMetrics } from '../metrics/gateway-metrics.ts';
import { RequestLog } from './request-log.ts';

/** The process's request log on its own connection to the database; undefined when SVC_REQUEST_LOG=off. */
export function createRequestLog(config: Config, db: Pick<Database, 'prisma'>, metrics: GatewayMetrics): RequestLog | undefined {
  if (!config.requestLog) return undefined;
  return new RequestLog(openRequestLogStore(config.databaseUrl), db.prisma, config.requestLog, metrics.registry);
}
