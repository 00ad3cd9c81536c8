import { DEFAULT_WEBHOOK_TYPES, EVENT_TYPES, isEventType, isStepEvent, NotifyConfig, STEP_EVENT_TYPES, WEBHOOK_MESSAGE_TYPES, type EventType } from '@baton/domain';
import { EXAMPLE_NAME } from '@baton/storage';
import { z } from 'zod';

/**
 * A non-negative integer from a query string or header: digits only — no sign, exponent,
 * fraction, spaces or empty value (what z.coerce.number would let through as 1000, 0, …).
 */
const digits = z.string().regex(/^\d{1,15}$/, 'must be a non-negative integer of at most 15 digits (digits only)');
/** A whole number from `min` to `max`: one message for every way to miss (`-1`, `0`, `x`, too big). */
export const queryInt = (min: number, max: number) => {
  const range = max === Number.MAX_SAFE_INTEGER ? `a whole number, ${min} or more` : `a whole number from ${min} to ${max}`;
  // Digits past the largest it takes are told so (a 20-digit number had been told it was not a whole number).
  const tooLarge = max === Number.MAX_SAFE_INTEGER ? `must be ${range} (at most ${max})` : `must be ${range}`;
  return z
    .string()
    .superRefine((v, ctx) => {
      if (!/^\d+$/.test(v)) ctx.addIssue({ code: 'custom', message: `must be ${range}` });
      else if (v.replace(/^0+(?=\d)/, '').length > 16 || Number(v) > max) ctx.addIssue({ code: 'custom', message: tooLarge }); // by value: 0005 is 5
    })
    .transform(Number)
    .pipe(z.number().int().min(min, `must be ${range}`));
};
/** An event's position in a task (its SSE id): where to resume after. */
const Position = digits.describe('An event position (its SSE id)').transform(Number);

/** A task id in a URL, in lowercase as Postgres and the bus spell it (a stream opened for `…/A1B2…` is woken by the task's messages, and a cache keeps one entry per task). */
export const TaskIdParams = z.object({ id: z.uuid('must be a task id (UUID)').transform((id) => id.toLowerCase()) });
export const ArtifactParams = TaskIdParams.extend({ '*': z.string().min(1).max(1024).describe('The artifact path, e.g. report.md') });
export const AgentParams = TaskIdParams.extend({ agentId: z.string().min(1).max(100).regex(/^[a-z0-9][a-z0-9_-]*$/, 'an agent id (lowercase letters, digits, - and _)') });
export const RequestParams = TaskIdParams.extend({ requestId: z.string().min(1).max(100) });
export const DeliveryParams = TaskIdParams.extend({ deliveryId: z.string().regex(/^[1-9][0-9]{0,17}$/, 'must be a delivery id (the id of an item of GET /v1/tasks/:id/deliveries)') });

/**
 * A webhook type: a task's or an agent's moment, or `event.<EventType>` for an event type the bus
 * carries. An agent's steps (model turns, tool results) are not relayed, so they can make no
 * webhook: refused with where to follow them instead, rather than accepted and never sent.
 */
export const webhookType = z
  .string()
  .refine((t) => (WEBHOOK_MESSAGE_TYPES as readonly string[]).includes(t) || /^event\.[A-Za-z]+$/.test(t), `one of ${WEBHOOK_MESSAGE_TYPES.join(', ')} or event.<EventType>`)
  .superRefine((t, ctx) => {
    if (!t.startsWith('event.')) return;
    const type = t.slice('event.'.length);
    if (isStepEvent(type)) ctx.addIssue({ code: 'custom', message: `an agent's steps (${STEP_EVENT_TYPES.join(', ')}) make no webhook (they are not sent on the bus); follow them with GET /v1/tasks/:id/events` });
    else if (!isEventType(type)) ctx.addIssue({ code: 'custom', message: `unknown event type '${type}'; known: ${EVENT_TYPES.filter((e) => !isStepEvent(e)).join(', ')}` });
  });

