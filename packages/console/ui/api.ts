import type { AgentView, ChatMessageView, ChatStreamEvent, ChatSummaryView, ChatView, DeliveryView, EventView, TaskChangeView, TaskListItem, TaskView } from '@baton/api';
import { ApiError, BatonClient, newIdempotencyKey, reconnectStreams, ReplyStreamLost } from '@baton/client';

export { ApiError, newIdempotencyKey, ReplyStreamLost };
export type { AgentView, ChatMessageView, ChatStreamEvent, ChatSummaryView, ChatView, DeliveryView, EventView, TaskChangeView, TaskListItem, TaskView };
export type PendingRequest = TaskView['pendingRequests'][number];
export interface TeamInfo {
  id: string;
  name?: string;
  description?: string;
}

const KEY = 'baton.apiKey';
export const apiKey = {
  get: (): string => localStorage.getItem(KEY) ?? '',
  set: (k: string): void => (k ? localStorage.setItem(KEY, k) : localStorage.removeItem(KEY)),
};

/** The one client (@baton/client) on this page's gateway, with the key the person entered (sent as a header). */
const client = (): BatonClient => new BatonClient('', apiKey.get() || undefined);

/** Call the API; a refusal throws an ApiError whose message is the API's own. */
export const api = <T>(method: string, url: string, body?: unknown): Promise<T> => client().request<T>(method, url, body);

/**
 * Submit a task under `idempotencyKey` (the form keeps one until it is sent or changed: clicking
 * again after an answer that never came is the same task, not a second one); a cut connection is
 * sent again by the client itself.
 */
export const submitTask = (body: Parameters<BatonClient['submit']>[0], idempotencyKey: string): Promise<TaskView> => client().submit(body, { idempotencyKey });

/** Fork a task at a version (under a key of the client's: a cut connection is sent again as the same fork). */
export const forkTask = (taskId: string, atVersion: number): Promise<TaskView> => client().fork(taskId, atVersion);

/** One page of your tasks (the API's list query: status, team, search, cursor…). */
export const listTasks = (q: Parameters<BatonClient['list']>[0]): ReturnType<BatonClient['list']> => client().list(q);

/** A text resource (an artifact, the diff); null when it is not there. */
export const apiText = (url: string): Promise<string | null> => client().text(url);

/** The task's change against its input workspace, per file, with the patch. */
export const taskChange = (taskId: string): Promise<TaskChangeView> => client().change(taskId);

/** Download an artifact with the key (links cannot send a header): fetched, then saved from a blob. */
export async function download(taskId: string, file: string, at?: number): Promise<void> {
  const res = await client().artifactResponse(taskId, file, at === undefined ? {} : { at });
  save(await res.blob(), file.split('/').at(-1) ?? file);
}

/** Download the task's files as a .tar.gz (its input with the agents' files over it), named as the gateway names it. */
export async function downloadArchive(taskId: string): Promise<void> {
  const { name, content } = await client().archive(taskId);
  save(new Blob([content as Uint8Array<ArrayBuffer>], { type: 'application/gzip' }), name);
}

/** Save what the page has already (a patch) as a file. */
export const saveText = (text: string, name: string, type: string): void => save(new Blob([text], { type }), name);

function save(blob: Blob, name: string): void {
  const href = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}

/**
 * Follow a task's events live. EventSource cannot send the Authorization header, so the client
 * reads the SSE stream through fetch (the key in a header, never in a URL) and resumes with
 * Last-Event-ID after a drop. It ends after the task's final event, or on `stop()`.
 */
export function followEvents(taskId: string, after: number, onEvent: (e: EventView) => void, onState: (s: 'live' | 'reconnecting' | 'ended') => void, onLost: (err: Error) => void): { stop(): void } {
  const ctl = new AbortController();
  // It reconnects for as long as the gateway is away; it ends only when refused (`onLost`: said on the page).
  client()
    .follow(taskId, onEvent, { after, signal: ctl.signal, onState })
    .then(
      () => ctl.signal.aborted || onState('ended'),
      (err: unknown) => ctl.signal.aborted || onLost(err as Error),
    );
  return { stop: () => ctl.abort() };
}

/**
 * Follow the changes of your tasks live (SSE through fetch, the key in a header): `onState('live')`
 * when the stream is ready (on connecting, and after each reconnect: load the list then, nothing
 * in between is missed), `'reconnecting'` when it dropped; `onTask` with each changed task's list
 * item. Until `stop()`; `onError` if the gateway refuses the stream for good.
 */
export function watchTasks(onTask: (t: TaskListItem) => void, onState: (s: 'live' | 'reconnecting') => void, onError: (err: Error) => void): { stop(): void } {
  const ctl = new AbortController();
  client()
    .watchTasks(onTask, { signal: ctl.signal, onState })
    .catch((err: unknown) => ctl.signal.aborted || onError(err as Error));
  return { stop: () => ctl.abort() };
}

/** Send a chat message and follow the reply as it streams (chat, delta…, then message or error). */
export const sendChat = (body: { message: string; chatId?: string; team?: string }, on: (e: ChatStreamEvent) => void): Promise<void> => client().chat(body, on);

export { reconnectStreams };

export const isFinalStatus = (s: string): boolean => s === 'completed' || s === 'failed' || s === 'cancelled';
