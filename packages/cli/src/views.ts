import { chatTimeline, messageCount, oneLine, unansweredMessage, type ChatView } from '@baton/api';
import { refusedRecipientError } from '@baton/domain';
import { ApiError, type ChatSummaryView, type DeliveryView, type Reconnect, type TaskSummary, type TaskWebhookSecretView, type TeamInfoView, type WebhookEndpointView } from '@baton/client';

/** How the CLI prints what an operator lists: tasks, conversations, webhook endpoints, deliveries, teams (one line per item, or a short block). */

/** A list as the CLI prints it: one line (or block) per item, or `none` when there is no item. */
export function listing<T>(items: readonly T[], describe: (item: T) => string, none: string): string {
  return items.length === 0 ? none : items.map(describe).join('\n');
}

/** One line per task for `baton list`: id, status, team, last change, open requests, fork, prompt. */
export function describeListItem(t: TaskSummary): string {
  const open = t.pendingRequests.length;
  const marks = [open > 0 ? `${open} open request${open === 1 ? '' : 's'}` : '', t.forkedFrom ? `fork of ${t.forkedFrom.taskId} at v${t.forkedFrom.atVersion}` : ''].filter(Boolean);
  return `${t.id}  ${t.status.padEnd(14)}  ${t.team}  ${t.updatedAt}${marks.length ? `  (${marks.join(', ')})` : ''}  ${oneLine(t.prompt, 80)}`;
}

/** A webhook endpoint: id, URL, events, and its secrets' rotation when there was one. */
export function describeWebhook(w: WebhookEndpointView): string {
  const rotated = w.rotatedAt ? `  rotated ${w.rotatedAt}${w.previousSecretExpiresAt ? ` (the previous secret signs too until ${w.previousSecretExpiresAt})` : ''}` : '';
  return `${w.id}  ${w.url}  ${w.events.join(',')}  since ${w.createdAt}${rotated}`;
}

/** The tenant's key for its tasks' own webhooks: when it was made and rotated, and what signs beside it until when. */
export function describeTaskWebhookSecret(k: TaskWebhookSecretView, now = Date.now()): string {
  const ahead = (t: string | null): t is string => t !== null && Date.parse(t) > now;
  const beside = [
    ...(ahead(k.previousSecretExpiresAt) ? [`the previous key signs too until ${k.previousSecretExpiresAt}`] : []),
    ...(ahead(k.deploymentSecretUntil) ? [`the deployment's secret signs too until ${k.deploymentSecretUntil}`] : []),
  ];
  return `key since ${k.createdAt}${k.rotatedAt ? `, rotated ${k.rotatedAt}` : ''}${beside.length ? ` (${beside.join('; ')})` : ''}`;
}

/**
 * One delivery attempt: when, what, where, how it went (an accepted mail that some recipients
 * refused says so). `last`: it is the latest attempt of its message (a webhook message, to one
 * endpoint, or a mail); failed, it ends with the command that sends it again once the notifiers
 * have stopped trying (given up, or a person's redelivery, which is tried once) — while they
 * still try, that they do; never for an earlier failure a later attempt mended, nor an agent's own mail.
 */
/** Why the notifiers stopped: refused for good (a mail's 5xx, a webhook's 410 Gone), else no attempt left. */
const whyGivenUp = (d: DeliveryView): string =>
  refusedRecipientError(d.error)
    ? 'a recipient this deployment does not mail (MAIL_ALLOWED_RECIPIENTS): not sent again'
    : d.channel === 'email' && d.statusCode !== null && d.statusCode >= 500
      ? 'refused for good: not tried again'
      : d.channel === 'webhook' && d.statusCode === 410
        ? 'the receiver said 410 Gone: not tried again'
        : endpointGone(d)
          ? 'its endpoint was deleted: nothing to send it to'
          : 'given up: no more attempts';

/** A tenant endpoint's message given up (or not sent) because the endpoint was deleted: a redelivery would be refused (409). */
const endpointGone = (d: DeliveryView): boolean => d.endpointId !== null && /\bthe endpoint was deleted$/.test(d.error ?? '');

export function describeDelivery(taskId: string, d: DeliveryView, last = true): string {
  const how = d.ok ? `ok ${d.statusCode ?? ''}`.trimEnd() + (d.error ? ` (${d.error})` : '') : `failed${d.statusCode !== null ? ` ${d.statusCode}` : ''}: ${d.error ?? 'no answer'}`;
  const head = `${d.id}  ${d.attemptedAt}  ${d.channel === 'email' ? 'mail' : 'webhook'} ${d.type}  → ${d.url}  attempt ${d.attempt}${d.redelivery ? ' (redelivery)' : ''}  ${how} (${d.durationMs} ms)${d.givenUp ? `; ${whyGivenUp(d)}` : ''}`;
  // (Not for a recipient the deployment does not mail: it would be refused again.)
  if (!last || d.ok || d.type === 'email.outbox' || refusedRecipientError(d.error) || endpointGone(d)) return head;
  return d.givenUp || d.redelivery ? `${head}\n   → baton redeliver ${taskId} ${d.id}` : `${head}\n   (the notifiers try again by themselves)`;
}

