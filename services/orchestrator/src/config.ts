import { commonEnv, opsEnv, durationMs, loadConfig, modelEnv } from '@baton/runtime';
import { z } from 'zod';

const schema = z.object({
  ...commonEnv,
  ...opsEnv(9464),
  ORCHESTRATOR_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(64),
  RELAY_ENABLED: z.stringbool().default(true),
  RELAY_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  RELAY_BACKSTOP_MS: durationMs(30_000),
  /** Longest sleep between looks at the deadline table (requests opened by another replica are seen within it). */
  DEADLINE_BACKSTOP_MS: durationMs(60_000),
  /** The watchdog (one per deployment, where the relay leads): how often it looks. */
  WATCHDOG_INTERVAL_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  /** A task with work no person holds and no transition for this long is looked at (its wake-ups re-sent). */
  WATCHDOG_GRACE_MS: z.coerce.number().int().min(100).max(86_400_000).default(30_000),
  /** Re-dispatches of one agent attempt before it fails `agent_lost`. */
  WATCHDOG_MAX_REDISPATCHES: z.coerce.number().int().min(1).max(100).default(3),
  /** Attempts in a row of one agent that were lost before recording anything (its runner keeps dying on it) before it fails `agent_lost`. */
  WATCHDOG_MAX_STALLED_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(5),
  /** After the bus lost its streams, the relay re-publishes the log of this last stretch (older work is woken task by task). */
  BUS_REPLAY_WINDOW_MS: z.coerce.number().int().min(0).max(7 * 86_400_000).default(600_000),
  CONSUMER_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(8),
  /** Offline model latency per turn (0 = instant); lets a demo look like real work. */
  OFFLINE_MODEL_LATENCY_MS: durationMs(0, 0),
  ...modelEnv,
});
export type OrchestratorConfig = z.infer<typeof schema>;

export const loadOrchestratorConfig = (env: Record<string, string | undefined>): OrchestratorConfig => loadConfig('orchestrator', schema, env);
