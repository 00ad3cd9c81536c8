import type { Logger } from 'pino';
import { installCrashGuards } from './crash-guard.ts';
import { startupStep, startupStepFailed } from './startup.ts';

/**
 * Graceful shutdown: on SIGTERM/SIGINT run the steps in order (stop taking work, finish
 * in-flight work, drain NATS, close pools), each bounded by a timeout; a second signal exits at once.
 */
export function installShutdown(log: Logger, steps: { name: string; run: () => Promise<unknown> }[], timeoutMs = 20_000): () => Promise<void> {
  installCrashGuards(log); // normally installed at start already; a process with a shutdown has it either way
  let stopping: Promise<void> | null = null;
  const shutdown = (reason: string): Promise<void> => {
    if (stopping) return stopping;
    log.info({ reason }, 'shutting down');
    stopping = (async () => {
      for (const step of steps) {
        const t = setTimeout(() => log.warn({ step: step.name }, 'shutdown step is slow'), timeoutMs).unref();
        try {
          await Promise.race([step.run(), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
        } catch (err) {
          log.error({ err, step: step.name }, 'shutdown step failed');
        } finally {
          clearTimeout(t);
        }
      }
      log.info('stopped');
    })();
    return stopping;
  };
  // Ctrl-C in a terminal signals the whole process group and the launcher forwards SIGTERM
  // too: only a repeat signal a second or more after the first forces an immediate exit.
  let firstAt = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (firstAt === 0) {
      firstAt = Date.now();
      void shutdown(sig).then(() => process.exit(0));
    } else if (Date.now() - firstAt >= 1000) {
      log.warn({ signal: sig }, 'second signal: exiting now');
      process.exit(130);
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return () => shutdown('requested');
}

/** Retry an async step with exponential backoff, logging each failure clearly. */
export async function retryForever<T>(what: string, log: Logger, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  startupStep(what);
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (signal?.aborted) throw err;
      startupStepFailed(err);
      const delay = Math.min(10_000, 250 * 2 ** Math.min(attempt, 6));
      log.error({ attempt, retryInMs: delay, err: (err as Error).message }, `${what} failed; retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
