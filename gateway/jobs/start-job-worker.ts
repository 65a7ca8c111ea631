// The job worker of a gateway (or of `svc worker`): voice jobs run with the gateway's engines.
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayContext } from '../context.ts';
import type { Job } from '../../server/services/jobs/job-queue.ts';
import { deleteEngineCopies } from '../../server/services/voices/delete-engine-copies.ts';
import { runVoiceJob } from '../../server/services/voices/run-voice-job.ts';
import { voiceDeps } from '../voices/voice-engines.ts';
import { JobWorker } from './job-worker.ts';

export function startJobWorker(ctx: GatewayContext, log: FastifyBaseLogger): JobWorker {
  const { jobs } = ctx.config;
  const deps = voiceDeps(ctx, null);
  const run = (job: Job, signal: AbortSignal) => (job.kind === 'delete_engine_copies' ? deleteEngineCopies(deps, job, signal) : runVoiceJob(deps, job, signal));
  const worker = new JobWorker(ctx, async (job, signal) => ({ ...(await run(job, signal)) }), {
    pollMs: jobs.pollMs,
    leaseMs: jobs.leaseMs,
    concurrency: jobs.concurrency,
    offlineGiveUpMs: jobs.offlineGiveUpMs,
    log,
  });
  ctx.jobs = worker;
  worker.start();
  return worker;
}
