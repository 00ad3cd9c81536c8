import { z } from 'zod';
import { StopReason, Usage } from './content.ts';

/**
 * Chat mode (docs/chat.md): a conversation with a team's model, beside tasks — no lead loop, no
 * sandbox. Its facts are recorded in their own append-only table (`chat_events`, one stream per
 * chat, versions 1, 2, …), never in the task log, so nothing that reads tasks (read models,
 * relay, watchdog, task list) ever sees a chat. The chat's state is a fold of its events, like a
 * task's.
 */

/** The longest message a person may send (the rest of a task prompt's 20000 characters carries the conversation). */
export const CHAT_MESSAGE_MAX_CHARS = 10_000;
/** A task prompt's limit (POST /v1/tasks' `prompt`): a chat turned into a task fits in it. */
export const TASK_PROMPT_MAX_CHARS = 20_000;

const ReplyError = z.object({ code: z.string().min(1), message: z.string() });

export const chatEventDataSchemas = {
  /** A conversation began (recorded with its first message, in the same append). */
  ChatStarted: z.object({ tenantId: z.string().min(1), team: z.string().min(1), startedBy: z.string() }),
  /** What a person said; recorded before the model is called. */
  UserMessageRecorded: z.object({ text: z.string().min(1).max(CHAT_MESSAGE_MAX_CHARS), author: z.string() }),
  /** The model's whole reply, recorded once it is complete (never a part of one). */
  AssistantReplyRecorded: z.object({
    inReplyTo: z.uuid(),
    text: z.string(),
    model: z.string().min(1),
    offline: z.boolean(),
    usage: Usage,
    stopReason: StopReason,
    durationMs: z.number().nonnegative(),
  }),
  /** The model call failed (or was abandoned at shutdown): nothing of its text is kept. */
  AssistantReplyFailed: z.object({ inReplyTo: z.uuid(), error: ReplyError, durationMs: z.number().nonnegative() }),
  /** The conversation was turned into a task (action mode). */
  ChatTaskStarted: z.object({
    taskId: z.uuid(),
    team: z.string().min(1),
    /** The last message the task's prompt carries. */
    afterMessageId: z.uuid(),
    /** Messages too old to fit in the prompt (left out, oldest first). */
    leftOut: z.number().int().nonnegative(),
    startedBy: z.string(),
  }),
} as const;

export type ChatEventType = keyof typeof chatEventDataSchemas;
export const CHAT_EVENT_TYPES = Object.keys(chatEventDataSchemas) as ChatEventType[];
export type ChatEventData<T extends ChatEventType> = z.infer<(typeof chatEventDataSchemas)[T]>;

export const isChatEventType = (type: string): type is ChatEventType => Object.hasOwn(chatEventDataSchemas, type);

/** A chat event as decided, before it has a place in the chat's stream. */
export type NewChatEvent = { [T in ChatEventType]: { id: string; type: T; data: ChatEventData<T>; metadata?: Record<string, unknown> } }[ChatEventType];

/** A chat event as read from `chat_events`. */
export type RecordedChatEvent = {
  [T in ChatEventType]: { id: string; type: T; chatId: string; version: number; recordedAt: Date; data: ChatEventData<T>; metadata: Record<string, unknown> };
}[ChatEventType];

/** Validate a chat event's data (before it is appended, and when it is read); the error names the field. */
export function parseChatEventData<T extends ChatEventType>(type: T, data: unknown): ChatEventData<T> {
  return chatEventDataSchemas[type].parse(data) as ChatEventData<T>;
}

export interface ChatMessage {
  /** The id of the event that recorded it. */
  id: string;
  role: 'user' | 'assistant';
  /** A failed reply's text is ''. */
  text: string;
  at: string;
  /** user: who sent it; assistant: null. */
  author: string | null;
  /** assistant: the user message it answers. */
  inReplyTo: string | null;
  model: string | null;
  offline: boolean;
  usage: Usage | null;
  stopReason: StopReason | null;
  durationMs: number | null;
  /** A failed reply: why (its text is ''). */
  error: { code: string; message: string } | null;
}

export interface ChatTask {
  taskId: string;
  team: string;
  afterMessageId: string;
  leftOut: number;
  at: string;
}