/** A webhook's address: http(s), and no longer than URLs are taken by servers and proxies at large. */
export const WebhookUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048, 'must be at most 2048 characters');
/** The types a webhook is sent for, each once (none named: DEFAULT_WEBHOOK_TYPES). */
const WebhookTypes = z
  .array(webhookType)
  .min(1)
  .max(50)
  .superRefine((types, ctx) => {
    types.forEach((t, i) => {
      if (types.indexOf(t) !== i) ctx.addIssue({ code: 'custom', path: [i], message: `'${t}' is listed twice` });
    });
  })
  .default(DEFAULT_WEBHOOK_TYPES);

/** The files a task starts from: a configured example, or a .tar.gz upload (base64 in JSON; a file part in multipart). */
export const WorkspaceInput = z
  .strictObject({
    example: z.string().regex(EXAMPLE_NAME, 'must be an example name (lowercase letters, digits, - and _)').max(100).optional().describe('A configured example project (GET /v1/examples)'),
    archiveBase64: z.base64('must be base64 (of a .tar.gz)').min(1, 'must not be empty').optional().describe('A .tar.gz of the project, base64-encoded'),
    name: z.string().trim().min(1).max(255).optional().describe('A name for the upload (e.g. its file name)'),
  })
  .superRefine((w, ctx) => {
    if ((w.example === undefined) === (w.archiveBase64 === undefined)) ctx.addIssue({ code: 'custom', message: 'give exactly one of example or archiveBase64' });
    if (w.example !== undefined && w.name !== undefined) ctx.addIssue({ code: 'custom', path: ['name'], message: 'goes with archiveBase64 only (an example is named by example)' });
  });
export type WorkspaceInput = z.infer<typeof WorkspaceInput>;

/** A spending limit: US dollars and/or tokens (input, output and cache, over every agent of the task). */
export const BudgetInput = z
  .strictObject({
    usd: z.number().positive('must be above 0').max(1_000_000).optional().describe('Limit in US dollars'),
    tokens: z.number().int('must be a whole number').positive('must be above 0').max(1e12).optional().describe('Limit in tokens (input, output and cache)'),
  })
  .refine((b) => b.usd !== undefined || b.tokens !== undefined, 'name usd and/or tokens');
export type BudgetInput = z.infer<typeof BudgetInput>;

/** The default team when BATON_DEFAULT_TEAM is not set, if it is configured (`defaultTeamOf`). */
export const DEFAULT_TEAM = 'research';

export const SubmitTaskBody = z.strictObject({
  prompt: z.string().trim().min(1, 'must not be empty').max(20_000, 'must be at most 20000 characters'),
  team: z.string().min(1).max(100).optional().describe("The team (GET /v1/teams); default: the gateway's default team (BATON_DEFAULT_TEAM; research if configured), GET /v1/teams' `default`"),
  requirePlanApproval: z.boolean().default(true),
  approvalTimeoutSeconds: z.number().int().min(1).max(30 * 24 * 3600).default(600),
  webhook: z
    .strictObject({
      url: WebhookUrl,
      events: WebhookTypes,
    })
    .optional(),
  metadata: z.record(z.string(), z.unknown()).default({}).refine((m) => JSON.stringify(m).length <= 16_384, 'must serialise to at most 16 KiB'),
  workspace: WorkspaceInput.optional(),
  /** Reaching it pauses the run with a request of kind budget; absent: the tenant's default budget, if one is configured. */
  budget: BudgetInput.optional(),
  /** Who is mailed, at which moments (docs/email.md); absent: the tenant's default (TENANT_NOTIFY), if one is configured. */
  notify: NotifyConfig.optional(),
});
export type SubmitTaskBody = z.infer<typeof SubmitTaskBody>;

