import { randomUUID } from 'node:crypto';
import {
  chatExists,
  evolveChat,
  foldChat,
  isChatEventType,
  parseChatEventData,
  type ChatState,
  type NewChatEvent,
  type RecordedChatEvent,
} from '@baton/domain';
import type pg from 'pg';
import { cursorTime, decodeCursor, encodeCursor } from './cursor.ts';
import { storableJson } from './append.ts';
import { ConcurrencyError } from './errors.ts';
import { retryOnConflict } from './tasks.ts';

/**
 * Chats' logs (chat mode, docs/chat.md): `chat_events`, append-only, one stream per chat. Kept
 * apart from the task log on purpose: nothing that reads `events` (the relay, task loading, the
 * watchdog, the `tasks` read model) can ever take a chat's event for a task's.
 */

/** Where a chat's version guard is named in errors (a chat's stream). */
export const chatStreamId = (chatId: string): string => `chat-${chatId}`;

const COLUMNS = 'chat_id, version, event_id, type, data, metadata, recorded_at';

interface ChatEventRow {
  chat_id: string;
  version: number;
  event_id: string;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
  recorded_at: Date;
}

function toRecordedChat(r: ChatEventRow): RecordedChatEvent {
  if (!isChatEventType(r.type)) throw new Error(`unknown chat event type '${r.type}' in chat ${r.chat_id} at version ${r.version}`);
  return { id: r.event_id, type: r.type, chatId: r.chat_id, version: r.version, recordedAt: r.recorded_at, data: parseChatEventData(r.type, r.data), metadata: r.metadata } as RecordedChatEvent;
}

export interface LoadedChat {
  state: ChatState;
  events: RecordedChatEvent[];
}

/** Every event of a chat in order, and its state (no events: the initial state, version 0). */
export async function loadChat(pool: Pick<pg.Pool, 'query'>, chatId: string): Promise<LoadedChat> {
  const res = await pool.query<ChatEventRow>({ name: 'baton_read_chat', text: `select ${COLUMNS} from chat_events where chat_id = $1 order by version`, values: [chatId] });
  const events = res.rows.map(toRecordedChat);
  return { state: foldChat(chatId, events), events };
}

/**
 * Append events to a chat if its stream is at `expectedVersion` (0: a new chat), in one
 * statement: written whole or not at all. Data is validated first (the error names the field).
 * Another append first → ConcurrencyError.
 */
export async function appendChatEvents(pool: Pick<pg.Pool, 'query'>, chatId: string, tenantId: string, expectedVersion: number, events: readonly NewChatEvent[]): Promise<RecordedChatEvent[]> {
  if (events.length === 0) return [];
  const data = events.map((e) => storableJson(parseChatEventData(e.type, e.data)));
  try {
    const res = await pool.query<ChatEventRow>({
      name: 'baton_append_chat',
      text: `insert into chat_events (chat_id, version, tenant_id, event_id, type, data, metadata)
             select $1, $2::int + e.n, $3, e.id, e.type, e.data, e.metadata
             from unnest($4::uuid[], $5::text[], $6::jsonb[], $7::jsonb[]) with ordinality as e(id, type, data, metadata, n)
             where (select coalesce(max(version), 0) from chat_events where chat_id = $1) = $2
             returning ${COLUMNS}`,
      values: [chatId, expectedVersion, tenantId, events.map((e) => e.id), events.map((e) => e.type), data, events.map((e) => storableJson(e.metadata ?? {}))],
    });
    if (res.rows.length !== events.length) throw new ConcurrencyError(chatStreamId(chatId), expectedVersion, null);
    return res.rows.sort((a, b) => a.version - b.version).map(toRecordedChat);
  } catch (err) {
    // Two appends at one version: the second one's insert meets the first one's row (on either
    // key when both wrote the same deterministic event: the retry re-reads and finds it there).
    const e = err as { code?: string; constraint?: string };
    if (e.code === '23505' && (e.constraint === 'chat_events_version_uq' || e.constraint === 'chat_events_event_id_uq')) {
      throw new ConcurrencyError(chatStreamId(chatId), expectedVersion, null);
    }
    throw err;
  }
}

