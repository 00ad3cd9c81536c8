import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AllowedRecipients } from '@baton/domain';
import { byTenantIfSet, commonEnv, opsEnv, durationMs, existingDirectory, loadConfig, modelEnv } from '@baton/runtime';
import { DEFAULT_MAX_WORKSPACE_BYTES } from '@baton/sandbox';
import { z } from 'zod';

const schema = z.object({
  ...commonEnv,
  ...opsEnv(9465),
  RUNNER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  RUNNER_ID: z.string().min(1).optional(),
  WORKSPACE_ROOT: z.string().min(1).default(path.join(tmpdir(), 'baton-workspaces')),
  CONSUMER_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(5),
  /** A runner holds a lease on each agent it runs, renewed every third of this; one not renewed for this long is taken over. */
  LEASE_TTL_MS: z.coerce.number().int().min(300).max(3_600_000).default(20_000),
  OFFLINE_MODEL_LATENCY_MS: durationMs(0, 0),
  ...modelEnv,
  /** `auto`: E2B when E2B_API_KEY is set, else local (bubblewrap). */
  SANDBOX_PROVIDER: z.enum(['auto', 'local', 'e2b']).default('auto'),
  E2B_API_KEY: z.string().min(1).optional(),
  E2B_TEMPLATE: z.string().min(1).default('baton-agent'),
  /** Self-hosted E2B, or a fake in tests. */
  E2B_API_URL: z.url().optional(),
  E2B_SANDBOX_URL: z.url().optional(),
  /**
   * The toolchain local sandboxes' commands get read-only, on PATH: a Node install prefix (bound
   * at /opt/baton/node) and a node_modules holding vitest (bound whole at /opt/baton/node_modules).
   * Unset: detected — this runner's own Node, and the repository's node_modules if it holds
   * vitest (development); the Docker image names its own (infra/docker/Dockerfile). `none`: lend none.
   */
  SANDBOX_TOOLCHAIN_NODE: z.string().min(1).optional(),
  SANDBOX_TOOLCHAIN_NODE_MODULES: z.string().min(1).optional(),
  /**
   * The most one local workspace's files may hold together (node_modules and other dependency
   * directories not counted); past it the agent fails with \`workspace_too_large\` and nothing
   * more is saved (docs/workspaces.md).
   */
  SANDBOX_MAX_WORKSPACE_BYTES: z.coerce.number().int().min(1024 * 1024).max(1024 ** 4).default(DEFAULT_MAX_WORKSPACE_BYTES),
  /** The longest one job may run before it is aborted and handed back (a hung job never holds an agent for ever). */
  JOB_MAX_MS: durationMs(3_600_000),
  /** How often sandboxes left by dead tasks are swept. */
  SANDBOX_SWEEP_INTERVAL_MS: durationMs(300_000),
  /**
   * How long a job waits out the sandbox service (E2B) failing to open its agent's sandbox — 5xx,
   * 429, timeouts, cut connections, asked again with a growing pause — before the agent fails
   * `sandbox_unavailable` (as the model's outage limit, ANTHROPIC_OUTAGE_LIMIT_MS).
   */
  SANDBOX_OUTAGE_LIMIT_MS: durationMs(900_000, 0),
  /** The offline web_search corpus: a directory of text/markdown/HTML files (default: the project's own docs). */
  BATON_CORPUS_DIR: existingDirectory().default(fileURLToPath(new URL('../../..', import.meta.url))),
  BATON_CORPUS: z.string().min(1).max(100).default('docs'),
  /** Test hook: append one JSON line per tool execution (crash tests check nothing ran twice). */
  BATON_TOOL_AUDIT_FILE: z.string().min(1).optional(),
  /** Where each tenant's mail may go (JSON by tenant; unset: anywhere): send_email to another address is an error the agent reads (docs/email.md). */
  MAIL_ALLOWED_RECIPIENTS: byTenantIfSet(AllowedRecipients),
}).superRefine((c, ctx) => {
  if (c.SANDBOX_PROVIDER === 'e2b' && !c.E2B_API_KEY) ctx.addIssue({ code: 'custom', path: ['E2B_API_KEY'], message: 'required when SANDBOX_PROVIDER=e2b' });
});
export type RunnerConfig = z.infer<typeof schema>;
export const loadRunnerConfig = (env: Record<string, string | undefined>): RunnerConfig => loadConfig('sandbox-runner', schema, env);
