/**
 * Where this process's start-up is, for a worker's `/readyz` while it waits (for Postgres, the
 * migrations, NATS, its streams): the step it is on and what the step's last try met. A worker
 * opens its ops port before it waits, so a probe sees a live process (`/healthz` 200) that says
 * why it is not ready yet (`/readyz` 503, `started: …`) — it had no port at all until it started.
 * One start-up per process: the steps are the process's, as its metrics are.
 */
const progress: { step: string; lastError: string | null; started: boolean } = { step: 'starting', lastError: null, started: false };

/** The step start-up is on now (`retryForever` and `connectNats` say theirs). */
export function startupStep(step: string): void {
  if (progress.started) return;
  progress.step = step;
  progress.lastError = null;
}

/** What the current step's last try met. */
export function startupStepFailed(err: unknown): void {
  if (!progress.started) progress.lastError = err instanceof Error ? err.message : String(err);
}

/** Start-up is over: the service does its work. */
export function markStarted(): void {
  progress.started = true;
}

/** A readiness check: resolves once started; until then fails naming the step and its last error. */
export async function startupCheck(): Promise<void> {
  if (progress.started) return;
  throw new Error(`starting: ${progress.step}${progress.lastError ? ` (last try: ${progress.lastError})` : ''}`);
}
