import { fileURLToPath } from 'node:url';
import { AllowedRecipients, NotifyConfig, recipientsRefused, recipientsRefusedMessage } from '@baton/domain';
import { MIN_LINK_SECRET_LENGTH } from '@baton/mail';
import { byTenant, byTenantIfSet, commonEnv, durationMs, existingDirectory, loadConfig, modelEnv } from '@baton/runtime';
import { DEFAULT_WORKSPACE_LIMITS, type WorkspaceLimits } from '@baton/storage';
import { z } from 'zod';
import { DEFAULT_LIMITS, type GatewayLimits } from './deps.ts';
import { BudgetInput } from './routes/schemas.ts';

/** The repository's examples/ (example projects a task can start from), found from this file. */
export const DEFAULT_EXAMPLES_DIR = fileURLToPath(new URL('../../../examples', import.meta.url));

const MiB = 1024 * 1024;

const schema = z.object({
  ...commonEnv,
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  /** `key:tenant` pairs, comma-separated. Empty: the API runs open (single tenant `default`). */
  BATON_API_KEYS: z
    .string()
    .default('')
    .superRefine((s, ctx) => {
      for (const message of apiKeyProblems(s)) ctx.addIssue({ code: 'custom', message });
    }),
  /**
   * A file of `key:tenant` pairs (one a line or comma-separated; `#` comment lines), read again
   * when it changes (every API_KEYS_RELOAD_MS): keys added or revoked without a restart. With it
   * the API is never open — an empty file refuses every request.
   */
  BATON_API_KEYS_FILE: z.string().min(1).optional(),
  API_KEYS_RELOAD_MS: durationMs(10_000),
  /**
   * Without API keys, the API answers only at localhost or an IP address (a page whose DNS name is
   * rebound to this gateway cannot use it); these host names too, comma-separated.
   */
  OPEN_API_HOSTS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((h) => h.trim().toLowerCase()).filter((h) => h !== ''))
    .pipe(z.array(z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'host names (no scheme, port or path), comma-separated'))),
  SSE_HEARTBEAT_MS: durationMs(15_000),
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(50 * MiB).default(MiB),
  /** The team of a task or chat that names none (must be configured); unset: `research` if configured, else the only team, else none (a team must be named). */
  BATON_DEFAULT_TEAM: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'a team id: 1–63 lowercase letters, digits, "-" and "_"').optional(),
  /** Example projects (`<dir>/<name>/`) a task can start from: `workspace: { example: name }`. */
  BATON_EXAMPLES_DIR: existingDirectory().default(DEFAULT_EXAMPLES_DIR),
  /** An uploaded workspace: the .tar.gz itself, its files' bytes once unpacked, its number of files. */
  WORKSPACE_MAX_ARCHIVE_BYTES: z.coerce.number().int().min(1024).max(1024 * MiB).default(DEFAULT_WORKSPACE_LIMITS.maxArchiveBytes),
  WORKSPACE_MAX_BYTES: z.coerce.number().int().min(1024).max(4096 * MiB).default(DEFAULT_WORKSPACE_LIMITS.maxBytes),
  WORKSPACE_MAX_FILES: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_WORKSPACE_LIMITS.maxFiles),
  /** Writes (POST/PUT/PATCH/DELETE under /v1) per tenant per second, a token bucket per gateway replica; 0: no limit. */
  RATE_LIMIT_WRITES_PER_S: z.coerce.number().min(0).max(100_000).default(DEFAULT_LIMITS.writesPerS),
  /** Writes a tenant may make at once (the bucket's size). */
  RATE_LIMIT_BURST: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_LIMITS.burst),
  /** Open SSE streams per tenant, and in all, per gateway replica. */
  SSE_MAX_PER_TENANT: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_LIMITS.ssePerTenant),
  SSE_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_LIMITS.sseConnections),
  /** An SSE client that takes nothing of its stream for this long (its socket does not drain) is cut. */
  SSE_STALL_MS: z.coerce.number().int().min(100).max(86_400_000).default(DEFAULT_LIMITS.sseStallMs),
  /** A task with work no person holds, no transition for this long and no live agent lease is listed as stuck. */
  STUCK_AFTER_MS: z.coerce.number().int().min(1000).max(30 * 86_400_000).default(DEFAULT_LIMITS.stuckAfterMs),
  /**
   * Default budgets per tenant, as JSON: `{"acme": {"usd": 5}, "*": {"tokens": 2000000}}` ("*":
   * every tenant not named). A task's own budget replaces its tenant's default.
   */
  TENANT_BUDGETS: byTenant(BudgetInput),
  /**
   * Default mail recipients per tenant, as JSON: `{"acme": {"email": {"to": ["ops@acme.example"], "on": ["failed"]}}}`
   * ("*": every tenant not named). A task's own `notify` replaces its tenant's default (docs/email.md).
   */
  TENANT_NOTIFY: byTenant(NotifyConfig),
  /**
   * Where each tenant's mail may go, as JSON: `{"acme": ["acme.example", "*.partner.example", "ann@example.com"], "*": [...]}`;
   * unset: anywhere. A task's `notify` naming another address is a 400 (the notifier and the runner check it too: docs/email.md).
   */
  MAIL_ALLOWED_RECIPIENTS: byTenantIfSet(AllowedRecipients),
  /** Checks the mailed decision links (the notifier signs them with the same value); absent: /mail pages say links are off. */
  MAIL_LINK_SECRET: z.string().min(MIN_LINK_SECRET_LENGTH, `must be at least ${MIN_LINK_SECRET_LENGTH} characters (e.g. openssl rand -hex 32)`).optional(),
  /** Webhook URLs naming loopback/private/link-local addresses are accepted (development); the notifier reads the same variable. */
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: z.stringbool().default(false),
  /** Chat mode (docs/chat.md): Claude with ANTHROPIC_API_KEY, else the offline chat model. */
  ...modelEnv,
  /** A chat reply's max_tokens. */
  CHAT_MAX_TOKENS: z.coerce.number().int().min(1).max(64_000).default(2048),
  /** The offline chat model's pause between streamed words (0: none), so a person sees it stream. */
  OFFLINE_CHAT_WORD_DELAY_MS: z.coerce.number().int().min(0).max(10_000).default(20),
});
const checked = schema.superRefine((c, ctx) => {
  if (c.BATON_API_KEYS !== '' && c.BATON_API_KEYS_FILE !== undefined) ctx.addIssue({ code: 'custom', path: ['BATON_API_KEYS_FILE'], message: 'give BATON_API_KEYS or BATON_API_KEYS_FILE, not both' });
  // A tenant's own default recipients are ones it may mail (a mistake said at start, not mail dropped
  // later); `*`'s, which tenants named in the rules may not all mail, is applied less what each may not
  // (defaultNotify), but must suit the tenants the rules do not name, under `*`'s rule.
  const rules = c.MAIL_ALLOWED_RECIPIENTS;
  for (const [tenant, notify] of Object.entries(c.TENANT_NOTIFY)) {
    if (!rules || (tenant === '*' && !Object.hasOwn(rules, '*'))) continue;
    const refused = recipientsRefused(rules, tenant, notify.email.to);
    if (refused.length === 0) continue;
    ctx.addIssue({ code: 'custom', path: ['TENANT_NOTIFY', tenant], message: recipientsRefusedMessage(rules, tenant, refused, tenant === '*' ? 'the tenants MAIL_ALLOWED_RECIPIENTS does not name' : undefined) });
  }
});
export type GatewayConfig = z.infer<typeof schema>;
export const loadGatewayConfig = (env: Record<string, string | undefined>): GatewayConfig => loadConfig('gateway', checked, env);