export interface RecordChatOptions {
  newId?: () => string;
  /** The chat as just loaded (the first attempt decides on it; a retry re-reads). */
  loaded?: LoadedChat;
}

/**
 * Load → decide → append, retried on a version conflict (someone else wrote to the chat between):
 * `make` sees the chat's current state and returns what to record (nothing: nothing is written),
 * its ids made with `newId` (or deterministic ones, for writes a retried request repeats).
 * The tenant is the chat's, or — for a new chat — its ChatStarted's.
 */
export async function recordChat(
  pool: Pick<pg.Pool, 'query'>,
  chatId: string,
  make: (s: ChatState, newId: () => string) => NewChatEvent[],
  opts: RecordChatOptions = {},
): Promise<{ state: ChatState; recorded: RecordedChatEvent[] }> {
  const newId = opts.newId ?? randomUUID;
  let loaded = opts.loaded;
  return retryOnConflict(async () => {
    const { state } = loaded ?? (await loadChat(pool, chatId));
    loaded = undefined;
    const events = make(state, newId);
    if (events.length === 0) return { state, recorded: [] };
    const first = events[0] as NewChatEvent;
    const tenantId = chatExists(state) ? state.tenantId : first.type === 'ChatStarted' ? first.data.tenantId : null;
    if (tenantId === null) throw new Error(`chat ${chatId} does not exist: its first event must be ChatStarted, not ${first.type}`);
    const recorded = await appendChatEvents(pool, chatId, tenantId, state.version, events);
    return { state: recorded.reduce(evolveChat, state), recorded };
  });
}

export interface ChatSummaryRow {
  id: string;
  team: string;
  /** The first message, as said. */
  firstMessage: string;
  createdAt: Date;
  updatedAt: Date;
  version: number;
  /** Messages said (user messages and complete replies). */
  messages: number;
  tasks: number;
}

/** A tenant's chats, the most recently active first. */
export interface ChatPage {
  items: ChatSummaryRow[];
  /** The next page's cursor (older conversations), or null on the last page. */
  nextCursor: string | null;
}

/** The tenant's conversations, the most recently active first, a page at a time (keyset: last activity, id). */
export async function listChats(pool: Pick<pg.Pool, 'query'>, tenantId: string, limit: number, cursor?: string): Promise<ChatPage> {
  const after = cursor === undefined ? null : decodeCursor(cursor);
  const res = await pool.query<{ id: string; team: string; first_message: string; created_at: Date; updated_at: Date; cursor_at: string; version: number; messages: number; tasks: number }>({
    name: 'baton_list_chats',
    text: `select chat_id as id,
                  (array_agg(data->>'team') filter (where type = 'ChatStarted'))[1] as team,
                  (array_agg(data->>'text' order by version) filter (where type = 'UserMessageRecorded'))[1] as first_message,
                  min(recorded_at) as created_at, max(recorded_at) as updated_at, ${cursorTime('max(recorded_at)')} as cursor_at, max(version) as version,
                  (count(*) filter (where type in ('UserMessageRecorded', 'AssistantReplyRecorded')))::int as messages,
                  (count(*) filter (where type = 'ChatTaskStarted'))::int as tasks
           from chat_events where tenant_id = $1
           group by chat_id
           having $3::timestamptz is null or (max(recorded_at), chat_id) < ($3::timestamptz, $4::uuid)
           order by max(recorded_at) desc, chat_id desc limit $2`,
    values: [tenantId, limit + 1, after?.at ?? null, after?.id ?? null],
  });
  const rows = res.rows.slice(0, limit);
  const last = rows[rows.length - 1];
  return {
    items: rows.map((r) => ({ id: r.id, team: r.team ?? '', firstMessage: r.first_message ?? '', createdAt: r.created_at, updatedAt: r.updated_at, version: r.version, messages: r.messages, tasks: r.tasks })),
    nextCursor: res.rows.length > limit && last ? encodeCursor(last.cursor_at, last.id) : null,
  };
}
