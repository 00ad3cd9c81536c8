import { useCallback, useEffect, useRef, useState } from 'react';
import { RenderedMarkdown } from './Markdown.tsx';
import { api, sendChat, type ChatMessageView, type ChatSummaryView, type ChatView, type TaskView, type TeamInfo } from './api.ts';
import { ErrorLine } from './ErrorLine.tsx';
import { ApprovePlan, TeamSelect } from './TeamSelect.tsx';
import { startingTeam } from './teams.ts';
import { busyProps } from './a11y.tsx';
import { go, openTask, useAction } from './hooks.ts';

/**
 * Chat mode: talk with the model (no sandbox, no lead loop); the reply streams word by word and
 * the conversation is durable (a reload continues it). Action mode turns the conversation into a
 * task, carrying it as the task's context.
 */
export function Chat({ chatId, badId, teams, defaultTeam }: { chatId: string | null; badId?: string | undefined; teams: TeamInfo[]; defaultTeam: string | null }) {
  const [list, setList] = useState<ChatSummaryView[]>([]);
  const loadList = useCallback(async () => {
    try {
      setList((await api<{ items: ChatSummaryView[] }>('GET', '/v1/chats?limit=50')).items);
    } catch {
      // the conversation view shows errors where the person acts; the list retries on the next change
    }
  }, []);
  useEffect(() => {
    void loadList();
  }, [loadList, chatId]);
  return (
    <main className={`split${chatId ? ' opened' : ''}`}>
      <aside className="side">
        <button className="primary" onClick={() => go('#/chat')}>
          New conversation
        </button>
        <ul className="chat-list">
          {list.map((c) => (
            <li key={c.id} className={c.id === chatId ? 'selected' : ''} data-chat={c.id}>
              <a href={`#/chat/${c.id}`}>
                <span className="prompt">{c.title}</span>
                <span className="meta">
                  {c.team} · {c.messages} messages{c.tasks > 0 ? ` · ${c.tasks} task${c.tasks > 1 ? 's' : ''}` : ''}
                </span>
              </a>
            </li>
          ))}
        </ul>
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

/** What the person had typed when a new conversation became its own page (`#/chat/<id>`): that page starts with it. */
let carriedDraft = '';

function Conversation({ chatId, teams, defaultTeam, onChanged }: { chatId: string | null; teams: TeamInfo[]; defaultTeam: string | null; onChanged: () => void }) {
  const [chat, setChat] = useState<ChatView | null>(null);
  const [messages, setMessages] = useState<ChatMessageView[]>([]);
  const [streaming, setStreaming] = useState<string | null>(null);
  const [draft, setDraft] = useState(() => {
    const d = carriedDraft;
    carriedDraft = '';
    return d;
  });
  const latestDraft = useRef(draft);
  latestDraft.current = draft;
  const [picked, setTeam] = useState<string | null>(null);
  const team = startingTeam(picked, defaultTeam);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [action, setAction] = useState(false);
  const bottom = useRef<HTMLDivElement | null>(null);
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
      if (mounted.current) setError((err as Error).message);
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
  useEffect(() => {
    // (Newer browsers return a promise from scrollIntoView: an effect must return nothing.)
    void bottom.current?.scrollIntoView?.({ block: 'end' });
  }, [messages, streaming]);

  const send = async (): Promise<void> => {
    // One message at a time: Enter while a reply streams does not start another (their words would interleave).
    if (sending.current) return;
    const message = draft.trim();
    setError(null);
    if (!message) return setError('Write a message first.');
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
        carriedDraft = latestDraft.current;
        go(`#/chat/${id}`);
        return;
      }
      if (id) await load(id);
    } catch (err) {
      if (!mounted.current) return;
      setError((err as Error).message);
      // A new conversation whose first message was recorded before the stream broke: open it (its reply, or the failure, is read there).
      const id = currentId.current;
      if (id && id !== chatId) go(`#/chat/${id}`);
    } finally {
      sending.current = false;
      if (mounted.current) {
        setStreaming(null);
        setBusy(false);
      }
    }
  };

  return (
    <div className="chat">
      <div className="row chat-head">
        <h2>{chat ? `Conversation · ${chat.team}` : chatId ? 'Conversation' : 'New conversation'}</h2>
        {!chat && !chatId && (
          <TeamSelect label="chat team" value={team} onChange={setTeam} teams={teams} />
        )}
        <div className="mode-toggle" role="group" aria-label="chat or action mode">
          <button className={!action ? 'on' : ''} aria-pressed={!action} onClick={() => setAction(false)}>
            Chat
          </button>
          <button className={action ? 'on' : ''} aria-pressed={action} onClick={() => setAction(true)} disabled={!chat}>
            Action mode
          </button>
        </div>
      </div>
      {/* A log: each new message is read out once it is whole (busy while a reply streams, not word by word). */}
      <div className="messages" role="log" aria-label="messages" aria-busy={streaming !== null}>
        {messages.map((m) => (
          <div key={m.id} className={`msg ${m.role}${m.error ? ' failed' : ''}`} data-role={m.role}>
            {/* What the person wrote, as written (their line breaks kept); the model's reply rendered as markdown. */}
            {m.error ? <em>Reply failed ({m.error.code}): {m.error.message}</em> : m.role === 'user' ? <div className="as-written">{m.text}</div> : <RenderedMarkdown>{m.text}</RenderedMarkdown>}
            {m.role === 'assistant' && <span className="meta">{m.offline ? 'offline model' : m.model}</span>}
          </div>
        ))}
        {streaming !== null && (
          <div className="msg assistant streaming" aria-label="reply in progress">
            {streaming || '…'}
          </div>
        )}
        {chat?.tasks.map((t) => (
          <div key={t.taskId} className="msg system">
            Started a task from this conversation: <a href={`#/tasks/${t.taskId}`}>{t.taskId.slice(0, 8)}</a>
            {t.leftOut > 0 ? ` (${t.leftOut} oldest messages left out of its prompt)` : ''}
          </div>
        ))}
        <div ref={bottom} />
      </div>
      <ErrorLine error={error} />
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
            aria-label="message"
            rows={2}
            value={draft}
            placeholder="Ask anything (Enter sends, Shift+Enter for a new line); switch to action mode to hand it to the agents"
            onChange={(e) => setDraft(e.target.value)}
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
    </div>
  );
}

/** Action mode: the conversation becomes a task (its last message the request, the rest its context). */
function ActionPanel({ chat, teams }: { chat: ChatView; teams: TeamInfo[] }) {
  const [team, setTeam] = useState(chat.team);
  const [approve, setApprove] = useState(true);
  const { error, busy, run } = useAction();
  const start = async (): Promise<void> => {
    const t = await run(() => api<TaskView>('POST', `/v1/chats/${chat.id}/task`, { team, requirePlanApproval: approve }), 'Task started from this conversation.');
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
    </div>
  );
}
