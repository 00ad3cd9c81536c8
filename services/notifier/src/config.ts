import { MIN_LINK_SECRET_LENGTH } from '@baton/mail';
import { AllowedRecipients } from '@baton/domain';
import { byTenantIfSet, commonEnv, opsEnv, durationMs, loadConfig } from '@baton/runtime';
import { z } from 'zod';
import { DEFAULT_RETRY_HORIZON_MS, retrySchedule } from './schedule.ts';

const MiB = 1024 * 1024;

const schema = z.object({
  ...commonEnv,
  ...opsEnv(9466),
  /** Standard Webhooks signing secret (`whsec_` + base64 of ≥ 24 random bytes). */
  WEBHOOK_SECRET: z.string().regex(/^whsec_[A-Za-z0-9+/=]{32,}$/, 'must be whsec_ followed by base64 of at least 24 bytes').optional(),
  WEBHOOK_TIMEOUT_MS: durationMs(15_000),
  /** Attempts of one message (webhooks and its mails) before it is given up (a dead letter). */
  WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(12),
  /** How long a failing message is retried: the attempts are spread over it (retrySchedule). */
  WEBHOOK_RETRY_HORIZON_MS: z.coerce.number().int().min(1000).max(30 * 86_400_000).default(DEFAULT_RETRY_HORIZON_MS),
  /** An explicit schedule instead (comma-separated milliseconds, the last repeats); unset: from the horizon. */
  WEBHOOK_BACKOFF_MS: z.string().regex(/^\d+(,\d+)*$/, 'comma-separated milliseconds').optional(),
  NOTIFIER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(16),
  /** SSRF guard: webhooks may not reach loopback/private/link-local addresses unless this is true. */
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: z.stringbool().default(false),
  // Mail (docs/email.md). No SMTP_URL: mail is off (said at start); agents' outbox mails are recorded as failed (mail_off).
  /** smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://… (TLS from the start). */
  SMTP_URL: z.url({ protocol: /^smtps?$/, error: 'must be smtp://… or smtps://…' }).optional(),
  /** The sender of every mail. */
  MAIL_FROM: z.string().min(3).max(300).default('Baton <baton@localhost>'),
  /** Where people reach the gateway: the mailed links (decide, answer, console, files) start with it. */
  PUBLIC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).default('http://127.0.0.1:8080').transform((u) => u.replace(/\/+$/, '')),
  /** Signs the one-click links (HMAC-SHA256); the gateway checks them with the same secret. Required with SMTP_URL. */
  MAIL_LINK_SECRET: z.string().min(MIN_LINK_SECRET_LENGTH, `must be at least ${MIN_LINK_SECRET_LENGTH} characters (e.g. openssl rand -hex 32)`).optional(),
  /** How long a mailed decision link works. */
  MAIL_LINK_TTL_MS: durationMs(3 * 86_400_000),
  /** Connecting, the greeting and each reply of the SMTP server; a claim's lease is three times this. */
  MAIL_TIMEOUT_MS: durationMs(30_000),
  /** Where each tenant's mail may go (JSON by tenant; unset: anywhere): a mail to any other address is not sent (docs/email.md). */
  MAIL_ALLOWED_RECIPIENTS: byTenantIfSet(AllowedRecipients),
  /** Files attached to one mail at most, in all (larger ones are linked instead). */
  MAIL_ATTACH_MAX_BYTES: z.coerce.number().int().min(0).max(100 * MiB).default(5 * MiB),
}).superRefine((c, ctx) => {
  // Signed links decide approvals: a guessable secret would let anyone decide. No default.
  if (c.SMTP_URL && !c.MAIL_LINK_SECRET) ctx.addIssue({ code: 'custom', path: ['MAIL_LINK_SECRET'], message: 'required when SMTP_URL is set (it signs the mailed decision links; the gateway needs the same value)' });
});
export type NotifierConfig = z.infer<typeof schema>;
/** The waits between attempts: WEBHOOK_BACKOFF_MS if set, else spread over WEBHOOK_RETRY_HORIZON_MS. */
export const backoffOf = (c: Pick<NotifierConfig, 'WEBHOOK_BACKOFF_MS' | 'WEBHOOK_RETRY_HORIZON_MS' | 'WEBHOOK_MAX_ATTEMPTS'>): number[] =>
  c.WEBHOOK_BACKOFF_MS ? c.WEBHOOK_BACKOFF_MS.split(',').map(Number) : retrySchedule(c.WEBHOOK_RETRY_HORIZON_MS, c.WEBHOOK_MAX_ATTEMPTS);
export const loadNotifierConfig = (env: Record<string, string | undefined>): NotifierConfig => loadConfig('notifier', schema, env);

/** A fixed secret for local development only; the notifier warns loudly when it is used. */
export const DEV_WEBHOOK_SECRET = 'whsec_YmF0b24tbG9jYWwtZGV2ZWxvcG1lbnQtc2VjcmV0LWRvLW5vdC11c2U=';
