import { tmpdir } from 'node:os';
import path from 'node:path';
import { commonEnv, durationMs, loadConfig, modelEnv } from '@baton/runtime';
import { z } from 'zod';

const schema = z.object({
  ...commonEnv,
  RUNNER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  RUNNER_ID: z.string().min(1).optional(),
  WORKSPACE_ROOT: z.string().min(1).default(path.join(tmpdir(), 'baton-workspaces')),
  CONSUMER_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(5),
  OFFLINE_MODEL_LATENCY_MS: durationMs(0),
  ...modelEnv,
  /** Test hook: append one JSON line per tool execution (crash tests check nothing ran twice). */
  BATON_TOOL_AUDIT_FILE: z.string().min(1).optional(),
});
export type RunnerConfig = z.infer<typeof schema>;
export const loadRunnerConfig = (env: Record<string, string | undefined>): RunnerConfig => loadConfig('sandbox-runner', schema, env);
