import { allTools, editRefusal, parseToolInput, writePolicyOf } from '@baton/agents';
import { digestJson, exists, forkableVersions, forkEvents, forkFiles, forkRefusal, own, stateAt, uuidV5, type Command, type RecordedEvent, type TaskState } from '@baton/domain';
import { redactCredentials, toAgentViews, toTaskView, type DeliveryView, type GivenUpDeliveryView } from '@baton/api';
import { withSessionLock } from '@baton/db';
import { importTask, taskCommits, type LoadedTask } from '@baton/event-store';
import { mailToResend } from '@baton/mail';
import { currentTraceCarrier } from '@baton/telemetry';
import { ArtifactVersionNotKeptError, copyTaskFiles, findDelivery, findEndpoint, listDeliveries, listGivenUpDeliveries, mailInFlight, mailSendState, readArtifactVersion, requestRedelivery, storeWorkspace, type RecordedDelivery } from '@baton/storage';
import multipart from '@fastify/multipart';
import type { ZodTypeProvider } from '@fastify/type-provider-zod';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayDeps } from '../deps.ts';
import { HttpError, notFound } from '../errors.ts';
import { AgentParams, AnswerBody, ApprovalBody, ArtifactParams, CancelBody, DeliveryParams, ForkBody, GivenUpQuery, NoBody, RequestParams, AtQuery, SubmitTaskBody, succeedsWith, TaskIdParams } from './schemas.ts';
import { runTaskCommand } from './commands.ts';
import { checkSubmission, submitTask, teamNamed } from './submit.ts';
import { readMultipartSubmission, resolveWorkspace, submitBodyLimit } from './workspace-input.ts';

/** The request's Idempotency-Key (POST /v1/tasks, fork, a decision), if it sent one: 1..255 characters. */
function idempotencyKey(req: FastifyRequest): string | undefined {
  const header = req.headers['idempotency-key'];
  const key = typeof header === 'string' ? header.trim() : undefined;
  if (key !== undefined && (key.length === 0 || key.length > 255)) throw new HttpError(400, 'validation_error', 'headers.idempotency-key: must be 1..255 characters');
  return key;
}

/** The tool an approval request asked about, from the log (for a request decided already). */
function askedTool(events: readonly RecordedEvent[], requestId: string): string | undefined {
  const asked = events.find((e) => e.type === 'ApprovalRequested' && (e.data as { requestId?: unknown }).requestId === requestId);
  const tool = (asked?.data as { toolName?: unknown } | undefined)?.toolName;
  return typeof tool === 'string' ? tool : undefined;
}

/** Load a task the caller's tenant may see; another tenant's task is a plain 404. */
export async function loadVisibleTask(d: GatewayDeps, req: FastifyRequest, taskId: string) {
  const loaded = await d.load(taskId);
  if (!exists(loaded.state) || loaded.state.tenantId !== req.tenant) throw notFound(`task ${taskId}`);
  return loaded;
}

/** The task the caller may see: as it is now, or (`at`) as it was right after that version of its stream (404 when there is none). */
export async function visibleStateAt(d: GatewayDeps, req: FastifyRequest, taskId: string, at: number | undefined): Promise<TaskState> {
  const { state, events } = await loadVisibleTask(d, req, taskId);
  if (at === undefined) return state;
  const then = stateAt(events, at);
  if (!then) throw new HttpError(404, 'not_found', `the task stream has no version ${at} (it is at version ${state.version})`);
  return then;
}

