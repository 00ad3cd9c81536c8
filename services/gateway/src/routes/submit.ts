import { exists, initialState, own, recipientsRefused, recipientsRefusedMessage, uuidV5, type Budget, type Command, type InputWorkspace, type NotifyConfig, type TaskState } from '@baton/domain';
import { configVersion } from '@baton/agents';
import { webhookUrlProblem } from '@baton/api';
import { publishWakeUps } from '@baton/bus';
import { isConcurrencyError, loadTask, TaskWriter } from '@baton/event-store';
import type { FastifyRequest } from 'fastify';
import { tenantDefault, type GatewayDeps } from '../deps.ts';
import { HttpError } from '../errors.ts';
import { DEFAULT_TEAM, type SubmitTaskBody } from './schemas.ts';

/**
 * The one submit path: POST /v1/tasks and a chat turned into a task (POST /v1/chats/:id/task)
 * both record their TaskSubmitted here.
 */

/** What a new task is made of: POST /v1/tasks' body without its workspace (given apart, already stored), its team resolved (`teamNamed`: the one named, or the gateway's default). */
export type TaskSubmission = Omit<SubmitTaskBody, 'workspace' | 'team'> & { team: string };

/** A budget as the log records it (a measure not named has no limit); none given: null. */
const budgetFor = (b: { usd?: number | undefined; tokens?: number | undefined } | undefined): Budget | null => (b ? { usd: b.usd ?? null, tokens: b.tokens ?? null } : null);

/**
 * The gateway's default team: BATON_DEFAULT_TEAM, which must be configured (else a problem to
 * stop on); unset: `research` if configured, else the only team, else none (a task or chat must
 * name one).
 */
export function defaultTeamOf(teams: Readonly<Record<string, unknown>>, configured: string | undefined): { team: string | null } | { problem: string } {
  const ids = Object.keys(teams);
  if (configured !== undefined) return own(teams, configured) ? { team: configured } : { problem: `BATON_DEFAULT_TEAM: '${configured}' is not a configured team (configured: ${ids.join(', ')})` };
  if (own(teams, DEFAULT_TEAM)) return { team: DEFAULT_TEAM };
  return { team: ids.length === 1 ? (ids[0] as string) : null };
}

/** The team a task or chat names, or the gateway's default; none, or one not configured here: a 400 naming the field and what is. */
export function teamNamed(d: Pick<GatewayDeps, 'teams' | 'defaultTeam'>, name: string | undefined, field: string): string {
  const configured = Object.keys(d.teams).join(', ');
  if (name === undefined && d.defaultTeam === null) throw new HttpError(400, 'validation_error', `${field}: name a team: this gateway has no default team (BATON_DEFAULT_TEAM); configured: ${configured}`, [{ field, message: 'required' }]);
  const team = name ?? (d.defaultTeam as string);
  if (!own(d.teams, team)) throw new HttpError(400, 'validation_error', `${field}: unknown team '${team}'; configured: ${configured}`, [{ field, message: 'unknown team' }]);
  return team;
}

/** The checks of a submission beyond its schema: a configured team, a webhook URL that can be delivered to (400 naming the field). */
export function checkSubmission(d: GatewayDeps, tenant: string, body: Pick<TaskSubmission, 'team' | 'webhook' | 'notify'>): void {
  teamNamed(d, body.team, 'body.team');
  // What can never be delivered is refused now (the notifier checks resolved addresses again at delivery).
  const webhookProblem = body.webhook ? webhookUrlProblem(body.webhook.url, { allowPrivateNetworks: d.allowPrivateWebhooks }) : null;
  if (webhookProblem) throw new HttpError(400, 'validation_error', `body.webhook.url: ${webhookProblem}`, [{ field: 'body.webhook.url', message: webhookProblem }]);
  // Mail only where this deployment lets the tenant's mail go (MAIL_ALLOWED_RECIPIENTS; the notifier checks again).
  const rules = d.mailRecipients;
  const to = body.notify?.email.to ?? [];
  const refused = new Set(recipientsRefused(rules, tenant, to));
  if (rules && refused.size > 0) {
    const fields = to.flatMap((a, i) => (refused.has(a) ? [{ field: `body.notify.email.to.${i}`, message: recipientsRefusedMessage(rules, tenant, [a]) }] : []));
    throw new HttpError(400, 'validation_error', fields.map((f) => `${f.field}: ${f.message}`).join('; '), fields);
  }
}

