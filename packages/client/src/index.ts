import type { AgentView, ArtifactView, ChatStreamEvent, ChatSummaryView, ChatView, DeliveryView, EventView, GivenUpDeliveryView, PendingRequestView, TaskChangeView, TaskListItem, TaskView, TaskWebhookSecretView, TeamInfoView, WebhookEndpointView } from '@baton/api';
import { HEARTBEAT_HEADER, retryAfterMs } from '@baton/api/http'; // this module alone: the client stays free of the domain's schemas
import { readSse, type SseFrame } from './sse.ts';

/**
 * Does a listed task match a list search (`GET /v1/tasks?search=`)? Its prompt as listed (the
 * first 200 characters) contains the text, ignoring case: what the gateway's query asks of the
 * read model, for clients that filter the changes a stream brings (the console, `baton list --follow`).
 */
export const matchesSearch = (t: Pick<TaskListItem, 'prompt'>, search: string): boolean => t.prompt.toLowerCase().includes(search.trim().toLowerCase());

export { parseFrame, readSse, type SseFrame } from './sse.ts';
export type { AgentView, ChatStreamEvent, ChatSummaryView, ChatView, DeliveryView, EventView, GivenUpDeliveryView, PendingRequestView, TaskView, TaskWebhookSecretView, TeamInfoView, WebhookEndpointView };

/**
 * The typed client of Baton's HTTP API — fetch only, so it runs in Node and in browsers. The CLI,
 * the web console and the tests use it. Errors keep the server's words: an ApiError carries the
 * status, the API's error code and its message ("request 'apr-…' was already decided: rejected:
 * too broad"); a gateway that does not answer is an UnreachableError naming the URL.
 */
/**
 * Why a stream is being opened again, and when: `cause` null when a live stream dropped (the
 * gateway closed it, or the connection was cut), else why it could not be opened — an ApiError
 * for a 429 (too many open streams) or a 5xx, an UnreachableError when the gateway could not be
 * reached; `inMs` the wait (at least what the gateway's Retry-After asked, up to a minute).
 */
export interface Reconnect {
  cause: Error | null;
  inMs: number;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: unknown;
  /** How long the gateway asked to wait before trying again (its Retry-After, e.g. on a 429 or 503), in ms; null when it did not say. */
  readonly retryAfterMs: number | null;
  constructor(status: number, body: unknown, headers?: Pick<Headers, 'get'>) {
    const e = (body as { error?: { code?: string; message?: string } } | null)?.error;
    super(e?.message ?? (typeof body === 'string' && body.trim() !== '' ? body.trim().slice(0, 500) : `HTTP ${status}`));
    this.name = new.target.name;
    this.status = status;
    this.code = e?.code ?? 'http_error';
    this.body = body;
    this.retryAfterMs = headers ? (retryAfterMs(headers.get('retry-after'), Date.now()) ?? null) : null;
  }
  /** "HTTP 409 request_already_decided" — for logs and the CLI, beside the message. */
  get summary(): string {
    return `HTTP ${this.status} ${this.code}`;
  }
}

/** Without the gateway's HEARTBEAT_HEADER (an older gateway): its default heartbeat. */
const DEFAULT_HEARTBEAT_MS = 15_000;
/** The live streams' cuts: `reconnectStreams` opens each again. */
const openStreams = new Set<(why: Error) => void>();

/**
 * Open every live stream of this process (or page) again now; each resumes where it was (no event
 * missed or twice). For when the network came back or a page comes back into view: a connection
 * may have died without a word (a stream silent past three heartbeats is reopened anyway).
 */
export function reconnectStreams(why = 'reopened'): void {
  for (const cut of openStreams) cut(new Error(why));
}

/** A browser that knows it is offline: the request is not even tried (a phone's tap had been told "it may have been recorded"). */
class OfflineError extends Error {}
const knownOffline = (): boolean => typeof navigator !== 'undefined' && (navigator as { onLine?: boolean }).onLine === false;

/** Connection failures that happen before a request can have reached the gateway. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * A chat reply's stream that ended or broke before the reply did (no `message`, no `error`): the
 * person's message was recorded (when `chatId` is known) and the gateway goes on writing the
 * reply, which is recorded whole — unless the gateway itself went away. Look at the chat again.
 */