export const taskRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const r = app.withTypeProvider<ZodTypeProvider>();

  // multipart/form-data is parsed in a scope of its own: only POST /v1/tasks accepts it (every other route answers 415).
  await app.register(async (scope) => {
    await scope.register(multipart); // its limits are set where the parts are read (readMultipartSubmission)
    scope.withTypeProvider<ZodTypeProvider>().post(
      '/v1/tasks',
      {
        // JSON may carry a base64 workspace archive; every other route keeps the default limit.
        bodyLimit: submitBodyLimit(d),
        preValidation: async (req) => readMultipartSubmission(d, req),
        schema: { body: SubmitTaskBody, response: succeedsWith(201, 'The task, created (with Idempotency-Key repeated: the same task, and idempotent-replayed: true)'), tags: ['tasks'], summary: 'Submit a task (JSON, or multipart/form-data: a task field with the JSON body and a workspace file part with a .tar.gz)' },
      },
      async (req, reply) => {
        const { workspace: workspaceInput, ...named } = req.body;
        const key = idempotencyKey(req);
        const taskId = key ? uuidV5(`${req.tenant}\n${key}`) : d.newId();
        // The default team is written in: the request hash, the log and every view name the team. A
        // request repeated under its key that names no team is the task it made, whatever the
        // default is now (a changed BATON_DEFAULT_TEAM had answered a client's retry 422 or 400).
        const made = key && named.team === undefined ? (await d.load(taskId)).state : null;
        const body = { ...named, team: made && exists(made) ? made.team : teamNamed(d, named.team, 'body.team') };
        checkSubmission(d, req.tenant, body);
        // Checked and digested now; stored only if this request creates the task.
        const workspace = await resolveWorkspace(d, workspaceInput, req.workspaceUpload);
        // The request hash covers the workspace by its digest (the same files by JSON or multipart are the same request).
        const requestHash = key ? digestJson(workspace ? { ...body, workspace: { digest: workspace.digest, source: workspace.source, name: workspace.name } } : body) : null;
        const { state, replayed } = await submitTask(d, req, body, {
          taskId,
          repeatable: key !== undefined,
          requestHash,
          eventMetadata: key ? { idempotencyKey: key } : {},
          workspace: async () => {
            if (!workspace) return null;
            const stored = await d.bulk(() => storeWorkspace(d.pool, workspace.files));
            return { digest: stored.digest, source: workspace.source, name: workspace.name, files: stored.files, bytes: stored.bytes };
          },
        });
        if (replayed) void reply.header('idempotent-replayed', 'true');
        return reply.status(201).send(toTaskView(state));
      },
    );
  });

  r.get('/v1/tasks/:id', { schema: { params: TaskIdParams, tags: ['tasks'], summary: 'Get a task' } }, async (req) => {
    const { state } = await loadVisibleTask(d, req, req.params.id);
    return toTaskView(state);
  });

  /** Run a user command against a visible task (retried on version conflicts) and answer with the task; `visible`: the task loaded already. */
  const command = async (req: FastifyRequest, reply: FastifyReply, taskId: string, make: (s: TaskState) => Command, visible?: LoadedTask) => {
    const task = visible ?? (await loadVisibleTask(d, req, taskId));
    const res = await runTaskCommand(d, taskId, task, make, req.actor);
    // Nothing recorded: a decision sent again under its Idempotency-Key (a retry that never saw its answer).
    if (res.events.length === 0) void reply.header('idempotent-replayed', 'true');
    return toTaskView(res.state);
  };

  r.post('/v1/tasks/:id/approvals/:requestId', { schema: { params: RequestParams, body: ApprovalBody, tags: ['requests'], summary: 'Approve (optionally with edited input) or reject a request' } }, async (req, reply) => {
    const { id, requestId } = req.params;
    const body = req.body;
    const visible = await loadVisibleTask(d, req, id);
    // An edit is checked against the configuration the run is pinned to, not this gateway's current
    // one (an agent added since would pass here and fail in the run, the approval used up).
    const team = body.input !== undefined ? await d.catalog.resolve(visible.state.team, visible.state.lead?.configVersion) : undefined;
    return command(req, reply, id, (s) => {
      // The tool the approval asks about — of the request decided already too: a decision sent
      // again is compared with the one recorded as it was recorded (parsed, defaults filled in).
      const open = own(s.pendingRequests, requestId);
      const asked = open?.kind === 'approval' ? open.toolName : own(s.decidedRequests, requestId) ? askedTool(visible.events, requestId) : undefined;
      let input = body.input;
      if (body.decision === 'approve' && input !== undefined && asked !== undefined) {
        const tool = allTools[asked];
        if (tool) {
          // The same checks the model's own call had (a plan's agents, dependencies and locks).
          const parsed = parseToolInput(tool, input, team);
          if (!parsed.ok) throw new HttpError(400, 'validation_error', parsed.issues.map((i) => `body.input.${i.path}: ${i.message}`).join('; '), parsed.issues.map((i) => ({ field: `body.input.${i.path}`, message: i.message })));
          input = parsed.value;
          // And the path rules the run applies to the agent that asked (its file scope, its
          // subtask's locks): an edit it could never run is refused now, the request still open.
          if (open?.kind === 'approval') {
            const agent = own(s.agents, open.agentId);
            const def = agent ? team?.agents[agent.type] : team?.lead;
            const refusal = editRefusal(writePolicyOf(def ?? {}, s, open.agentId), asked, input);
            if (refusal) throw new HttpError(400, 'validation_error', `body.input.path: ${refusal}`, [{ field: 'body.input.path', message: refusal }]);
          }
        }
      }
      return { type: 'DecideApproval', requestId, decision: body.decision, input, reason: body.reason, budget: body.budget, decidedBy: req.actor, idempotencyKey: idempotencyKey(req) };
    }, visible);
  });

  r.post('/v1/tasks/:id/answers/:requestId', { schema: { params: RequestParams, body: AnswerBody, tags: ['requests'], summary: 'Answer a clarification request' } }, async (req, reply) => {
    const answers = typeof req.body.answers === 'string' ? [req.body.answers] : req.body.answers;
    return command(req, reply, req.params.id, () => ({ type: 'AnswerClarification', requestId: req.params.requestId, answers, answeredBy: req.actor, idempotencyKey: idempotencyKey(req) }));
  });

  r.post('/v1/tasks/:id/cancel', { schema: { params: TaskIdParams, body: CancelBody, tags: ['tasks'], summary: 'Cancel a task' } }, async (req, reply) => {
    return command(req, reply, req.params.id, () => ({ type: 'CancelTask', reason: req.body?.reason ?? 'cancelled by user', requestedBy: req.actor }));
  });

  r.post('/v1/tasks/:id/fork', { schema: { params: TaskIdParams, body: ForkBody, response: succeedsWith(201, 'The new task'), tags: ['tasks'], summary: 'Fork a task: a new task whose history is a copy up to a version, which then continues' } }, async (req, reply) => {
    const source = await loadVisibleTask(d, req, req.params.id);
    const { atVersion } = req.body;
    // Past the end, the end itself (a fork cannot continue from a finished task's final event), or between two events of one commit: one refusal, naming where it can.
    const commits = await taskCommits(d.store, source.state.id);
    const refusal = forkRefusal(forkableVersions(source.events, commits), atVersion, source.state.version);
    if (refusal) throw new HttpError(422, 'invalid_version', `body.atVersion: ${refusal}`, [{ field: 'body.atVersion', message: refusal }]);
    const copy = async (newId: string) => {
      req.trace.span?.setAttribute('baton.fork_task_id', newId);
      const copied = forkEvents(source.events, atVersion, newId, { now: d.now(), requestedBy: req.actor, commits, trace: currentTraceCarrier() });
      // Files first (artifacts the copied history names, workspaces of live sandboxes): the fork's agents resume with them.
      return d.bulk(async () => {
        await copyTaskFiles(d.pool, source.state.id, newId, forkFiles(source.events, copied));
        return importTask(d.store, newId, copied, { now: d.now });
      });
    };
    // With an Idempotency-Key, a retried fork (a timeout, a double click) is the same fork: one
    // request at a time makes it (two at once would each copy their files into it), and a key
    // used for another fork is refused.
    const key = idempotencyKey(req);
    if (!key) return reply.status(201).send(toTaskView((await copy(d.newId())).state));
    const newId = uuidV5(`${req.tenant}\nfork\n${key}`);
    return withSessionLock(d.pool, `baton.fork:${newId}`, async () => {
      const earlier = (await d.load(newId)).state;
      if (!exists(earlier)) return reply.status(201).send(toTaskView((await copy(newId)).state));
      const from = earlier.forkedFrom;
      if (earlier.tenantId !== req.tenant || from?.taskId !== source.state.id || from.atVersion !== atVersion)
        throw new HttpError(422, 'idempotency_key_reused', `this Idempotency-Key was already used for another fork${from ? ` (of task ${from.taskId} at version ${from.atVersion})` : ''}`);
      void reply.header('idempotent-replayed', 'true');
      return reply.status(201).send(toTaskView(earlier));
    });
  });

  r.get('/v1/tasks/:id/agents', { schema: { params: TaskIdParams, tags: ['tasks'], summary: 'Every agent of the task (the lead first): status, subtask, file locks, turns, current action, progress, files, tests, open question' } }, async (req) => {
    const { state } = await loadVisibleTask(d, req, req.params.id);
    return { items: toAgentViews(state) };
  });

  r.get('/v1/tasks/:id/agents/:agentId', { schema: { params: AgentParams, tags: ['tasks'], summary: 'One agent of the task' } }, async (req) => {
    const { state } = await loadVisibleTask(d, req, req.params.id);
    const agent = toAgentViews(state).find((a) => a.id === req.params.agentId);
    if (!agent) throw notFound(`agent '${req.params.agentId}' of task ${req.params.id}`);
    return agent;
  });

  // Rows recorded before credentials in webhook URLs were refused may hold them: never shown.
  const deliveryView = (r: RecordedDelivery): DeliveryView => ({ ...r, url: redactCredentials(r.url), error: r.error === null ? null : redactCredentials(r.error), attemptedAt: r.attemptedAt.toISOString() });

  r.get('/v1/tasks/:id/deliveries', { schema: { params: TaskIdParams, tags: ['webhooks'], summary: 'Webhook delivery attempts' } }, async (req) => {
    await loadVisibleTask(d, req, req.params.id);
    return { items: (await listDeliveries(d.pool, req.params.id)).map(deliveryView) };
  });

  r.get('/v1/deliveries', { schema: { querystring: GivenUpQuery, tags: ['webhooks'], summary: "What the notifiers gave up on across the tenant's tasks, newest first: each webhook message or mail whose last attempt is given up (a redelivery since that went through, none)" } }, async (req) => {
    const limit = req.query.limit ?? 100;
    const items = await listGivenUpDeliveries(d.pool, { tenantId: req.tenant, limit, ...(req.query.before !== undefined ? { before: String(req.query.before) } : {}) });
    return { items: items.map((r): GivenUpDeliveryView => ({ ...deliveryView(r), taskId: r.taskId })), nextBefore: items.length === limit ? (items.at(-1)?.id ?? null) : null };
  });

  // Redelivery (docs/webhooks.md, docs/email.md): recorded here, sent by a notifier (it holds the signing secret, the egress guard and the SMTP server).
  r.post('/v1/tasks/:id/deliveries/:deliveryId/redeliver', { schema: { params: DeliveryParams, body: NoBody, response: succeedsWith(202, 'Queued: {redeliveryId, deliveryId, webhookId, status}'), tags: ['webhooks'], summary: "Send a delivery's webhook message, or its notification mail, again now (a new attempt, listed in /deliveries)" } }, async (req, reply) => {
    const { id, deliveryId } = req.params;
    const loaded = await loadVisibleTask(d, req, id);
    const delivery = await findDelivery(d.pool, id, deliveryId);
    if (!delivery) throw notFound(`delivery ${deliveryId} of task ${id}`);
    if (delivery.channel === 'email') {
      // Refused now what the notifier would only record as not sent (it asks again before sending).
      const resend = mailToResend(delivery, loaded.events, loaded.state);
      if (!resend.ok) throw new HttpError(409, resend.code, `delivery ${deliveryId}: ${resend.message}`);
      const ledger = await mailSendState(d.pool, { taskId: id, key: resend.mail.key, recipient: resend.mail.recipient });
      if (mailInFlight(ledger)) throw new HttpError(409, 'mail_in_flight', `delivery ${deliveryId}: the notifiers are still trying to send this mail (attempt ${ledger?.attempts ?? 0} so far): it is sent again by itself; ask once they have given up`);
    }
    if (delivery.endpointId && !(await findEndpoint(d.pool, delivery.endpointId))) throw new HttpError(409, 'endpoint_deleted', `delivery ${deliveryId} went to the tenant's endpoint ${delivery.endpointId}, which has been deleted: there is nothing to send it to`);
    const redeliveryId = await requestRedelivery(d.pool, { taskId: id, deliveryId, requestedBy: req.actor });
    return reply.status(202).send({ redeliveryId, deliveryId, webhookId: delivery.webhookId, status: 'queued' });
  });

  // Artifacts: the log says which exist (ArtifactStored) and in which version; the bytes of every version are kept (artifact_versions).
  r.get('/v1/tasks/:id/artifacts', { schema: { params: TaskIdParams, querystring: AtQuery, tags: ['artifacts'], summary: 'Files the agents produced (?at=N: as they were after version N of the task stream)' } }, async (req) => {
    const state = await visibleStateAt(d, req, req.params.id, req.query.at);
    return { items: state.artifacts.map((a) => ({ path: a.path, bytes: a.bytes, sha256: a.sha256, mediaType: a.mediaType, agentId: a.agentId })) };
  });

  r.get('/v1/tasks/:id/artifacts/*', { schema: { params: ArtifactParams, querystring: AtQuery, tags: ['artifacts'], summary: 'Download one artifact, with its media type (?at=N: its content after version N of the task stream)' } }, async (req, reply) => {
    const state = await visibleStateAt(d, req, req.params.id, req.query.at);
    const file = req.params['*'];
    // Typed in the other Unicode spelling (a Mac's decomposed `café` asked composed): the same name
    // to a person, one file at most (a twin spelling is refused when written).
    const listed = state.artifacts.find((a) => a.path === file) ?? state.artifacts.find((a) => a.path.normalize('NFC') === file.normalize('NFC'));
    if (!listed) {
      // A file of the codebase it started from is not an artifact (unless an agent wrote it): say where those are.
      const started = state.workspace ? ` (artifacts are the files its agents wrote; the files it started from are in GET /v1/tasks/${req.params.id}/archive${req.query.at !== undefined ? `?at=${req.query.at}` : ''})` : '';
      throw new HttpError(404, 'not_found', `artifact '${file}' of task ${req.params.id}${req.query.at !== undefined ? ` at version ${req.query.at}` : ''} not found${started}`);
    }
    // The bytes of the version the log names (kept for every version since migration 013).
    const content = await d.bulk(() => readArtifactVersion(d.pool, req.params.id, listed.sha256));
    if (!content) versionGone(new ArtifactVersionNotKeptError(req.params.id, file, listed.sha256));
    return reply
      .header('content-type', listed.mediaType)
      .header('etag', `"${listed.sha256}"`)
      .header('content-disposition', contentDisposition('inline', file.split('/').pop() ?? file))
      .header('content-security-policy', "default-src 'none'; sandbox")
      .send(content);
  });
};

/**
 * A Content-Disposition naming a file (RFC 6266): `filename` in plain ASCII for old clients (other
 * characters, quotes and backslashes as `_`), `filename*` the exact name in UTF-8 (RFC 8187).
 */
export function contentDisposition(type: 'inline' | 'attachment', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `${type}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

/** A recorded version whose bytes are not kept is gone for good: 410, naming it. */
export function versionGone(err: unknown): never {
  if (err instanceof ArtifactVersionNotKeptError) throw new HttpError(410, 'version_not_kept', err.message);
  throw err;
}
