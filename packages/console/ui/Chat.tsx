import { useCallback, useEffect, useRef, useState } from 'react';
import { chatTimeline, messageCount, unansweredMessage, unansweredMessages } from '@baton/api/chat';
import { RenderedMarkdown } from './Markdown.tsx';
import { api, ApiError, ReplyStreamLost, sendChat, type ChatMessageView, type ChatSummaryView, type ChatView, type TaskView, type TeamInfo } from './api.ts';
import { ErrorLine } from './ErrorLine.tsx';
import { ApprovePlan, TeamSelect } from './TeamSelect.tsx';
import { startingTeam } from './teams.ts';
import { busyProps, invalidProps } from './a11y.tsx';
import { go, openTask, useAction } from './hooks.ts';

/** Conversations listed per page ("Show older conversations" asks for the next). */
const CHATS_PAGE = 50;
/** The longest message the gateway takes (characters as it counts them: an emoji is one). */
const MESSAGE_MAX_CHARS = 10_000;
/** How long a reply is awaited after this page first saw its message unanswered (the conversation read again every few seconds). */
const AWAIT_REPLY_MS = 5 * 60_000;
const AWAIT_POLL_MS = 2000;
/** A message older than this (by the server's time, as this browser's clock reads it) is not awaited at all: its reply was lost long ago. */
const STALE_MS = 30 * 60_000;

/**
 * Chat mode: talk with the model (no sandbox, no lead loop); the reply streams word by word and
 * the conversation is durable (a reload continues it). Action mode turns the conversation into a
 * task, carrying it as the task's context.
 */
export function Chat({ chatId, badId, teams, defaultTeam }: { chatId: string | null; badId?: string | undefined; teams: TeamInfo[]; defaultTeam: string | null }) {
  const [list, setList] = useState<ChatSummaryView[]>([]);
  const [older, setOlder] = useState<string | null>(null);
  const [listError, setListError] = useState<string | null>(null);
  /** Older pages were asked for: a refresh of the newest page keeps them (and where they end). */
  const pagedOn = useRef(false);
  const loadList = useCallback(async () => {
    try {
      const page = await api<{ items: ChatSummaryView[]; nextCursor: string | null }>('GET', `/v1/chats?limit=${CHATS_PAGE}`);
      if (!pagedOn.current) {
        setList(page.items);
        setOlder(page.nextCursor);
      } else setList((l) => [...page.items, ...l.filter((c) => !page.items.some((x) => x.id === c.id))]);
    } catch {
      // the conversation view shows errors where the person acts; the list retries on the next change
    }
  }, []);
  const showOlder = async (): Promise<void> => {
    if (!older) return;
    try {
      const page = await api<{ items: ChatSummaryView[]; nextCursor: string | null }>('GET', `/v1/chats?limit=${CHATS_PAGE}&cursor=${encodeURIComponent(older)}`);
      pagedOn.current = true;
      setList((l) => [...l, ...page.items.filter((c) => !l.some((x) => x.id === c.id))]);
      setOlder(page.nextCursor);
      setListError(null);
    } catch (err) {
      setListError((err as Error).message);
    }
  };
  useEffect(() => {
    void loadList();
  }, [loadList, chatId]);
  return (
    <main className={`split chats${chatId ? ' opened' : ''}`}>
      <aside className="side">
        <button className="primary" onClick={() => go('#/chat')}>
          New conversation
        </button>
        <ul className="chat-list">
          {list.map((c) => (
            <li key={c.id} className={c.id === chatId ? 'selected' : ''} data-chat={c.id}>
              <a href={`#/chat/${c.id}`}>
                <span className="prompt" dir="auto">
                  {c.title}
                </span>
                <span className="meta">
                  {c.team} · {messageCount(c.messages)}
                  {c.tasks > 0 ? ` · ${c.tasks} task${c.tasks > 1 ? 's' : ''}` : ''}
                </span>
              </a>
            </li>
          ))}
        </ul>
        {older && (
          <button className="small" onClick={() => void showOlder()}>
            Show older conversations
          </button>
        )}
        <ErrorLine error={listError} />
      </aside>
      <section className="main" id="content" tabIndex={-1} aria-label="conversation">
        {chatId && (
          <a className="back-to-list" href="#/chat">
            ← All conversations
          </a>
        )}
        {badId !== undefined ? (
          <div className="error" role="alert">
            No conversation '{badId}': a conversation id is a UUID. Pick one from the list, or start a new one.
          </div>
        ) : (
          <Conversation key={chatId ?? 'new'} chatId={chatId} teams={teams} defaultTeam={defaultTeam} onChanged={() => void loadList()} />
        )}
      </section>
    </main>
  );
}

