// `svc start` / `svc gateway`: the gateway (with its job worker) in this process and, for
// `start`, the dashboard (`next start`) as a child. SIGTERM/SIGINT: stop accepting at once,
// let in-flight requests and streams run for SVC_SHUTDOWN_GRACE_SECONDS, end the rest cleanly,
// flush metering, close the database, stop the dashboard, exit 0 (docs/operations.md, "Shutdown").
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../server/config/env.ts';
import { createGatewayRuntime } from '../gateway/runtime.ts';
import { PROJECT_ROOT } from '../server/project-root.ts';

export async function runProcesses(options: { dashboard: boolean; workerOnly?: boolean }): Promise<void> {
  const config = loadConfig();
  // `svc worker`: the job worker with the gateway's engines, no HTTP listener.
  if (options.workerOnly) config.jobs.worker = true;
  let dashboard: ChildProcess | undefined;
  if (options.dashboard && !existsSync(join(PROJECT_ROOT, '.next/BUILD_ID'))) {
    throw new Error('the dashboard is not built: run `npm run setup` (or `npm run build`) first');
  }
  const runtime = await createGatewayRuntime(config);
  // Without a listener nothing else keeps the event loop alive (the worker's timers are unref'd).
  const keepAlive = options.workerOnly ? setInterval(() => {}, 60_000) : undefined;
  if (options.workerOnly) runtime.app.log.info('job worker running');
  else await runtime.app.listen({ host: config.gatewayHost, port: config.gatewayPort });
  if (!options.workerOnly)
    runtime.app.log.info(
      { publicBaseUrl: config.publicBaseUrl, database: config.databaseUrl.startsWith('file:') ? 'sqlite' : 'postgresql', redis: Boolean(config.redisUrl) },
      'gateway listening',
    );

  if (options.dashboard) {
    // The dashboard stops when this process goes away, however it ends (SIGKILL, a crash).
    const exitWithParent = join(PROJECT_ROOT, 'cli/exit-with-parent.cjs');
    dashboard = spawn(
      process.execPath,
      ['--require', exitWithParent, join(PROJECT_ROOT, 'node_modules/next/dist/bin/next'), 'start', '-p', String(config.dashboardPort)],
      {
        cwd: PROJECT_ROOT,
        stdio: 'inherit',
        env: { ...process.env, DATABASE_URL: config.databaseUrl, SVC_DATA_DIR: config.dataDir, NODE_ENV: 'production', SVC_PARENT_PID: String(process.pid) },
      },
    );
    dashboard.on('exit', (code, signal) => {
      if (!stopping) {
        runtime.app.log.error({ code, signal }, 'dashboard exited; stopping');
        void stop(1);
      }
    });
  }

  let stopping = false;
  const stop = async (exitCode: number) => {
    if (stopping) return;
    stopping = true;
    runtime.app.log.info({ graceSeconds: config.shutdownGraceMs / 1000 }, 'shutting down: draining');
    // Last resort if something hangs past the grace period and the final steps: exit non-zero
    // so that a process manager sees an unclean stop.
    const deadline = setTimeout(() => process.exit(exitCode || 1), config.shutdownGraceMs + 15_000);
    deadline.unref();
    dashboard?.kill('SIGTERM');
    clearInterval(keepAlive);
    let clean = true;
    await runtime.shutdown(config.shutdownGraceMs).catch((err: unknown) => {
      clean = false;
      runtime.app.log.error({ err }, 'error during shutdown');
    });
    runtime.app.log.info('shut down');
    process.exit(clean ? exitCode : exitCode || 1);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
}