export class ReplyStreamLost extends Error {
  readonly chatId: string | null;
  constructor(chatId: string | null, cause: unknown) {
    super(
      `the reply's stream ended before the reply did${cause instanceof Error ? ` (${cause.message})` : ''}: ${chatId ? `the message was recorded in chat ${chatId}, and the reply is recorded there once it is written — look at the conversation again before sending it again` : 'the message may have been recorded — look at your conversations before sending it again'}`,
      { cause },
    );
    this.name = new.target.name;
    this.chatId = chatId;
  }
}

export class UnreachableError extends Error {
  readonly url: string;
  /**
   * A write whose connection failed after it was sent (the gateway closed or reset it, a proxy
   * cut it): the gateway may have recorded it. False when it cannot have arrived (refused, no
   * such host) or was a read.
   */
  readonly maybeRecorded: boolean;
  constructor(url: string, cause: unknown, write = false) {
    const inner = (cause as Error)?.cause instanceof Error ? ((cause as Error).cause as Error) : (cause as Error);
    const why = inner?.message ?? String(cause);
    const offline = cause instanceof OfflineError;
    const maybeRecorded = write && !offline && !NEVER_SENT.has((inner as { code?: string })?.code ?? '');
    super(
      offline
        ? `this device is offline: nothing was sent to the Baton gateway${write ? ' — send it again once it is back online' : ''}`
        : maybeRecorded
          ? `no answer from the Baton gateway at ${url} (${why}) after the request was sent: it may have been recorded — look before sending it again`
          : `could not reach the Baton gateway at ${url} (${why})`,
      { cause },
    );
    this.name = new.target.name;
    this.url = url;
    this.maybeRecorded = maybeRecorded;
  }
}

/**
 * Waits before sending again a request the gateway may have recorded and that is safe to repeat:
 * one under an Idempotency-Key — a submit, a fork (the same task is answered again), a decision
 * (answered as made, not refused as decided already).
 */
const RESEND_AFTER_MS = [250, 1000];
const isDecision = (p: string): boolean => /^\/v1\/tasks\/[^/]+\/(approvals|answers)\/[^/]+$/.test(p);

/**
 * A random id for an Idempotency-Key (a v4 UUID). From `crypto.getRandomValues`, which every
 * browser has on any page: `crypto.randomUUID` exists only on HTTPS pages and localhost, and the
 * console opened over plain HTTP at another address loaded blank without it.
 */
export function newIdempotencyKey(): string {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(16));
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x40;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The body of a secret's rotation or a first key: the overlap and dropPrevious, each only when given. */
const secretChange = (overlapSeconds?: number, dropPrevious?: boolean): { overlapSeconds?: number; dropPrevious?: true } => ({
  ...(overlapSeconds === undefined ? {} : { overlapSeconds }),
  ...(dropPrevious ? { dropPrevious: true } : {}),
});

/** An event as the API returns it, with its data as an object. */
export type ApiEvent = EventView & { data: Record<string, unknown>; metadata: Record<string, unknown> };
/** A task as `GET /v1/tasks` lists it. */
export type TaskSummary = TaskListItem;
export type Artifact = ArtifactView;
/** A submission's answer: the task, and whether it is a replay of an earlier request with the same Idempotency-Key (`idempotent-replayed`). */
export type Submitted = TaskView & { replayed: boolean };

/** A handler of `follow`'s or `watchTasks`' stream threw (or its promise rejected): the stream stops, and this carries what it threw. */
class HandlerFailed extends Error {
  readonly error: unknown;
  constructor(error: unknown) {
    super('the handler failed');
    this.error = error;
  }
}

/** An id in a URL path: encoded, so no id can reach another route (`../webhooks`, `x/cancel#`); `.`, `..` and nothing, which a URL folds away, are refused. */
const seg = (id: string): string => {
  if (id === '' || id === '.' || id === '..') throw new Error(`'${id}' is not an id`);
  return encodeURIComponent(id);
};

export interface SubmitTask {
  prompt: string;
  team?: string;
  requirePlanApproval?: boolean;
  approvalTimeoutSeconds?: number;
  webhook?: { url: string; events?: string[] };
  metadata?: Record<string, unknown>;
  workspace?: { example: string } | { archiveBase64: string; name?: string };
  budget?: { usd?: number; tokens?: number };
  /** Who is mailed, and when (docs/email.md); absent: the tenant's default. */
  notify?: { email: { to: string[]; on?: ('awaiting_input' | 'completed' | 'failed' | 'cancelled')[] } } | null;
}

