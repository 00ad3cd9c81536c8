import type { ChatMessage, ChatState, StopReason } from '@baton/domain';
import { oneLine } from './text.ts';

/**
 * Chat mode as the HTTP API shows it (docs/chat.md): the conversation (`GET /v1/chats/:id`), the
 * list (`GET /v1/chats`) and the events of `POST /v1/chat`'s SSE stream. Types only plus pure
 * functions, so a browser (the console) can import them.
 */

export interface ChatUsageView {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

/** One message of a conversation: a person's, or the model's reply (complete, or failed with `error`). */
export interface ChatMessageView {
  id: string;
  role: 'user' | 'assistant';
  /** A failed reply's is ''. */
  text: string;
  /** When it was recorded (ISO 8601): a user message before the model was called, a reply once complete. */
  createdAt: string;
  /** user: who sent it (the API key's actor); assistant: null. */
  author: string | null;
  /** assistant: the user message it answers; user: null. */
  inReplyTo: string | null;
  /** assistant: the model that wrote it (`offline` for the offline model); user: null. */
  model: string | null;
  /** True when the offline model wrote it (its text is labelled `[offline model]`). */
  offline: boolean;
  /** assistant: tokens and cost of the reply; user: null. */
  usage: ChatUsageView | null;
  stopReason: StopReason | null;
  durationMs: number | null;
  /** A reply that failed (the model call failed, or the gateway shut down during it): why. */
  error: { code: string; message: string } | null;
}

/** A task the conversation was turned into (action mode). */
export interface ChatTaskView {
  taskId: string;
  team: string;
  /** The newest message the task's prompt carries. */
  afterMessageId: string;
  /** Messages too old to fit in the task's prompt. */
  leftOut: number;
  createdAt: string;
}

/** `GET /v1/chats/:id`. */
export interface ChatView {
  id: string;
  team: string;
  createdAt: string;
  updatedAt: string;
  /** The chat stream's version (its number of events). */
  version: number;
  messages: ChatMessageView[];
  tasks: ChatTaskView[];
  /** Every reply's usage, added up. */
  usage: ChatUsageView;
}

/** An item of `GET /v1/chats`. */
export interface ChatSummaryView {
  id: string;
  team: string;
  /** The first message, on one line, cut at 80 characters. */
  title: string;
  createdAt: string;
  updatedAt: string;
  version: number;
  /** Messages said (user messages and complete replies). */
  messages: number;
  tasks: number;
}

/** The events of `POST /v1/chat`'s SSE stream, in order: `chat`, then `delta`s, then `message` or `error`. */
export type ChatStreamEvent =
  | { event: 'chat'; data: ChatStartedEventData }
  | { event: 'delta'; data: ChatDeltaEventData }
  | { event: 'message'; data: ChatMessageView }
  | { event: 'error'; data: ChatErrorEventData };

/** First: the conversation (new or continued) and the person's message as recorded. */
export interface ChatStartedEventData {
  chatId: string;
  team: string;
  /** True when this request started the conversation. */
  created: boolean;
  message: ChatMessageView;
}

/** A piece of the reply's text, as the model writes it. */
export interface ChatDeltaEventData {
  text: string;
}

/** Last, instead of `message`: the reply failed; `message` is the failed reply as recorded (null if even that could not be recorded). */
export interface ChatErrorEventData {
  error: { code: string; message: string };
  message: ChatMessageView | null;
}

const round = (usd: number): number => Math.round(usd * 1e6) / 1e6;

export function toChatMessageView(m: ChatMessage): ChatMessageView {
  return {
    id: m.id,
    role: m.role,
    text: m.text,
    createdAt: m.at,
    author: m.author,
    inReplyTo: m.inReplyTo,
    model: m.model,
    offline: m.offline,
    usage: m.usage ? { ...m.usage, costUsd: round(m.usage.costUsd) } : null,
    stopReason: m.stopReason,
    durationMs: m.durationMs,
    error: m.error,
  };
}

export function toChatView(s: ChatState): ChatView {
  return {
    id: s.id,
    team: s.team,
    createdAt: s.createdAt ?? '',
    updatedAt: s.updatedAt ?? '',
    version: s.version,
    messages: s.messages.map(toChatMessageView),
    tasks: s.tasks.map((t) => ({ taskId: t.taskId, team: t.team, afterMessageId: t.afterMessageId, leftOut: t.leftOut, createdAt: t.at })),
    usage: { ...s.usage, costUsd: round(s.usage.costUsd) },
  };
}

/** What a conversation shows, in order: its messages, each task right after the message its prompt ends with. */
export type ChatTimelineItem = { kind: 'message'; message: ChatMessageView } | { kind: 'task'; task: ChatTaskView };

export function chatTimeline(c: Pick<ChatView, 'messages' | 'tasks'>): ChatTimelineItem[] {
  const ids = new Set(c.messages.map((m) => m.id));
  const after = new Map<string, ChatTaskView[]>();
  for (const t of c.tasks) if (ids.has(t.afterMessageId)) after.set(t.afterMessageId, [...(after.get(t.afterMessageId) ?? []), t]);
  return [
    ...c.messages.flatMap((m): ChatTimelineItem[] => [{ kind: 'message', message: m }, ...(after.get(m.id) ?? []).map((task): ChatTimelineItem => ({ kind: 'task', task }))]),
    ...c.tasks.filter((t) => !ids.has(t.afterMessageId)).map((task): ChatTimelineItem => ({ kind: 'task', task })),
  ];
}

/**
 * The person's newest message when no reply to it is recorded yet (being written, or lost with a
 * gateway that died mid-reply): a reader shows that a reply is awaited and looks again. Null when
 * the last message was answered (or its reply failed).
 */
export function unansweredMessage(c: Pick<ChatView, 'messages'>): ChatMessageView | null {
  const last = c.messages[c.messages.length - 1];
  return last && last.role === 'user' ? last : null;
}

/** The person's messages no reply (nor failure) names: replies being written, or lost with a gateway that died mid-reply. */
export function unansweredMessages(c: Pick<ChatView, 'messages'>): ChatMessageView[] {
  const named = new Set(c.messages.map((m) => m.inReplyTo));
  return c.messages.filter((m) => m.role === 'user' && !named.has(m.id));
}

/** "1 message", "3 messages". */
export const messageCount = (n: number): string => `${n} message${n === 1 ? '' : 's'}`;

/** A conversation's title: its first message on one line, cut at 80 characters. */
export function chatTitle(firstMessage: string): string {
  return oneLine(firstMessage, 80);
}

/** One SSE frame: its `event` (default `message`), `data` (lines joined) and `id`, if any. */
export interface SseFrame {
  event: string;
  data: string;
  id: string | null;
}

/**
 * Parse SSE text as it arrives (e.g. a `fetch` body read chunk by chunk: EventSource cannot POST):
 * the complete frames in `text`, and what is left over (an incomplete frame) to prepend to the next
 * chunk. Comments (`: heartbeat`) and `retry:` are skipped.
 */
export function parseSse(text: string): { frames: SseFrame[]; rest: string } {
  const frames: SseFrame[] = [];
  const normalized = text.replace(/\r\n?/g, '\n');
  const blocks = normalized.split('\n\n');
  const rest = blocks.pop() ?? '';
  for (const block of blocks) {
    let event = 'message';
    let id: string | null = null;
    const data: string[] = [];
    let any = false;
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i === -1 ? line : line.slice(0, i);
      const value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
      else continue;
      any = true;
    }
    if (any && data.length > 0) frames.push({ event, data: data.join('\n'), id });
  }
  return { frames, rest };
}

/** A frame of `POST /v1/chat`'s stream as its typed event (null: not one of them). */
export function toChatStreamEvent(frame: SseFrame): ChatStreamEvent | null {
  if (!['chat', 'delta', 'message', 'error'].includes(frame.event)) return null;
  return { event: frame.event, data: JSON.parse(frame.data) } as ChatStreamEvent;
}