export interface ChatState {
  id: string;
  /** '' until ChatStarted. */
  tenantId: string;
  team: string;
  /** The chat stream's version: the number of its events. */
  version: number;
  createdAt: string | null;
  updatedAt: string | null;
  messages: ChatMessage[];
  tasks: ChatTask[];
  /** Every reply's usage added up. */
  usage: Usage;
}

export const initialChatState = (id: string): ChatState => ({
  id,
  tenantId: '',
  team: '',
  version: 0,
  createdAt: null,
  updatedAt: null,
  messages: [],
  tasks: [],
  usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
});

export const chatExists = (s: ChatState): boolean => s.version > 0;

const addUsage = (a: Usage, b: Usage): Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
  cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  costUsd: a.costUsd + b.costUsd,
});

const reply = (id: string, at: string, inReplyTo: string): ChatMessage => ({ id, role: 'assistant', text: '', at, author: null, inReplyTo, model: null, offline: false, usage: null, stopReason: null, durationMs: null, error: null });

/** The chat's state after one more of its events. */
export function evolveChat(s: ChatState, e: RecordedChatEvent): ChatState {
  const at = e.recordedAt.toISOString();
  const next: ChatState = { ...s, version: e.version, updatedAt: at, createdAt: s.createdAt ?? at };
  switch (e.type) {
    case 'ChatStarted':
      return { ...next, tenantId: e.data.tenantId, team: e.data.team };
    case 'UserMessageRecorded':
      return { ...next, messages: [...s.messages, { id: e.id, role: 'user', text: e.data.text, at, author: e.data.author, inReplyTo: null, model: null, offline: false, usage: null, stopReason: null, durationMs: null, error: null }] };
    case 'AssistantReplyRecorded': {
      const { text, model, offline, usage, stopReason, durationMs, inReplyTo } = e.data;
      return { ...next, messages: [...s.messages, { ...reply(e.id, at, inReplyTo), text, model, offline, usage, stopReason, durationMs }], usage: addUsage(s.usage, usage) };
    }
    case 'AssistantReplyFailed':
      return { ...next, messages: [...s.messages, { ...reply(e.id, at, e.data.inReplyTo), durationMs: e.data.durationMs, error: e.data.error }] };
    case 'ChatTaskStarted':
      return { ...next, tasks: [...s.tasks, { taskId: e.data.taskId, team: e.data.team, afterMessageId: e.data.afterMessageId, leftOut: e.data.leftOut, at }] };
  }
}

export const foldChat = (id: string, events: readonly RecordedChatEvent[]): ChatState => events.reduce(evolveChat, initialChatState(id));

/** What was said, in order: user messages and complete replies (failed replies are not part of the conversation). */
export const spokenMessages = (s: ChatState): ChatMessage[] => s.messages.filter((m) => m.error === null);

export interface ChatTurn {
  role: 'user' | 'assistant';
  text: string;
}

/**
 * A failed reply's code when the model API refused the request for what it held (a 400, 413 or
 * 422, such as "prompt is too long"): the messages that request carried are left out of what the
 * model reads next, or every later message would be refused with them.
 */
export const REPLY_REFUSED = 'model_refused';

/**
 * The person's messages a refused request carried: the one the refusal answers and those before
 * it still unanswered then (they were joined into its turn). A reply answers its message and the
 * unanswered ones before it; a failure of another kind leaves them to be read with the next.
 */
function refusedMessages(s: ChatState): Set<string> {
  const refused = new Set<string>();
  let unanswered: string[] = [];
  for (const m of s.messages) {
    if (m.role === 'user') {
      unanswered.push(m.id);
      continue;
    }
    if (m.error !== null && m.error.code !== REPLY_REFUSED) continue;
    const at = m.inReplyTo === null ? -1 : unanswered.indexOf(m.inReplyTo);
    if (m.error !== null) for (const id of at === -1 ? [m.inReplyTo] : unanswered.slice(0, at + 1)) if (id !== null) refused.add(id);
    if (at !== -1) unanswered = unanswered.slice(at + 1);
  }
  return refused;
}

/**
 * The conversation as a model reads it: user and assistant turns alternating, starting with a
 * user turn (consecutive messages of one role — a reply that failed, two messages sent at once —
 * are joined; the messages a refused request carried are left out), the oldest turns left out
 * beyond `maxChars` (the newest turn is always kept).
 */
