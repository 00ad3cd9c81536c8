import { z } from 'zod';
import { uuidV5 } from './ids.ts';

/**
 * Mail (docs/email.md): who a task tells, and when (`notify`, recorded in TaskSubmitted), and the
 * outbox — mails an agent asked for (`send_email`), recorded as EmailRequested and delivered
 * once, from the log, by the notifier, which records EmailSent or EmailFailed.
 */

/** An address as a task or an agent may name it (zod's email format; 254 characters at most, as SMTP allows). */
/**
 * The id of the mail a send_email call queues, derived from the task, the agent and the tool use:
 * the same call run again (a job resumed after a crash, a retry — or a fork's agent running it
 * again) decides the same RequestEmail, which the log records once.
 */
export const emailIdFor = (taskId: string, agentId: string, toolUseId: string): string => uuidV5(`${taskId}:email:${agentId}:${toolUseId}`);

export const EmailAddress = z.email('must be an email address (name@example.com)').max(254, 'must be at most 254 characters');

/** The moments a task's mail recipients may be told of. */
export const MAIL_MOMENTS = ['awaiting_input', 'completed', 'failed', 'cancelled'] as const;
export const MailMoment = z.enum(MAIL_MOMENTS);
export type MailMoment = z.infer<typeof MailMoment>;
export const DEFAULT_MAIL_MOMENTS: MailMoment[] = ['awaiting_input', 'completed', 'failed'];
export const MAX_MAIL_RECIPIENTS = 20;

/** Who is mailed, and at which moments (a request waiting for a person, the end of the run). */
export const EmailNotify = z.strictObject({
  to: z.array(EmailAddress).min(1, 'name at least one address').max(MAX_MAIL_RECIPIENTS, `at most ${MAX_MAIL_RECIPIENTS} addresses`),
  on: z.array(MailMoment).min(1).max(MAIL_MOMENTS.length).default(DEFAULT_MAIL_MOMENTS),
});
export type EmailNotify = z.infer<typeof EmailNotify>;

/** A task's notifications besides its webhook. */
export const NotifyConfig = z.strictObject({ email: EmailNotify });
export type NotifyConfig = z.infer<typeof NotifyConfig>;

/** An artifact attached to an outbox mail, as it was when the agent asked. */
export const EmailAttachment = z.object({
  path: z.string().min(1).max(1024),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type EmailAttachment = z.infer<typeof EmailAttachment>;

export const EMAIL_SUBJECT_MAX = 300;
export const EMAIL_BODY_MAX = 100_000;
export const EMAIL_MAX_ATTACHMENTS = 10;

/** An outbox mail as the task's state keeps it (its body stays in EmailRequested). */
export interface EmailState {
  emailId: string;
  agentId: string;
  toolUseId: string;
  to: string[];
  subject: string;
  attachments: string[];
  /** queued: recorded, not yet delivered; sent or failed: the notifier recorded the outcome. */
  status: 'queued' | 'sent' | 'failed';
  requestedAt: string;
  settledAt: string | null;
  messageId: string | null;
  /** Sent, but these recipients the SMTP server refused (EmailSent.rejected): they did not get it. */
  refused: string[];
  error: { code: string; message: string } | null;
}

/**
 * One entry of where a deployment lets a tenant's mail go (MAIL_ALLOWED_RECIPIENTS): a domain
 * (`example.com`: its addresses), a domain and its subdomains (`*.example.com`), or one address.
 */
export const RecipientPattern = z
  .string()
  .trim()
  .toLowerCase()
  .refine((p) => /^(\*\.)?([a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z][a-z0-9-]*[a-z0-9]$/.test(p) || EmailAddress.safeParse(p).success, 'must be a domain (example.com), a domain with its subdomains (*.example.com) or an address');

/** One tenant's entries in MAIL_ALLOWED_RECIPIENTS. */
export const AllowedRecipients = z.array(RecipientPattern).min(1, 'name at least one domain or address');

/** By tenant (`*`: every tenant not named), where its mail may go; a tenant under neither may mail no one. */
export type MailRecipientRules = Readonly<Record<string, readonly string[]>>;

/** The entries that apply to `tenant` (its own, else `*`'s; none: it may mail no one). */
export const recipientPatternsOf = (rules: MailRecipientRules, tenant: string): readonly string[] => (Object.hasOwn(rules, tenant) ? rules[tenant] : Object.hasOwn(rules, '*') ? rules['*'] : undefined) ?? [];

/** Whether `pattern` lets an address (a plain one, in lower case) be mailed. */
const allowedBy = (pattern: string, a: string): boolean => {
  if (pattern.includes('@')) return a === pattern;
  const domain = a.slice(a.lastIndexOf('@') + 1);
  return pattern.startsWith('*.') ? domain === pattern.slice(2) || domain.endsWith(pattern.slice(1)) : domain === pattern;
};

/**
 * The addresses of `to` that `rules` do not let `tenant` mail, in order (none: all may be; no
 * rules — MAIL_ALLOWED_RECIPIENTS unset — lets any address be mailed).
 */
export function recipientsRefused(rules: MailRecipientRules | null | undefined, tenant: string, to: readonly string[]): string[] {
  if (!rules) return [];
  const patterns = recipientPatternsOf(rules, tenant);
  // Only a plain address is matched (a quoted local part, two @, white space: never allowed) — whatever a caller checked before.
  return to.filter((address) => !EmailAddress.safeParse(address).success || !patterns.some((p) => allowedBy(p, address.toLowerCase())));
}

/** Why `to` may not all be mailed for `tenant` (`recipientsRefusedMessage` of those refused), or null: all may be. */
export function recipientsRefusal(rules: MailRecipientRules | null | undefined, tenant: string, to: readonly string[]): string | null {
  const refused = recipientsRefused(rules, tenant, to);
  return rules && refused.length > 0 ? recipientsRefusedMessage(rules, tenant, refused) : null;
}

const REFUSED_MARK = '(MAIL_ALLOWED_RECIPIENTS allows';

/** Why those addresses are not mailed, naming them and what the tenant may mail (`who`: the tenant as named). */
export function recipientsRefusedMessage(rules: MailRecipientRules, tenant: string, refused: readonly string[], who = `tenant '${tenant}'`): string {
  const patterns = recipientPatternsOf(rules, tenant);
  return `${refused.join(', ')}: this deployment does not mail ${refused.length === 1 ? 'that address' : 'those addresses'} for ${who} ${REFUSED_MARK} ${patterns.length ? patterns.join(', ') : 'it no address'})`;
}

/** Whether an attempt's error says its recipients are not allowed (`recipientsRefusedMessage`): sending it again would be refused again. */
export const refusedRecipientError = (error: string | null): boolean => error?.includes(REFUSED_MARK) === true;