export const gatewayLimits = (c: GatewayConfig): GatewayLimits => ({
  writesPerS: c.RATE_LIMIT_WRITES_PER_S,
  burst: c.RATE_LIMIT_BURST,
  ssePerTenant: c.SSE_MAX_PER_TENANT,
  sseConnections: c.SSE_MAX_CONNECTIONS,
  stuckAfterMs: c.STUCK_AFTER_MS,
  sseStallMs: c.SSE_STALL_MS,
});

export const workspaceLimits = (c: GatewayConfig): WorkspaceLimits => ({
  maxArchiveBytes: c.WORKSPACE_MAX_ARCHIVE_BYTES,
  maxBytes: c.WORKSPACE_MAX_BYTES,
  maxFiles: c.WORKSPACE_MAX_FILES,
});

/**
 * The pairs of a BATON_API_KEYS value or keys file: lines (`#` comment lines and blank ones left
 * out — a comment may hold a comma), each of pairs separated by commas; a leading BOM dropped.
 */
const pairsOf = (s: string): string[] =>
  s
    .replace(/^\uFEFF/, '') // a byte order mark, as an editor on Windows writes one
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .flatMap((line) => line.split(','))
    .map((p) => p.trim())
    .filter((p) => p !== '');

/** What is wrong with a list of `key:tenant` pairs, by position — never showing a key. */
export function apiKeyProblems(s: string): string[] {
  const pairs = pairsOf(s);
  const problems: string[] = [];
  const bad = pairs.flatMap((p, i) => (/^[^:\s]{16,}:[A-Za-z0-9_-]{1,64}$/.test(p) ? [] : [i + 1]));
  if (bad.length > 0) problems.push(`must be comma-separated key:tenant pairs: a key of 16 or more characters without ":" or white space, a tenant of 1–64 letters, digits, "_" or "-" (not so: pair ${bad.join(', ')})`);
  // A key given twice would belong to whichever tenant came last: refused, naming the key's position (never the key).
  // By a map of first positions: a file of 40,000 keys took 19 s by indexOf, the gateway frozen meanwhile.
  const firstAt = new Map<string, number>();
  pairs.forEach((p, i) => {
    const k = p.slice(0, Math.max(0, p.lastIndexOf(':')));
    const first = firstAt.get(k);
    if (first === undefined) firstAt.set(k, i);
    else if (k !== '') problems.push(`pair ${i + 1} repeats the key of pair ${first + 1}: a key belongs to one tenant`);
  });
  return problems;
}

/** key → tenant, from pairs `apiKeyProblems` passed. */
export function parseApiKeys(s: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const pair of pairsOf(s)) {
    const i = pair.lastIndexOf(':');
    m.set(pair.slice(0, i), pair.slice(i + 1));
  }
  return m;
}
