import { commonEnv, durationMs, loadConfig, modelEnv } from '@baton/runtime';
import { z } from 'zod';

const schema = z.object({
  ...commonEnv,
  ORCHESTRATOR_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(64),
  RELAY_ENABLED: z.stringbool().default(true),
  RELAY_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  RELAY_BACKSTOP_MS: durationMs(30_000),
  /** Longest sleep between looks at the deadline table (requests opened by another replica are seen within it). */
  DEADLINE_BACKSTOP_MS: durationMs(60_000),
  CONSUMER_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(8),
  /** Offline model latency per turn (0 = instant); lets a demo look like real work. */
  OFFLINE_MODEL_LATENCY_MS: durationMs(0),
  ...modelEnv,
});
export type OrchestratorConfig = z.infer<typeof schema>;

export const loadOrchestratorConfig = (env: Record<string, string | undefined>): OrchestratorConfig => loadConfig('orchestrator', schema, env);