/** `baton deliveries`: every attempt, in order, the latest failed attempt of each message with the command that sends it again. */
export function describeDeliveries(taskId: string, items: readonly DeliveryView[]): string[] {
  const message = (d: DeliveryView): string => `${d.channel} ${d.webhookId} ${d.endpointId ?? ''}`;
  const latest = new Map<string, string>();
  for (const d of items) if (Number(d.id) > Number(latest.get(message(d)) ?? -1)) latest.set(message(d), d.id);
  return items.map((d) => describeDelivery(taskId, d, latest.get(message(d)) === d.id));
}

/** A team: its id and description, its lead (whom it delegates to) and its agents, with their models and tools. */
export function describeTeam(t: TeamInfoView, defaultTeam: string | null = null): string {
  const lines = [`${t.id} — ${t.description}${t.id === defaultTeam ? ' (the default team: a task that names none)' : ''}`];
  const delegates = t.lead.delegatesTo.length ? `; delegates to ${t.lead.delegatesTo.join(', ')}` : '';
  const review = t.lead.reviewAgent ? `; reviewed by ${t.lead.reviewAgent}` : '';
  lines.push(`  lead ${t.lead.id} (${t.lead.model}, ${t.lead.maxTurns} turns): ${t.lead.tools.join(', ') || 'no tools'}${delegates}${review}`);
  for (const a of t.agents) {
    const scope = a.fileScope ? `; writes ${a.fileScope.allowed.length ? a.fileScope.allowed.join(', ') : 'anywhere'}${a.fileScope.blocked.length ? `, never ${a.fileScope.blocked.join(', ')}` : ''}` : '';
    lines.push(`  agent ${a.id} (${a.model}, ${a.maxTurns} turns): ${a.tools.join(', ') || 'no tools'}${scope}${a.testCommand ? `; tests: ${a.testCommand}` : ''}`);
  }
  // Without rules, each tool's own default (send_email always; a delegation when the task asks for plan approval).
  for (const r of t.approvals ?? []) lines.push(`  approval: ${r.agent ?? 'any agent'} · ${r.tool ?? 'any tool'} → ${r.require.replaceAll('_', ' ')}, at the deadline ${r.onTimeout}`);
  return lines.join('\n');
}

/** One line per conversation for `baton chats`: id, team, last activity, messages (and tasks made of it), title. */
export function describeChat(c: ChatSummaryView): string {
  return `${c.id}  ${c.team}  ${c.updatedAt}  ${messageCount(c.messages)}${c.tasks ? `, ${c.tasks} task${c.tasks === 1 ? '' : 's'}` : ''}  ${c.title}`;
}

/** `baton chats <id>`: the conversation, each message under a line saying who and when, the tasks where they were started. */
export function describeConversation(c: ChatView): string {
  const lines = [`chat ${c.id}  team ${c.team}  ${messageCount(c.messages.filter((m) => m.error === null).length)}  cost $${c.usage.costUsd.toFixed(4)}`];
  for (const item of chatTimeline(c)) {
    if (item.kind === 'task') {
      lines.push('', `-- started task ${item.task.taskId} (team ${item.task.team}${item.task.leftOut > 0 ? `; ${messageCount(item.task.leftOut)} left out of its prompt` : ''}): baton status ${item.task.taskId}`);
      continue;
    }
    const m = item.message;
    const who = m.role === 'user' ? (m.author ?? 'you') : m.error || m.model === null ? 'assistant' : `assistant (${m.offline ? 'offline model' : m.model})`;
    const cut = m.stopReason === 'max_tokens' ? ' — cut at its length limit (CHAT_MAX_TOKENS)' : '';
    lines.push('', `${who}, ${m.createdAt}${cut}:`, m.error ? `the reply failed (${m.error.code}): ${m.error.message}` : m.text);
  }
  if (unansweredMessage(c)) lines.push('', '(no reply recorded yet: being written, or lost if the gateway stopped mid-reply — send another message to go on)');
  return lines.join('\n');
}

/** What the CLI says when a live stream is opened again: why (the gateway's own words for a refusal), and when. */
export function describeReconnect(r: Reconnect | undefined): string {
  const when = r ? `${Math.round(r.inMs / 100) / 10} s` : '';
  if (r?.cause instanceof ApiError) return `(the gateway refused the stream: ${r.cause.message} (${r.cause.summary}); trying again in ${when})`;
  if (r?.cause) return `(the stream dropped: ${r.cause.message}; reconnecting in ${when})`;
  return '(the stream dropped: reconnecting…)';
}

/** The `{ entry, message }` details of a refusal (a workspace's entries), as lines; none for any other body. */
export function entryProblems(body: unknown): string[] {
  const details = (body as { error?: { details?: unknown } } | null)?.error?.details;
  if (!Array.isArray(details)) return [];
  return details.flatMap((d: { entry?: unknown; message?: unknown }) => (typeof d?.entry === 'string' && typeof d.message === 'string' ? [`${JSON.stringify(d.entry)}: ${d.message}`] : []));
}