/** What the person had typed when a new conversation became its own page (`#/chat/<id>`): that page starts with it, the cursor in the message box. */
let carried: { draft: string } | null = null;

/** Characters as the gateway counts them (an emoji is one). */
const chars = (text: string): number => [...text].length;

function Conversation({ chatId, teams, defaultTeam, onChanged }: { chatId: string | null; teams: TeamInfo[]; defaultTeam: string | null; onChanged: () => void }) {
  const [chat, setChat] = useState<ChatView | null>(null);
  const [messages, setMessages] = useState<ChatMessageView[]>([]);
  const [streaming, setStreaming] = useState<string | null>(null);
  const [handedOver] = useState(() => {
    const c = carried;
    carried = null;
    return c;
  });
  const [draft, setDraft] = useState(handedOver?.draft ?? '');
  const latestDraft = useRef(draft);
  latestDraft.current = draft;
  const [picked, setTeam] = useState<string | null>(null);
  const team = startingTeam(picked, defaultTeam);
  const [error, setError] = useState<string | null>(null);
  const [tooLong, setTooLong] = useState(false);
  /** No such conversation (or another tenant's): nothing to read again. */
  const [missing, setMissing] = useState(false);
  const [busy, setBusy] = useState(false);
  const [action, setAction] = useState(false);
  const bottom = useRef<HTMLDivElement | null>(null);
  const box = useRef<HTMLTextAreaElement | null>(null);
  const currentId = useRef<string | null>(chatId);
  /** A message on its way (set at once: a second Enter in the same moment sees it, unlike `busy`). */
  const sending = useRef(false);
  /** Still the conversation on screen: one left mid-reply does not pull the person back when its reply ends. */
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  // A new conversation that just became its own page: the person goes on typing where they were.
  useEffect(() => {
    if (handedOver) box.current?.focus();
  }, [handedOver]);

  const load = useCallback(async (id: string): Promise<boolean> => {
    try {
      const c = await api<ChatView>('GET', `/v1/chats/${id}`);
      if (!mounted.current) return true;
      setChat(c);
      setMessages(c.messages);
      setTeam(c.team);
      setError(null);
      return true;
    } catch (err) {
      if (!mounted.current) return true;
      if (err instanceof ApiError && err.status === 404) {
        setMissing(true);
        return true;
      }
      setError((err as Error).message);
      return false;
    }
  }, []);
  // A conversation that could not be read (the gateway away) is read again until it can be: it never stays blank.
  useEffect(() => {
    if (!chatId) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let delay = 1000;
    const attempt = async (): Promise<void> => {
      if (await load(chatId)) return;
      if (mounted.current) timer = setTimeout(() => void attempt(), (delay = Math.min(delay * 2, 10_000)));
    };
    void attempt();
    return () => clearTimeout(timer);
  }, [chatId, load]);

  // The person's messages with no reply recorded (a stream lost: a reload, a cut, the gateway
  // gone): the reply is being written elsewhere, or was lost with the gateway. The conversation
  // is read again every few seconds — whatever each read gives (a gateway restarting) — for five
  // minutes from when this page first saw each unanswered (this browser's clock against itself:
  // a clock set wrong neither stops nor stretches the wait), unless the server's time says it is
  // long gone.
  const firstSeen = useRef(new Map<string, number>());
  const [, setTicks] = useState(0);
  const now = Date.now();
  const idle = chat !== null && streaming === null && !sending.current;
  const awaited = idle
    ? unansweredMessages({ messages }).filter((m) => {
        if (!firstSeen.current.has(m.id)) firstSeen.current.set(m.id, now);
        return now - (firstSeen.current.get(m.id) ?? now) < AWAIT_REPLY_MS && now - Date.parse(m.createdAt) < STALE_MS;
      })
    : [];
  const awaiting = awaited.length > 0;
  const awaitKey = awaited.map((m) => m.id).join(',');
  useEffect(() => {
    if (!awaitKey || !chatId) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const tick = async (): Promise<void> => {
      await load(chatId);
      if (stopped) return;
      setTicks((n) => n + 1); // the wait's bound is looked at again, even when nothing new came
      timer = setTimeout(() => void tick(), AWAIT_POLL_MS);
    };
    timer = setTimeout(() => void tick(), AWAIT_POLL_MS);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [awaitKey, chatId, load]);
  const unanswered = idle ? unansweredMessage({ messages }) : null;

  useEffect(() => {
    // The newest message and the box to answer it, in view. (Newer browsers return a promise from scrollIntoView: an effect must return nothing.)
    void bottom.current?.scrollIntoView?.({ block: 'end' });
  }, [messages, streaming]);

  const send = async (): Promise<void> => {
    // One message at a time: Enter while a reply streams does not start another (their words would interleave).
    if (sending.current) return;
    const message = draft.trim();
    setError(null);
    setTooLong(false);
    if (!message) return setError('Write a message first.');
    if (chars(message) > MESSAGE_MAX_CHARS) {
      setTooLong(true);
      return setError(`A message is at most ${MESSAGE_MAX_CHARS.toLocaleString('en')} characters; this one has ${chars(message).toLocaleString('en')}. Shorten it, or send it in parts.`);
    }
    sending.current = true;
    setBusy(true);
    setStreaming('');
    try {
      await sendChat({ message, ...(currentId.current ? { chatId: currentId.current } : team ? { team } : {}) }, (e) => {
        if (e.event === 'chat') {
          currentId.current = e.data.chatId;
          setDraft((d) => (d.trim() === message ? '' : d)); // what the person typed meanwhile stays
          setMessages((m) => [...m, e.data.message]);
        } else if (e.event === 'delta') setStreaming((t) => (t ?? '') + e.data.text);
        else if (e.event === 'message') {
          setStreaming(null);
          setMessages((m) => [...m, e.data]);
        } else {
          setStreaming(null);
          setError(`The reply failed (${e.data.error.code}): ${e.data.error.message}`);
          const failed = e.data.message;
          if (failed) setMessages((m) => [...m, failed]);
        }
      });
      const id = currentId.current;
      onChanged();
      if (!mounted.current) return; // the person went elsewhere meanwhile: stay there
      if (id && id !== chatId) {
        carried = { draft: latestDraft.current };
        go(`#/chat/${id}`);
        return;
      }
      if (id) await load(id);
    } catch (err) {
      if (!mounted.current) return;
      // A stream lost before its first frame still names the conversation (its header).
      if (err instanceof ReplyStreamLost && err.chatId && !currentId.current) currentId.current = err.chatId;
      // A new conversation whose first message was recorded before the stream broke: open it (its reply, or the failure, is read there).
      const id = currentId.current;
      if (id && id !== chatId) {
        carried = { draft: latestDraft.current.trim() === message ? '' : latestDraft.current }; // the message went: not offered again
        go(`#/chat/${id}`);
        return;
      }
      // The stream was lost after the message was recorded: the page reads the conversation again until the reply lands.
      if (id) await load(id);
      setError((err as Error).message);
    } finally {
      sending.current = false;
      if (mounted.current) {
        setStreaming(null);
        setBusy(false);
      }
    }
  };

  if (missing) {
    return (
      <div className="error" role="alert">
        No such conversation: it does not exist, or it is not one of yours. Pick one from the list, or start a new one.
      </div>
    );
  }
  const timeline = chatTimeline({ messages, tasks: chat?.tasks ?? [] });
  const replyPending = streaming !== null || awaiting;
  return (
    <div className="chat">
      <div className="row chat-head">
        <h2>{chat ? `Conversation · ${chat.team}` : chatId ? 'Conversation' : 'New conversation'}</h2>
        {!chat && !chatId && <TeamSelect label="chat team" value={team} onChange={setTeam} teams={teams} />}
        <div className="mode-toggle" role="group" aria-label="chat or action mode">
          <button className={!action ? 'on' : ''} aria-pressed={!action} onClick={() => setAction(false)}>
            Chat
          </button>
          <button className={action ? 'on' : ''} aria-pressed={action} onClick={() => setAction(true)} disabled={!chat || replyPending} title={replyPending ? 'once the reply is here' : undefined}>
            Action mode
          </button>
        </div>
      </div>
      {/* A log: each new message is read out once it is whole (busy while a reply streams, not word by word). */}
      <div className="messages" role="log" aria-label="messages" aria-busy={replyPending}>
        {timeline.map((item) =>
          item.kind === 'task' ? (
            <div key={`task-${item.task.taskId}`} className="msg system">
              Started a task from the conversation up to here: <a href={`#/tasks/${item.task.taskId}`}>{item.task.taskId.slice(0, 8)}</a>
              {item.task.leftOut > 0 ? ` (${messageCount(item.task.leftOut)} left out of its prompt)` : ''}
            </div>
          ) : (
            <MessageBubble key={item.message.id} m={item.message} />
          ),
        )}
        {streaming !== null && (
          <div className="msg assistant streaming" aria-label="reply in progress" dir="auto">
            {streaming || '…'}
          </div>
        )}
        {awaiting && streaming === null && (
          <div className="msg system" role="status">
            A reply is on its way (its stream here was lost): this page shows it once it is recorded.
          </div>
        )}
        {unanswered && !awaiting && (
          <div className="msg system" role="status">
            No reply was recorded for your last message (the gateway may have stopped while writing it). Send another message to go on: the model reads both.
          </div>
        )}
      </div>
      <ErrorLine error={error} id="chat-error" />
      {action && chat ? (
        <ActionPanel chat={chat} teams={teams} />
      ) : (
        <form
          className="composer"
          onSubmit={(e) => {
            e.preventDefault();
            void send();
          }}
        >
          <textarea
            ref={box}
            aria-label="message"
            rows={2}
            dir="auto"
            value={draft}
            placeholder="Ask anything (Enter sends, Shift+Enter for a new line); switch to action mode to hand it to the agents"
            {...invalidProps(tooLong, 'chat-error')}
            onChange={(e) => {
              setDraft(e.target.value);
              if (tooLong && chars(e.target.value.trim()) <= MESSAGE_MAX_CHARS) {
                setTooLong(false);
                setError(null);
              }
            }}
            onKeyDown={(e) => {
              if (e.key !== 'Enter' || e.shiftKey || e.nativeEvent.isComposing) return;
              e.preventDefault();
              e.currentTarget.form?.requestSubmit();
            }}
          />
          <button className="primary" type="submit" {...busyProps(busy)}>
            Send
          </button>
        </form>
      )}
      <div ref={bottom} />
    </div>
  );
}

/** One message: the person's as written (their line breaks kept), the model's rendered as markdown, a failed reply's error. */
function MessageBubble({ m }: { m: ChatMessageView }) {
  return (
    <div className={`msg ${m.role}${m.error ? ' failed' : ''}`} data-role={m.role} dir="auto">
      {m.error ? (
        <em>
          Reply failed ({m.error.code}): {m.error.message}
        </em>
      ) : m.role === 'user' ? (
        <div className="as-written">{m.text}</div>
      ) : (
        <RenderedMarkdown>{m.text}</RenderedMarkdown>
      )}
      {m.role === 'assistant' && (
        <span className="meta">
          {m.offline ? 'offline model' : m.model}
          {m.stopReason === 'max_tokens' ? ' · cut at the reply length limit' : ''}
        </span>
      )}
    </div>
  );
}

/** Action mode: the conversation becomes a task (its last message the request, the rest its context). */
function ActionPanel({ chat, teams }: { chat: ChatView; teams: TeamInfo[] }) {
  const [team, setTeam] = useState(chat.team);
  const [approve, setApprove] = useState(true);
  const [existing, setExisting] = useState<string | null>(null);
  const { error, busy, run } = useAction();
  const start = async (): Promise<void> => {
    setExisting(null);
    const t = await run(
      () => api<TaskView>('POST', `/v1/chats/${chat.id}/task`, { team, requirePlanApproval: approve }),
      'Task started from this conversation.',
      (err) => {
        const taskId = err instanceof ApiError && err.code === 'chat_task_exists' ? (err.body as { error?: { details?: { taskId?: unknown } } }).error?.details?.taskId : undefined;
        if (typeof taskId === 'string') setExisting(taskId);
      },
    );
    if (t) openTask(t.id);
  };
  return (
    <div className="card action-panel">
      <p>Hand this conversation to the agents: its last message becomes the task's request, the conversation its context.</p>
      <div className="row">
        <TeamSelect label="task team" value={team} onChange={setTeam} teams={teams} />
        <ApprovePlan checked={approve} onChange={setApprove} />
        <button className="primary" {...busyProps(busy)} onClick={() => void start()}>
          Start task
        </button>
      </div>
      <ErrorLine error={error} />
      {existing && (
        <p>
          <a href={`#/tasks/${existing}`}>Open the task already started from this request</a>
        </p>
      )}
    </div>
  );
}
