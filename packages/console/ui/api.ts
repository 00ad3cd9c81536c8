import type { AgentView, EventView, TaskView } from '@baton/api';

export type { AgentView, EventView, TaskView };
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
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
            if (!data) continue; // a heartbeat comment
            const e = JSON.parse(data) as EventView;
            if (e.position <= last) continue;
            last = e.position;
            onEvent(e);
          }
        }
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

export const isFinalStatus = (s: string): boolean => s === 'completed' || s === 'failed' || s === 'cancelled';
