import type { EventView, PendingRequestView } from '@baton/api';

/** A small client for the Baton HTTP API (what the CLI and the benchmarks use). */
export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown) {
    const e = (body as { error?: { code?: string; message?: string } })?.error;
    super(`HTTP ${status}${e ? ` ${e.code}: ${e.message}` : ''}`);
    this.name = new.target.name;
    this.status = status;
    this.body = body;
  }
}

export class BatonClient {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  constructor(baseUrl: string, apiKey?: string) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.headers = { 'content-type': 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) };
  }

  async request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers: { ...this.headers, ...headers }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    const parsed: unknown = text ? JSON.parse(text) : null;
    if (!res.ok) throw new ApiError(res.status, parsed);
    return parsed as T;
  }

  /** Every task with this status (the list's summaries), paging through `nextCursor`. */
  async *tasks(status: string): AsyncGenerator<ApiTaskSummary> {
    let cursor: string | null = null;
    do {
      const page: { items: ApiTaskSummary[]; nextCursor: string | null } = await this.request('GET', `/v1/tasks?status=${status}&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      yield* page.items;
      cursor = page.nextCursor;
    } while (cursor);
  }

  /** A task's artifacts (path, size, digest, media type, the agent that made it). */
  async artifacts(taskId: string): Promise<ApiArtifact[]> {
    return (await this.request<{ items: ApiArtifact[] }>('GET', `/v1/tasks/${taskId}/artifacts`)).items;
  }

  /** One artifact's content, as text. */
  async artifact(taskId: string, file: string): Promise<string> {
    const res = await fetch(`${this.baseUrl}/v1/tasks/${taskId}/artifacts/${file.split('/').map(encodeURIComponent).join('/')}`, { headers: this.headers });
    const text = await res.text();
    if (!res.ok) throw new ApiError(res.status, text ? JSON.parse(text) : null);
    return text;
  }

  /** The artifact an agent produced at a path (it may be stored under `<agentId>/<path>` when another agent's holds the path). */
  async artifactOf(taskId: string, agentId: string, file: string): Promise<string> {
    const a = (await this.artifacts(taskId)).find((x) => x.agentId === agentId && (x.path === file || x.path === `${agentId}/${file}`));
    if (!a) throw new Error(`no artifact ${file} from ${agentId} on task ${taskId}`);
    return this.artifact(taskId, a.path);
  }

  /** Every event of a task, paging through the JSON list. */
  async allEvents(taskId: string): Promise<ApiEvent[]> {
    const out: ApiEvent[] = [];
    let after = 0;
    for (;;) {
      const page = await this.request<{ items: ApiEvent[] }>('GET', `/v1/tasks/${taskId}/events?after=${after}&limit=5000`);
      out.push(...page.items);
      if (page.items.length < 5000) return out;
      after = (page.items[page.items.length - 1] as ApiEvent).position;
    }
  }

  /**
   * Follow a task's SSE stream, calling `onEvent` for each event, until the stream ends (the
   * task reached a final state) or `signal` aborts. Reconnects with Last-Event-ID.
   */
  /** Follow a task's SSE stream to its final event (resuming with Last-Event-ID); `steps: false` for transitions only. */
  async follow(taskId: string, onEvent: (e: ApiEvent) => void, signal?: AbortSignal, opts: { steps?: boolean } = {}): Promise<void> {
    let lastId: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetch(`${this.baseUrl}/v1/tasks/${taskId}/events${opts.steps === false ? '?steps=false' : ''}`, {
          headers: { ...this.headers, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
          ...(signal ? { signal } : {}),
        });
        if (!res.ok || !res.body) throw new ApiError(res.status, await res.json().catch(() => null));
        let buf = '';
        let ended = false;
        const decoder = new TextDecoder();
        for await (const chunk of res.body) {
          buf += decoder.decode(chunk as Uint8Array, { stream: true });
          let i: number;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const fields = parseFrame(frame);
            if (fields.event === 'shutdown') ended = false;
            if (fields.data && fields.id) {
              lastId = fields.id;
              const ev = JSON.parse(fields.data) as ApiEvent;
              onEvent(ev);
              if (FINAL.has(ev.type)) ended = true;
            }
          }
        }
        if (ended) return;
      } catch (err) {
        if (signal?.aborted) return;
        if (err instanceof ApiError && err.status < 500) throw err;
        if (attempt > 50) throw err;
      }
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** Math.min(attempt, 5))));
    }
  }
}

const FINAL = new Set(['TaskCompleted', 'TaskFailed', 'TaskCancelled']);

export function parseFrame(frame: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of frame.split('\n')) {
    if (line.startsWith(':') || !line.includes(':')) continue;
    const i = line.indexOf(':');
    const k = line.slice(0, i);
    const v = line.slice(i + 1).replace(/^ /, '');
    out[k] = out[k] !== undefined && k === 'data' ? `${out[k]}\n${v}` : v;
  }
  return out;
}

/** An event as the API returns it (the domain's EventView), with its data as an object. */
export type ApiEvent = EventView & { data: Record<string, unknown>; metadata: Record<string, unknown> };

/** A task as `GET /v1/tasks` lists it. */
export interface ApiTaskSummary {
  id: string;
  status: string;
  pendingRequests: PendingRequestView[];
}

export interface ApiArtifact {
  path: string;
  bytes: number;
  sha256: string;
  mediaType: string;
  agentId: string | null;
}
