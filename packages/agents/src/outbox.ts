import { emailIdFor, recipientsRefusal, type Command, type MailRecipientRules, type TaskState } from '@baton/domain';
import type { SendEmailInput } from './tools.ts';

export type OutboxRequest = { ok: true; command: Extract<Command, { type: 'RequestEmail' }>; result: string } | { ok: false; error: string };

/**
 * The outbox side of `send_email` (docs/email.md), pure: the RequestEmail of a call, and the tool
 * result the agent gets; or why it cannot be queued (an attachment that is not an artifact of the
 * task, a recipient the deployment does not let its tenant mail). The email id is derived from the task, the agent and the tool use (`emailIdFor`), so the
 * same call run again (a job resumed after a crash, a retry) decides the same RequestEmail, which
 * the log records once.
 */
export function outboxRequest(state: TaskState, agentId: string, toolUseId: string, input: SendEmailInput, recipients?: MailRecipientRules): OutboxRequest {
  // Only where the deployment lets the tenant's mail go (MAIL_ALLOWED_RECIPIENTS): the agent is told, and may write to others.
  const refusal = recipientsRefusal(recipients, state.tenantId, input.to);
  if (refusal) return { ok: false, error: `to: not queued: ${refusal}` };
  const attachments = [];
  for (const path of input.attach) {
    const artifact = state.artifacts.find((a) => a.path === path);
    if (!artifact) {
      const known = state.artifacts.map((a) => a.path);
      return { ok: false, error: `attach: '${path}' is not a file of this task; its files are: ${known.length ? known.join(', ') : 'none yet'}` };
    }
    attachments.push({ path, bytes: artifact.bytes, sha256: artifact.sha256 });
  }
  const emailId = emailIdFor(state.id, agentId, toolUseId);
  const command = { type: 'RequestEmail' as const, emailId, agentId, toolUseId, to: input.to, subject: input.subject, body: input.body, attachments };
  const attached = attachments.length ? `, with ${attachments.map((a) => a.path).join(', ')} attached` : '';
  return {
    ok: true,
    command,
    result: `queued as ${emailId}: to ${input.to.join(', ')}, subject "${input.subject}"${attached}. Baton's notifier delivers it once; whether it was sent (EmailSent) or not (EmailFailed) is recorded on the task, not in this result.`,
  };
}