/**
 * The tenant's default recipients (TENANT_NOTIFY, its own or `*`'s) less those it may not mail
 * (MAIL_ALLOWED_RECIPIENTS): `*`'s default meets each tenant's own rule here (none left: no
 * notify). A tenant's own default was checked at start.
 */
function defaultNotify(d: GatewayDeps, tenant: string): NotifyConfig | null {
  const notify = tenantDefault(d.notify, tenant);
  if (!notify) return null;
  const refused = new Set(recipientsRefused(d.mailRecipients, tenant, notify.email.to));
  if (refused.size === 0) return notify;
  const to = notify.email.to.filter((a) => !refused.has(a));
  return to.length > 0 ? { email: { ...notify.email, to } } : null;
}

export interface SubmitOptions {
  taskId: string;
  /**
   * The request may repeat (an Idempotency-Key, a chat at the same message): the task id is
   * derived from it, and a task already there is answered again if `requestHash` matches (else 422).
   */
  repeatable: boolean;
  requestHash: string | null;
  /** Metadata on TaskSubmitted's event (the actor is always there). */
  eventMetadata?: Record<string, unknown>;
  /** Stores the task's input files (only once it is known the task is new); null: none. */
  workspace?: () => Promise<InputWorkspace | null>;
}

export interface Submitted {
  state: TaskState;
  /** The task was there already (a repeated request): nothing was recorded. */
  replayed: boolean;
}

/** A repeated request: the same task if the body matches, 422 if it does not. */
function replay(state: TaskState, firstEvent: { type: string; data: unknown } | undefined, requestHash: string | null): Submitted {
  const originalHash = firstEvent?.type === 'TaskSubmitted' ? (firstEvent.data as { requestHash: string | null }).requestHash : null;
  if (originalHash !== requestHash) throw new HttpError(422, 'idempotency_key_reused', 'this Idempotency-Key was already used with a different request body');
  return { state, replayed: true };
}

/** Record TaskSubmitted for a checked submission (checkSubmission) and wake the orchestrator. */
export async function submitTask(d: GatewayDeps, req: FastifyRequest, body: TaskSubmission, o: SubmitOptions): Promise<Submitted> {
  const { taskId } = o;
  if (o.repeatable) {
    const existing = await loadTask(d.store, taskId);
    if (exists(existing.state)) return replay(existing.state, existing.events[0], o.requestHash);
  }
  // The configuration it is accepted with is recorded first: an orchestrator that has not loaded it (a rolling update) reads it there.
  await d.teamsRecorded();
  // The files are in Postgres before the log names them.
  const workspace = o.workspace ? await o.workspace() : null;
  const acceptedTeam = own(d.teams, body.team);
  const command: Command = {
    type: 'SubmitTask',
    prompt: body.prompt,
    team: body.team,
    requirePlanApproval: body.requirePlanApproval,
    approvalTimeoutSeconds: body.approvalTimeoutSeconds,
    webhook: body.webhook ?? null,
    metadata: body.metadata,
    tenantId: req.tenant,
    requestHash: o.requestHash,
    forkedFrom: null,
    workspace,
    budget: budgetFor(body.budget ?? tenantDefault(d.budgets, req.tenant)),
    // Recorded with the task (a replay or a fork sees it); the request's replaces the tenant's default.
    notify: body.notify ?? defaultNotify(d, req.tenant),
    // The configuration it was accepted with (checkSubmission: configured here): its run starts on it.
    ...(acceptedTeam ? { configVersion: configVersion(acceptedTeam) } : {}),
  };
  try {
    const writer = new TaskWriter(d.store, taskId, initialState(), { now: d.now });
    writer.apply(command, { metadata: { actor: req.actor, ...o.eventMetadata }, ...(o.repeatable ? { eventIds: [uuidV5(`${taskId}:submitted`)] } : {}) });
    const recorded = await writer.flush();
    if (recorded.length === 0) {
      // Nothing new: a request with this key recorded the task first (its event id is the key's),
      // so this one is its replay — or, with another body, refused (it had been answered 201 with
      // the other request's task).
      const existing = await loadTask(d.store, taskId);
      return replay(existing.state, existing.events[0], o.requestHash);
    }
    publishWakeUps(d.nats(), d.names, recorded);
    d.tenants.remember(taskId, req.tenant);
    d.metrics.tasksSubmitted.inc({ team: body.team });
    return { state: writer.state, replayed: false };
  } catch (err) {
    // Two requests raced: the other one created it.
    if (o.repeatable && isConcurrencyError(err)) {
      const existing = await loadTask(d.store, taskId);
      return replay(existing.state, existing.events[0], o.requestHash);
    }
    throw err;
  }
}
