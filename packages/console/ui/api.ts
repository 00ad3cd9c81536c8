import type { AgentView, ChatMessageView, ChatStreamEvent, ChatSummaryView, ChatView, EventView, TaskView } from '@baton/api';

export type { AgentView, ChatMessageView, ChatStreamEvent, ChatSummaryView, ChatView, EventView, TaskView };
export type PendingRequest = TaskView['pendingRequests'][number];
export interface TeamInfo {
  id: string;
  name?: string;
  description?: string;
}

/** An error the API answered with (its `{error:{code,message}}`), shown where the person acted. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const KEY = 'baton.apiKey';
export const apiKey = {
  get: (): string => localStorage.getItem(KEY) ?? '',
  set: (k: string): void => (k ? localStorage.setItem(KEY, k) : localStorage.removeItem(KEY)),
};

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const k = apiKey.get();
  return { ...(k ? { authorization: `Bearer ${k}` } : {}), ...extra };
}

/** Call the API; a non-2xx answer throws an ApiError carrying the API's own message. */
export async function api<T>(method: string, url: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, { method, headers: headers(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  } catch (err) {
    throw new ApiError(0, 'network_error', `the gateway did not answer (${(err as Error).message})`);
  }
  const text = await res.text();
  const json = text ? (safeJson(text) as { error?: { code?: string; message?: string } } | undefined) : undefined;
  if (!res.ok) throw new ApiError(res.status, json?.error?.code ?? 'http_error', json?.error?.message ?? `${res.status} ${res.statusText}`);
  return (json ?? text) as T;
}

/** A text resource (an artifact, the diff), fetched with the key; null when it is not there. */
export async function apiText(url: string): Promise<string | null> {
  const res = await fetch(url, { headers: headers() });
  if (res.status === 404) return null;
  if (!res.ok) throw new ApiError(res.status, 'http_error', `${res.status} ${res.statusText}`);
  return res.text();
}

/** Download a file with the key (links cannot send a header): fetched, then saved from a blob. */
export async function download(url: string, name: string): Promise<void> {
  const res = await fetch(url, { headers: headers() });
  if (!res.ok) throw new ApiError(res.status, 'http_error', `${res.status} ${res.statusText}`);
  const href = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Follow a task's events live. EventSource cannot send the Authorization header, so this reads
 * the same SSE stream through fetch (the key in a header, never in a URL), parses it, and
 * reconnects with Last-Event-ID after a drop — no event twice, none missed. It ends when the
 * server ends the stream (the task is final) or `stop()` is called.
 */
export function followEvents(taskId: string, after: number, onEvent: (e: EventView) => void, onState: (s: 'live' | 'reconnecting' | 'ended') => void): { stop(): void } {
  const ctl = new AbortController();
  let last = after;
  const run = async (): Promise<void> => {
    for (let attempt = 0; !ctl.signal.aborted; attempt++) {
      try {
        const res = await fetch(`/v1/tasks/${taskId}/events`, { headers: headers({ accept: 'text/event-stream', ...(last > 0 ? { 'last-event-id': String(last) } : {}) }), signal: ctl.signal });
        if (!res.ok || !res.body) throw new Error(`${res.status}`);
        onState('live');
        attempt = 0;
        await readSse(res.body, (f) => {
          if (!f.data) return; // a heartbeat comment
          const e = JSON.parse(f.data) as EventView;
          if (e.position <= last) return;
          last = e.position;
          onEvent(e);
        });
        onState('ended');
        return;
      } catch {
        if (ctl.signal.aborted) return;
        onState('reconnecting');
        await new Promise((r) => setTimeout(r, Math.min(5000, 500 * 2 ** attempt)));
      }
    }
  };
  void run();
  return { stop: () => ctl.abort() };
}

/** Read a text/event-stream body frame by frame (`event`, joined `data` lines, `id`) until it ends. */
export async function readSse(body: ReadableStream<Uint8Array>, onFrame: (f: { event: string; data: string; id: string | null }) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
    let cut: number;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let event = 'message';
      let id: string | null = null;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') event = v;
        else if (field === 'data') data.push(v);
        else if (field === 'id') id = v;
      }
      onFrame({ event, data: data.join('\n'), id });
    }
  }
}

/**
 * Send a chat message and follow the reply as it streams (`POST /v1/chat`: chat, delta…, then
 * message or error). A refusal before the stream (400, 404, 429) throws an ApiError.
 */
export async function sendChat(body: { message: string; chatId?: string; team?: string }, on: (e: ChatStreamEvent) => void): Promise<void> {
  let res: Response;
  try {
    res = await fetch('/v1/chat', { method: 'POST', headers: headers({ 'content-type': 'application/json', accept: 'text/event-stream' }), body: JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, 'network_error', `the gateway did not answer (${(err as Error).message})`);
  }
  if (!res.ok || !res.body) {
    const json = safeJson(await res.text()) as { error?: { code?: string; message?: string } } | undefined;
    throw new ApiError(res.status, json?.error?.code ?? 'http_error', json?.error?.message ?? `${res.status} ${res.statusText}`);
  }
  await readSse(res.body, (f) => {
    if (f.event === 'chat' || f.event === 'delta' || f.event === 'message' || f.event === 'error') on({ event: f.event, data: JSON.parse(f.data) } as ChatStreamEvent);
  });
}

export const isFinalStatus = (s: string): boolean => s === 'completed' || s === 'failed' || s === 'cancelled';
