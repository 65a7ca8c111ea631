// Async voice jobs: GET /jobs/{id} (the spec), and GET /jobs to list the org's recent jobs.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { getJob, listJobs } from '../../server/services/jobs/job-queue.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import type { GatewayContext } from '../context.ts';

export const JobIdParams = z.object({ id: z.string().min(1).max(100) });
export const ListJobsQuery = z.strictObject({ voice_id: z.string().min(1).max(100).optional(), limit: z.coerce.number().int().min(1).max(100).default(20) });

export function registerJobRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const keyed = { config: { metered: true } };
  app.get('/jobs/:id', keyed, async (request) => {
    const { id } = parseInput(JobIdParams, request.params, { body: false });
    return getJob(ctx.db.prisma, request.auth.orgId, id);
  });
  app.get('/jobs', keyed, async (request) => {
    const query = parseInput(ListJobsQuery, request.query, { body: false });
    return { jobs: await listJobs(ctx.db.prisma, request.auth.orgId, { limit: query.limit, voiceId: query.voice_id }) };
  });
}