export function chatTurns(s: ChatState, maxChars: number): ChatTurn[] {
  const refused = refusedMessages(s);
  const turns: ChatTurn[] = [];
  for (const m of spokenMessages(s)) {
    if (m.text === '' || refused.has(m.id)) continue;
    const last = turns[turns.length - 1];
    if (last && last.role === m.role) last.text = `${last.text}\n\n${m.text}`;
    else turns.push({ role: m.role, text: m.text });
  }
  let total = 0;
  let from = turns.length;
  while (from > 0 && (from === turns.length || total + (turns[from - 1] as ChatTurn).text.length <= maxChars)) {
    from--;
    total += (turns[from] as ChatTurn).text.length;
  }
  const kept = turns.slice(from);
  while (kept[0]?.role === 'assistant') kept.shift(); // a model's conversation starts with the person
  return kept;
}

export interface ChatTaskPrompt {
  prompt: string;
  /** The user message taken as the request (the last one). */
  requestMessageId: string;
  /** The newest message the prompt carries. */
  afterMessageId: string;
  /** Earlier messages left out to stay within the limit. */
  leftOut: number;
}

const REQUEST_MARK = '[the request above]';
const SEPARATOR = '\n\n---\n';
const cutMark = (n: number) => ` … [${n} characters cut to fit the prompt limit]`;
/** Below this much room, an older message is left out rather than cut to a stub. */
const MIN_CUT_CHARS = 200;

/** Characters as the API's limits count them (zod's `max`: code points — an emoji is one, not two UTF-16 units). */
function chars(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** The first `max` characters (code points) of `text`. */
function firstChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let units = 0;
  let n = 0;
  for (const ch of text) {
    if (n === max) break;
    units += ch.length;
    n++;
  }
  return text.slice(0, units);
}

/** `line` cut to `room` characters, its end replaced by a mark saying how much was cut. */
function cutLine(line: string, room: number): string {
  const total = chars(line);
  const keep = Math.max(0, room - chars(cutMark(total)));
  return `${firstChars(line, keep)}${cutMark(total - keep)}`;
}

/**
 * A task's prompt from a conversation (action mode): the last user message is the request; the
 * conversation so far (every user message and complete reply, oldest first, the request shown
 * as `[the request above]`) follows as its context. Within `maxChars` characters (code points,
 * as the task prompt's limit counts them): the newest messages are kept whole as far as they
 * fit, the next older one cut at its end if a useful part of it fits (saying how much was cut),
 * the older ones left out (the context says how many); a newest message too long alone is cut
 * too. Null when nobody has said anything.
 */
export function chatTaskPrompt(chatId: string, s: ChatState, maxChars: number = TASK_PROMPT_MAX_CHARS): ChatTaskPrompt | null {
  const spoken = spokenMessages(s);
  const requestIndex = spoken.findLastIndex((m) => m.role === 'user');
  const request = spoken[requestIndex];
  if (!request) return null;
  const afterMessageId = (spoken[spoken.length - 1] as ChatMessage).id;
  const requestText = firstChars(request.text, maxChars);
  if (spoken.length === 1) return { prompt: requestText, requestMessageId: request.id, afterMessageId, leftOut: 0 };
  const lines = spoken.map((m, i) => `${m.role === 'user' ? 'User' : 'Assistant'}: ${i === requestIndex ? REQUEST_MARK : m.text}`);
  const header = (leftOut: number) =>
    `This task was started from a chat (${chatId}). The conversation so far, oldest first; ${REQUEST_MARK} marks where the request was said.` +
    (leftOut > 0 ? ` The ${leftOut} oldest message${leftOut === 1 ? ' is' : 's are'} left out to keep this prompt within ${maxChars} characters.` : '');
  // Room for the turns once the request and a header (with the largest count it could name) are in.
  const room = maxChars - chars(requestText) - chars(SEPARATOR) - chars(header(lines.length)) - 2;
  let used = 0;
  let from = lines.length;
  while (from > 0 && used + chars(lines[from - 1] as string) + 2 <= room) used += chars(lines[--from] as string) + 2;
  // The next older message, or the newest when not even it fits whole: the part of it that does.
  const left = room - used - 2;
  if (from > 0 && (from === lines.length || left >= MIN_CUT_CHARS)) {
    from--;
    lines[from] = cutLine(lines[from] as string, left);
  }
  const prompt = `${requestText}${SEPARATOR}${header(from)}\n\n${lines.slice(from).join('\n\n')}`;
  return { prompt, requestMessageId: request.id, afterMessageId, leftOut: from };
}