/** Query strings are strict: a misspelt parameter (`?state=running`) is a 400 naming it, not a filter silently ignored. */
export const ListTasksQuery = z.strictObject({
  status: z.enum(['pending', 'running', 'awaiting_input', 'completed', 'failed', 'cancelled']).optional(),
  team: z.string().min(1).max(100).optional(),
  limit: queryInt(1, 200).default(50),
  cursor: z.string().max(200).optional(),
  /** Only tasks whose prompt, as listed (its first 200 characters), contains this text, ignoring case (% and _ are plain characters). */
  search: z.string().trim().min(1, 'must not be blank').max(200).optional(),
  /** true: only tasks stuck — work no person holds, no transition for STUCK_AFTER_MS, nobody holding a live lease. */
  stuck: z.enum(['true', 'false'], { error: "must be 'true' or 'false'" }).optional(),
  /**
   * Only tasks that changed after this time (ISO 8601 with a zone, e.g. an item's `updatedAt`):
   * a poller asks for what moved since it last looked, not for every task again.
   */
  updatedAfter: z.iso
    .datetime({
      offset: true,
      // What arrived is named (cut): a '+' of a zone not sent as %2B arrives as a space, and the time looks right as sent.
      error: (iss) => {
        const got = typeof iss.input === 'string' ? iss.input.slice(0, 60) : '';
        return `must be an ISO 8601 time with a zone, e.g. 2026-11-26T12:00:00.000Z; got '${got}'${/ \d\d:?\d\d$/.test(got) ? " (a '+' in a query string is sent as %2B: unencoded it arrives as a space)" : ''}`;
      },
    })
    .optional(),
  /** Only the forks of this task (a task id), newest first. */
  forkedFrom: z.uuid('must be a task id (UUID)').transform((id) => id.toLowerCase()).optional(),
});

export const ApprovalBody = z
  .strictObject({
    decision: z.enum(['approve', 'reject']),
    input: z.record(z.string(), z.unknown()).optional(),
    reason: z.string().max(4000).optional(),
    /** Approving a budget request: the new limit (measures not named keep theirs). */
    budget: BudgetInput.optional(),
  })
  // What the decision would drop is refused, not accepted and lost: an edited input or a new limit
  // is an approval's, a reason (which the agent reads) a rejection's.
  .superRefine((b, ctx) => {
    if (b.decision === 'reject' && b.input !== undefined) ctx.addIssue({ code: 'custom', path: ['input'], message: "an edited input goes with decision 'approve' (a rejection runs nothing)" });
    if (b.decision === 'reject' && b.budget !== undefined) ctx.addIssue({ code: 'custom', path: ['budget'], message: "a new limit goes with decision 'approve' (a rejection stops the run at its budget)" });
    if (b.decision === 'approve' && b.reason !== undefined) ctx.addIssue({ code: 'custom', path: ['reason'], message: "a reason goes with decision 'reject' (the agent re-plans with it); an approval records none" });
  });

export const AnswerBody = z.strictObject({
  answers: z.union([z.string().trim().min(1, 'must not be empty').max(20_000), z.array(z.string().trim().min(1, 'must not be empty').max(20_000)).min(1).max(50)], {
    error: 'must be an answer (a string of 1–20000 characters) or a list of 1–50 of them, one per question',
  }),
});

export const ForkBody = z.strictObject({
  atVersion: z.number().int().min(1, 'must be a version of the task stream (1 or more)'),
});

export const CancelBody = z.strictObject({ reason: z.string().max(4000).optional() }).nullish();

/**
 * What a route answers when it succeeds with a status other than 200, for the OpenAPI document and
 * docs/api.md (the body is the API's own view, serialized as it is: not validated again).
 */
export const succeedsWith = (status: 201 | 202 | 204, description: string) => ({ [status]: z.unknown().describe(description) });

/** A route that takes no body: none, or an empty object — any field is refused by name, not ignored. */
export const NoBody = z.strictObject({}).nullish();
/**
 * The query of an API route that takes none (set on every such route by the app): a parameter is
 * refused naming it; `at` says where the task as it was at a version is read.
 */