/** A response body as JSON, or its text when it is not JSON (null when empty). */
function parseBody(text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

const FINAL = new Set(['TaskCompleted', 'TaskFailed', 'TaskCancelled']);

/** Run a stream handler; what it throws (or its promise rejects with) comes out as HandlerFailed, to end the stream with. */
async function handled(run: () => unknown): Promise<void> {
  try {
    await run();
  } catch (err) {
    throw new HandlerFailed(err);
  }
}
/**
 * An artifact path in a URL, each segment encoded. A `.` or `..` segment would be folded into the
 * URL itself (the request would go to another route), and artifact paths never have one: refused here.
 */
const path = (p: string): string => {
  const segments = p.split('/');
  if (segments.some((s) => s === '.' || s === '..' || s === '')) throw new Error(`'${p}' is not an artifact path: artifact paths are relative, with no empty, '.' or '..' segment (e.g. report.md, src/app.ts)`);
  return segments.map(encodeURIComponent).join('/');
};
/** `?at=N` (a version of the task stream) when one is given. */
const atQuery = (at: number | undefined): string => (at === undefined ? '' : `?at=${at}`);

export class BatonClient {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  /** `baseUrl`: the gateway (empty: the page's own origin, in a browser). */
  constructor(baseUrl: string, apiKey?: string) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.headers = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  }

  private async fetch(p: string, init: RequestInit = {}): Promise<Response> {
    try {
      if (knownOffline()) throw new OfflineError('offline');
      return await fetch(`${this.baseUrl}${p}`, { ...init, headers: { ...this.headers, ...(init.headers as Record<string, string> | undefined) } });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new UnreachableError(this.baseUrl || 'this page’s address', err, (init.method ?? 'GET') !== 'GET');
    }
  }

  /** GET a resource as a Response; an ApiError (the server's message and code) when it is not 2xx. */
  private async ok(p: string): Promise<Response> {
    const res = await this.fetch(p);
    if (!res.ok) throw new ApiError(res.status, parseBody(await res.text()), res.headers);
    return res;
  }

  /** Any call: JSON in and out; a non-2xx answer throws an ApiError with the API's message. */
  async request<T>(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    return (await this.send<T>(method, p, body, headers)).body;
  }

  /** `request`, with the answer's headers. */
  private async send<T>(method: string, p: string, body?: unknown, given: Record<string, string> = {}): Promise<{ body: T; headers: Headers }> {
    // A decision goes under an Idempotency-Key of its own too: sent again with it, it is answered as made.
    const headers = method === 'POST' && isDecision(p) && given['idempotency-key'] === undefined ? { ...given, 'idempotency-key': `baton-client-${newIdempotencyKey()}` } : given;
    const init = { method, headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) };
    // A write that may have been recorded, safe to repeat (under its key), is sent again (a cut connection, a gateway restarting under it).
    const repeatable = method === 'POST' && headers['idempotency-key'] !== undefined;
    let res: Response;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await this.fetch(p, init);
        break;
      } catch (err) {
        const wait = RESEND_AFTER_MS[attempt];
        if (!(err instanceof UnreachableError && err.maybeRecorded && repeatable && wait !== undefined)) throw err;
        await new Promise((r) => setTimeout(r, wait));
      }
    }
    const parsed = parseBody(await res.text());
    if (!res.ok) throw new ApiError(res.status, parsed, res.headers);
    return { body: parsed as T, headers: res.headers };
  }

  /**
   * Submit a task; `replayed` says the gateway answered an earlier request with this
   * `idempotencyKey` (the same body) again. Without one, a key of this call's own is sent, so a
   * connection cut after the request went is sent again as the same task, not a second one.
   */
  submit(task: SubmitTask, opts: { idempotencyKey?: string } = {}): Promise<Submitted> {
    return this.create('/v1/tasks', task, opts.idempotencyKey);
  }

  /** POST that makes a task (a submit, a fork), under an Idempotency-Key (the caller's, or one of its own): the task, and whether the gateway answered it as a replay. */
  private async create(p: string, body: unknown, idempotencyKey: string | undefined): Promise<Submitted> {
    const r = await this.send<TaskView>('POST', p, body, { 'idempotency-key': idempotencyKey ?? `baton-client-${newIdempotencyKey()}` });
    return { ...r.body, replayed: r.headers.get('idempotent-replayed') === 'true' };
  }
  async task(id: string): Promise<TaskView> {
    return this.request('GET', `/v1/tasks/${seg(id)}`);
  }
  async agents(id: string): Promise<AgentView[]> {
    return this.request<{ items: AgentView[] }>('GET', `/v1/tasks/${seg(id)}/agents`).then((r) => r.items);
  }
  /** One page of the task list (`updatedAfter`: only tasks that changed after that ISO 8601 time, e.g. an item's `updatedAt`; `stuck`: only tasks stuck; `search`: only tasks whose prompt contains the text; `forkedFrom`: only the forks of that task). */
  list(q: { status?: string | undefined; team?: string | undefined; search?: string | undefined; limit?: number; cursor?: string; updatedAfter?: string; stuck?: boolean | undefined; forkedFrom?: string | undefined } = {}): Promise<{ items: TaskSummary[]; nextCursor: string | null }> {
    const params = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== undefined && v !== '' && v !== false).map(([k, v]): [string, string] => [k, String(v)]));
    return this.request('GET', `/v1/tasks${params.size ? `?${params}` : ''}`);
  }
  /** The configured teams and their agents. */
  teams(): Promise<TeamInfoView[]> {
    return this.teamList().then((r) => r.items);
  }
  /** The configured teams, and the one a task or chat that names none gets (null: a team must be named). */
  teamList(): Promise<{ items: TeamInfoView[]; default: string | null }> {
    return this.request('GET', '/v1/teams');
  }
  /** The tenant's webhook endpoints (without their secrets). */
  webhooks(): Promise<WebhookEndpointView[]> {
    return this.request<{ items: WebhookEndpointView[] }>('GET', '/v1/webhooks').then((r) => r.items);
  }
  /** Subscribe an endpoint to the webhooks of every task of the tenant; the answer holds its signing secret, shown this once. */
  addWebhook(url: string, events?: string[]): Promise<WebhookEndpointView & { secret: string }> {
    return this.request('POST', '/v1/webhooks', { url, ...(events ? { events } : {}) });
  }
  /** One endpoint, without its secrets. */
  async webhook(id: string): Promise<WebhookEndpointView> {
    return this.request('GET', `/v1/webhooks/${seg(id)}`);
  }
  /** Change an endpoint's URL or types (what is not given stays); its id and secrets stay. */
  async updateWebhook(id: string, change: { url?: string; events?: string[] }): Promise<WebhookEndpointView> {
    return this.request('PATCH', `/v1/webhooks/${seg(id)}`, change);
  }
  async removeWebhook(id: string): Promise<void> {
    await this.request('DELETE', `/v1/webhooks/${seg(id)}`);
  }
  /** A new signing secret (shown this once); the previous one keeps signing too for `overlapSeconds` (default a day). */
  async rotateWebhookSecret(id: string, overlapSeconds?: number, o: { dropPrevious?: boolean } = {}): Promise<WebhookEndpointView & { secret: string }> {
    return this.request('POST', `/v1/webhooks/${seg(id)}/rotate-secret`, secretChange(overlapSeconds, o.dropPrevious));
  }
  /** The tenant's key for its tasks' own webhooks (never the key itself); null: it has none, they are signed with the deployment's secret. */
  async taskWebhookSecret(): Promise<TaskWebhookSecretView | null> {
    try {
      return await this.request<TaskWebhookSecretView>('GET', '/v1/task-webhook-secret');
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  }
  /** A key of the tenant's own for its tasks' own webhooks, shown this once; the deployment's secret signs beside it for `overlapSeconds` (default a day). */
  createTaskWebhookSecret(overlapSeconds?: number): Promise<TaskWebhookSecretView & { secret: string }> {
    return this.request('POST', '/v1/task-webhook-secret', secretChange(overlapSeconds));
  }
  /** A new key for the tenant's tasks' own webhooks, shown this once; the previous one signs too for `overlapSeconds` (default a day). */
  rotateTaskWebhookSecret(overlapSeconds?: number, o: { dropPrevious?: boolean } = {}): Promise<TaskWebhookSecretView & { secret: string }> {
    return this.request('POST', '/v1/task-webhook-secret/rotate', secretChange(overlapSeconds, o.dropPrevious));
  }
  /** Every recorded attempt to deliver the task's webhooks and mail, oldest first. */
  async deliveries(taskId: string): Promise<DeliveryView[]> {
    return this.request<{ items: DeliveryView[] }>('GET', `/v1/tasks/${seg(taskId)}/deliveries`).then((r) => r.items);
  }
  /** What the notifiers gave up on across the tenant's tasks, newest first (every page of it, up to `max`). */
  async givenUpDeliveries(max = 1000): Promise<GivenUpDeliveryView[]> {
    const out: GivenUpDeliveryView[] = [];
    let before: string | undefined;
    do {
      const page = await this.request<{ items: GivenUpDeliveryView[]; nextBefore?: string | null }>('GET', `/v1/deliveries?givenUp=true&limit=${Math.min(500, max - out.length)}${before ? `&before=${before}` : ''}`);
      out.push(...page.items);
      before = page.nextBefore ?? undefined;
    } while (before && out.length < max);
    return out;
  }
  /** Send a webhook delivery's message again now (a new attempt, recorded among the deliveries). */
  async redeliver(taskId: string, deliveryId: string): Promise<{ redeliveryId: string; deliveryId: string; webhookId: string; status: 'queued' }> {
    return this.request('POST', `/v1/tasks/${seg(taskId)}/deliveries/${seg(deliveryId)}/redeliver`);
  }
  /** Every task the list query matches (a status, a team, changed after a time, the forks of a task), paging through `nextCursor`. */
  async *tasks(q: { status?: string; team?: string | undefined; search?: string | undefined; updatedAfter?: string; forkedFrom?: string | undefined }): AsyncGenerator<TaskSummary> {
    let cursor: string | null = null;
    do {
      const page: { items: TaskSummary[]; nextCursor: string | null } = await this.list({ ...q, limit: 200, ...(cursor ? { cursor } : {}) });
      yield* page.items;
      cursor = page.nextCursor;
    } while (cursor);
  }
  async approve(id: string, requestId: string, o: { input?: Record<string, unknown>; budget?: { usd?: number; tokens?: number } } = {}): Promise<TaskView> {
    return this.request('POST', `/v1/tasks/${seg(id)}/approvals/${encodeURIComponent(requestId)}`, { decision: 'approve', ...o });
  }
  async reject(id: string, requestId: string, reason?: string): Promise<TaskView> {
    return this.request('POST', `/v1/tasks/${seg(id)}/approvals/${encodeURIComponent(requestId)}`, { decision: 'reject', ...(reason ? { reason } : {}) });
  }
  async answer(id: string, requestId: string, answers: string | string[]): Promise<TaskView> {
    return this.request('POST', `/v1/tasks/${seg(id)}/answers/${encodeURIComponent(requestId)}`, { answers });
  }
  async cancel(id: string, reason?: string): Promise<TaskView> {
    return this.request('POST', `/v1/tasks/${seg(id)}/cancel`, reason ? { reason } : {});
  }
  /** A new task from version `atVersion` of this one; `idempotencyKey` makes a retry the same fork (`replayed`). */
  async fork(id: string, atVersion: number, opts: { idempotencyKey?: string } = {}): Promise<Submitted> {
    return this.create(`/v1/tasks/${seg(id)}/fork`, { atVersion }, opts.idempotencyKey);
  }
  async verify(id: string): Promise<Record<string, unknown> & { identical: boolean }> {
    return this.request('POST', `/v1/tasks/${seg(id)}/verify`);
  }

  /** A task's artifacts (path, size, digest, media type, the agent that made it); `at`: as they were after that version of the task stream. */
  async artifacts(taskId: string, opts: { at?: number } = {}): Promise<Artifact[]> {
    return (await this.request<{ items: Artifact[] }>('GET', `/v1/tasks/${seg(taskId)}/artifacts${atQuery(opts.at)}`)).items;
  }
  /** One artifact's bytes as a Response (text(), blob(), arrayBuffer()); an ApiError if it is not there. `at`: its content after that version. */
  async artifactResponse(taskId: string, file: string, opts: { at?: number } = {}): Promise<Response> {
    return this.ok(`/v1/tasks/${seg(taskId)}/artifacts/${path(file)}${atQuery(opts.at)}`);
  }
  /** One artifact's content, as text. */
  async artifact(taskId: string, file: string, opts: { at?: number } = {}): Promise<string> {
    return (await this.artifactResponse(taskId, file, opts)).text();
  }
  /** The task's change against its input workspace as a unified diff; `at`: as it stood after that version. */
  async diff(taskId: string, opts: { at?: number } = {}): Promise<string> {
    return (await this.ok(`/v1/tasks/${seg(taskId)}/diff${atQuery(opts.at)}`)).text();
  }
  /** The same change per file (path, status, lines added and removed) with the patch; `at` as for `diff`. */
  async change(taskId: string, opts: { at?: number } = {}): Promise<TaskChangeView> {
    const at = opts.at === undefined ? '' : `&at=${opts.at}`;
    return this.request<TaskChangeView>('GET', `/v1/tasks/${seg(taskId)}/diff?format=json${at}`);
  }
  /**
   * The task's files as a .tar.gz (its input workspace with the agents' files over it, modes kept;
   * uploadable again as a workspace) and the file name the gateway gives it; `at` as for `diff`.
   */
  async archive(taskId: string, opts: { at?: number } = {}): Promise<{ name: string; content: Uint8Array }> {
    const res = await this.ok(`/v1/tasks/${seg(taskId)}/archive${atQuery(opts.at)}`);
    const disposition = res.headers.get('content-disposition') ?? '';
    const exact = /filename\*=UTF-8''([^;\s]+)/i.exec(disposition)?.[1];
    const given = (exact ? decodeURIComponent(exact) : /filename="([^"]+)"/.exec(disposition)?.[1]) ?? '';
    // A name, never a path: whatever the answer says, the file lands where the caller writes it.
    const base = given.split(/[\\/]/).pop() ?? '';
    // eslint-disable-next-line no-control-regex -- the point: no control characters in a file name
    const name = base === '' || base === '.' || base === '..' || /[\u0000-\u001f\u007f]/.test(base) ? `task-${taskId.slice(0, 8)}.tar.gz` : base;
    return { name, content: new Uint8Array(await res.arrayBuffer()) };
  }
  /** The artifact an agent produced at a path (stored under `<agentId>/<path>` when another agent's holds the path). */
  async artifactOf(taskId: string, agentId: string, file: string): Promise<string> {
    const a = (await this.artifacts(taskId)).find((x) => x.agentId === agentId && (x.path === file || x.path === `${agentId}/${file}`));
    if (!a) throw new Error(`no artifact ${file} from ${agentId} on task ${taskId}`);
    return this.artifact(taskId, a.path);
  }
  /** A text resource of the API (the diff, …); null for a 404. */
  async text(p: string): Promise<string | null> {
    const res = await this.fetch(p);
    if (res.status === 404) return null;
    if (!res.ok) throw new ApiError(res.status, parseBody(await res.text()), res.headers);
    return res.text();
  }

  /**
   * Every event of a task, paging through the JSON list: `types`, only those; `steps: false`,
   * transitions only (no model turns or tool results); `after`, those after this position;
   * `limit`, at most this many (the first).
   */
  async allEvents(taskId: string, opts: { types?: readonly string[]; steps?: boolean; after?: number; limit?: number } = {}): Promise<ApiEvent[]> {
    const out: ApiEvent[] = [];
    const only = `${opts.types ? `&type=${encodeURIComponent(opts.types.join(','))}` : ''}${opts.steps === false ? '&steps=false' : ''}`;
    const max = opts.limit ?? Infinity;
    let after = opts.after ?? 0;
    while (out.length < max) {
      const size = Math.min(5000, max - out.length);
      const page = await this.request<{ items: ApiEvent[]; next?: number | null }>('GET', `/v1/tasks/${seg(taskId)}/events?after=${after}&limit=${size}${only}`);
      out.push(...page.items);
      // `next` (a gateway before it had none: a full page may have more).
      const next = page.next !== undefined ? page.next : page.items.length === size ? (page.items.at(-1)?.position ?? null) : null;
      if (next === null) return out;
      after = next;
    }
    return out;
  }

  /**
   * Follow a task's events live (SSE, the key in a header) until the task's final event or
   * `signal` aborts; after a drop it reconnects with Last-Event-ID — no event twice, none missed —
   * for as long as the gateway is away (at most 5 s apart); a refusal (4xx but 429) ends it.
   * `after`: start after this position; `steps: false` for transitions only.
   */
  async follow(taskId: string, onEvent: (e: ApiEvent) => unknown, o: { signal?: AbortSignal; steps?: boolean; after?: number; onState?: (s: 'live' | 'reconnecting', r?: Reconnect) => void } = {}): Promise<void> {
    // The stream is in commit order, not position order: a transaction that began first can commit
    // after a later one, so positions may go down. `last` is the last event received (where a
    // reconnect resumes, by Last-Event-ID); an event is told apart from a repeat by its id.
    let last = o.after ?? 0;
    const seen = new Set<string>();
    let ended = false;
    await this.reconnecting(
      () => {
        const headers: Record<string, string> = {};
        if (last > 0) headers['last-event-id'] = String(last); // resume after the last event shown
        return { path: `/v1/tasks/${seg(taskId)}/events${o.steps === false ? '?steps=false' : ''}`, headers };
      },
      async (f) => {
        // `end`: the task is over (also when resumed after its final event): stop, do not reconnect.
        if (f.event === 'end') return void (ended = true);
        // Events only: not `shutdown` (the gateway is going away: reconnect) nor anything else without a place in the log.
        if (f.id === null || !f.data || f.event === 'shutdown') return;
        const e = JSON.parse(f.data) as ApiEvent;
        if (typeof e.position !== 'number' || seen.has(e.id)) return;
        // The handler, awaited (events are handled one at a time, in order); what it throws ends the follow with it.
        await handled(() => onEvent(e));
        seen.add(e.id);
        last = e.position;
        if (FINAL.has(e.type)) ended = true;
      },
      { signal: o.signal, connected: () => o.onState?.('live'), reconnecting: (r) => o.onState?.('reconnecting', r), done: () => ended },
    );
  }

  /**
   * Follow the changes of your tasks (SSE, the key in a header) until `signal` aborts: each
   * change as the task's list summary (its newest version; changes that come together may show
   * as one). `onState('live')` comes when the stream is ready — on connecting and after each
   * reconnect: load the list then (`list()`), and nothing in between is missed. `team`: only
   * that team's tasks.
   */
  async watchTasks(onTask: (t: TaskSummary) => unknown, o: { signal?: AbortSignal; team?: string; onState?: (s: 'live' | 'reconnecting', r?: Reconnect) => void } = {}): Promise<void> {
    await this.reconnecting(
      () => ({ path: `/v1/tasks${o.team ? `?team=${encodeURIComponent(o.team)}` : ''}`, headers: {} }),
      async (f) => {
        if (f.event === 'ready') o.onState?.('live');
        else if (f.event === 'task') await handled(() => onTask(JSON.parse(f.data) as TaskSummary));
      },
      { signal: o.signal, reconnecting: (r) => o.onState?.('reconnecting', r) },
    );
  }

  /**
   * Read an SSE stream of the API, opening it again after a drop (backing off, up to 5 s) until
   * `done()` or `signal` aborts. A refusal is thrown, but for 429 and 5xx (retried).
   */
  private async reconnecting(open: () => { path: string; headers: Record<string, string> }, onFrame: (f: SseFrame) => unknown, o: { signal?: AbortSignal | undefined; connected?: () => void; reconnecting: (r: Reconnect) => void; done?: () => boolean }): Promise<void> {
    let live = false;
    for (let attempt = 0; ; attempt++) {
      let cause: Error | null = null;
      let askedMs = 0;
      // This connection's own cut: a stream silent past three heartbeats (a phone's connection that
      // died without a word had shown "live" on a stale page), or `reconnectStreams()`.
      const cutter = new AbortController();
      const cut = (why: Error): void => cutter.abort(why);
      openStreams.add(cut);
      // The caller's signal aborts this connection too (by hand: AbortSignal.any is missing on the older phones this is for).
      const follow = (): void => cutter.abort(o.signal?.reason);
      o.signal?.addEventListener('abort', follow, { once: true });
      if (o.signal?.aborted) follow();
      let idle: ReturnType<typeof setTimeout> | undefined;
      try {
        const { path: p, headers } = open();
        const res = await this.fetch(p, { headers: { accept: 'text/event-stream', ...headers }, signal: cutter.signal });
        if (!res.ok || !res.body) {
          askedMs = Math.min(60_000, retryAfterMs(res.headers.get('retry-after'), Date.now()) ?? 0);
          throw new ApiError(res.status, parseBody(await res.text().catch(() => '')), res.headers);
        }
        o.connected?.();
        attempt = 0;
        live = true;
        const idleMs = 3 * (Number(res.headers.get(HEARTBEAT_HEADER)) || DEFAULT_HEARTBEAT_MS);
        const bump = (): void => {
          clearTimeout(idle);
          idle = setTimeout(() => cut(new Error(`nothing for ${Math.round(idleMs / 100) / 10} s, not even a heartbeat: the connection is taken for dead`)), idleMs);
        };
        bump();
        // The silence is the connection's, not the handler's: the watch stops while a frame is handled.
        await readSse(
          res.body,
          async (f) => {
            clearTimeout(idle);
            try {
              await onFrame(f);
            } finally {
              bump();
            }
          },
          bump,
        );
      } catch (err) {
        // The caller's handler failed: its error, not a reconnect (the event it failed on was not taken as handled).
        if (err instanceof HandlerFailed) throw err.error;
        if (o.signal?.aborted) return;
        // Refused (a revoked key, a task gone): no attempt will do better. Unreachable, 429 or 5xx: wait (as long as the gateway asks) and look again, however long it takes.
        if (err instanceof ApiError && err.status < 500 && err.status !== 429) throw err;
        // Cut here (silent too long, or reopened on purpose): why. A live stream cut otherwise (the
        // gateway killed, the connection reset: undici's "terminated") is a drop, told as one (null).
        if (cutter.signal.aborted) cause = cutter.signal.reason as Error;
        else cause = live && !(err instanceof ApiError) && !(err instanceof UnreachableError) ? null : err instanceof Error ? err : new Error(String(err));
      } finally {
        clearTimeout(idle);
        openStreams.delete(cut);
        o.signal?.removeEventListener('abort', follow);
      }
      live = false;
      if (o.done?.() || o.signal?.aborted) return;
      const inMs = Math.max(Math.min(5000, 100 * 2 ** Math.min(attempt, 6)), askedMs);
      o.reconnecting({ cause, inMs });
      // `reconnectStreams` ends the wait too: back online, a stream waiting to try again tries now.
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          openStreams.delete(done);
          o.signal?.removeEventListener('abort', done); // a stream that reconnects for days gathers no listeners
          resolve();
        };
        const t = setTimeout(done, inMs);
        openStreams.add(done);
        o.signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  /**
   * Send a chat message and follow its reply (chat, delta…, message or error). A stream that
   * ends or breaks before the reply's `message` or `error` (a proxy's cut, the gateway gone) is
   * a ReplyStreamLost, naming the chat when it was recorded: the reply may still be recorded.
   */
  async chat(body: { message: string; chatId?: string; team?: string }, on: (e: ChatStreamEvent) => void): Promise<void> {
    const res = await this.fetch('/v1/chat', { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(body) });
    if (!res.ok || !res.body) throw new ApiError(res.status, await res.json().catch(() => null), res.headers);
    let chatId = res.headers.get('x-chat-id');
    let ended = false;
    try {
      await readSse(res.body, (f) => {
        if (f.event !== 'chat' && f.event !== 'delta' && f.event !== 'message' && f.event !== 'error') return;
        const e = { event: f.event, data: JSON.parse(f.data) } as ChatStreamEvent;
        if (e.event === 'chat') chatId = e.data.chatId;
        if (e.event === 'message' || e.event === 'error') ended = true;
        on(e);
      });
    } catch (err) {
      if (ended) return;
      throw new ReplyStreamLost(chatId, err);
    }
    if (!ended) throw new ReplyStreamLost(chatId, null);
  }
  /** Your conversations, the most recently active first: every one, a page at a time (`pageSize` each). */
  async *chats(o: { pageSize?: number } = {}): AsyncGenerator<ChatSummaryView> {
    let cursor: string | null = null;
    do {
      const page: { items: ChatSummaryView[]; nextCursor: string | null } = await this.request('GET', `/v1/chats?limit=${o.pageSize ?? 200}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      yield* page.items;
      cursor = page.nextCursor;
    } while (cursor);
  }
  async chatView(id: string): Promise<ChatView> {
    return this.request('GET', `/v1/chats/${seg(id)}`);
  }
  async chatToTask(id: string, o: Omit<SubmitTask, 'prompt' | 'workspace'> = {}): Promise<TaskView> {
    return this.request('POST', `/v1/chats/${seg(id)}/task`, o);
  }
}