export const NoQuery = z.strictObject({
  at: z.never({ error: 'this route has no ?at=: the task as it was after a version is GET /v1/tasks/:id/state?at=N (its files: /artifacts?at=N, /diff?at=N, /archive?at=N)' }).optional(),
});
/** Which team configuration verify checks a run with: the one the run was pinned to (default), or the one loaded now. */
export const VerifyQuery = z.strictObject({
  config: z.enum(['pinned', 'current'], { error: "must be 'pinned' or 'current'" }).default('pinned'),
});

export const EventsQuery = z.strictObject({
  after: Position.optional(),
  limit: queryInt(1, 5000).default(1000),
  /** false: transitions only (status changes, agents, requests, decisions, artifacts) — no model turns or tool results. */
  steps: z.enum(['true', 'false'], { error: "must be 'true' or 'false'" }).default('true').transform((v) => v === 'true'),
  /** Only events of these types, comma-separated (the JSON list; an SSE stream refuses it). */
  type: z
    .string()
    .max(4000)
    .transform((s, ctx) => {
      const types = [...new Set(s.split(',').map((t) => t.trim()).filter((t) => t !== ''))];
      if (types.length === 0) ctx.addIssue({ code: 'custom', message: 'name at least one event type (comma-separated)' });
      for (const t of types) if (!isEventType(t)) ctx.addIssue({ code: 'custom', message: `unknown event type '${t}'; known: ${EVENT_TYPES.join(', ')}` });
      return types as EventType[];
    })
    .optional(),
});

export const DiffQuery = z.strictObject({ format: z.enum(['text', 'json'], { error: "must be 'text' or 'json'" }).default('text'), at: queryInt(1, Number.MAX_SAFE_INTEGER).optional() });

/** SSE resumes after `Last-Event-ID` (an event's position); any other header is left alone. */
export const EventsHeaders = z.looseObject({ 'last-event-id': Position.optional() });

/** `?at=N`: as it stood after version N of the task stream (now without it). */
export const AtQuery = z.strictObject({ at: queryInt(1, Number.MAX_SAFE_INTEGER).optional() });

export const WebhookIdParams = z.object({ webhookId: z.uuid('must be a webhook id (UUID)') });
export const WebhookBody = z.strictObject({
  url: WebhookUrl,
  events: WebhookTypes,
});
/** A change to an endpoint: its URL, its types, or both (what is not given stays). */
export const WebhookPatchBody = z
  .strictObject({
    url: WebhookUrl.optional(),
    events: WebhookTypes.unwrap().optional(),
  })
  .refine((b) => b.url !== undefined || b.events !== undefined, { message: 'give url, events or both' });
/** How long the secret replaced keeps signing too (receivers switch meanwhile). */
const OverlapSeconds = z.number().int('must be a whole number').min(0).max(7 * 86_400).optional();
/** A first key for a tenant's tasks' own webhooks: how long the deployment's secret signs beside it. */
export const OverlapBody = z.strictObject({ overlapSeconds: OverlapSeconds }).nullish();
export const RotateSecretBody = z
  .strictObject({
    overlapSeconds: OverlapSeconds,
    /**
     * Rotate while the last rotation's previous secret still signs: it stops at once (without this,
     * 409 rotation_in_progress — two rotations in a row had silently dropped it).
     */
    dropPrevious: z.boolean().optional(),
  })
  .nullish();
/** The default overlap of a rotation: a day. */
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 86_400;

/** `GET /v1/deliveries`: what the notifiers gave up on, across the tenant's tasks. */
export const GivenUpQuery = z.strictObject({
  givenUp: z.literal('true', "only givenUp=true is listed across tasks (a task's every attempt: GET /v1/tasks/:id/deliveries)"),
  limit: queryInt(1, 500).optional().describe('At most this many (default 100)'),
  before: queryInt(1, Number.MAX_SAFE_INTEGER).optional().describe('Only attempts older than this delivery id (paging on)'),
});
