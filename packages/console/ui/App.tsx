import { useCallback, useEffect, useRef, useState } from 'react';
import { api, apiKey, ApiError, isFinalStatus, listTasks, newIdempotencyKey, reconnectStreams, submitTask, watchTasks, type TaskListItem, type TeamInfo } from './api.ts';
import { createdWhen, mergeTask, reaches, settle, TASK_CHANGED } from './task-list.ts';
import { Chat } from './Chat.tsx';
import { ErrorLine } from './ErrorLine.tsx';
import { ApprovePlan, TeamSelect } from './TeamSelect.tsx';
import { startingTeam } from './teams.ts';
import { announce, Announcer, busyProps, ConfirmButton, invalidProps } from './a11y.tsx';
import { openTask, useAction, useRoute } from './hooks.ts';
import { statusText } from './describe.ts';
import { TaskPage } from './TaskPage.tsx';

const STATUSES = ['', 'pending', 'running', 'awaiting_input', 'completed', 'failed', 'cancelled'] as const;

/**
 * The live views follow the device's network: offline, each stream is cut at once (the page says
 * "reconnecting", not "● live" on a stale task); back online, or the page back in view after a
 * while away (a phone's connection dies without a word while it sleeps), each is opened again and
 * resumes where it was.
 */
function useStreamsFollowTheNetwork(): void {
  useEffect(() => {
    let hiddenAt = 0;
    const offline = (): void => reconnectStreams('this device went offline');
    const online = (): void => reconnectStreams('this device is back online');
    const visibility = (): void => {
      if (document.visibilityState === 'hidden') hiddenAt = Date.now();
      else if (hiddenAt && Date.now() - hiddenAt > 10_000) reconnectStreams('the page is back in view');
    };
    window.addEventListener('offline', offline);
    window.addEventListener('online', online);
    document.addEventListener('visibilitychange', visibility);
    return () => {
      window.removeEventListener('offline', offline);
      window.removeEventListener('online', online);
      document.removeEventListener('visibilitychange', visibility);
    };
  }, []);
}

/** The width under which the page is one column (styles.css: a task opened is shown alone, with a link back to the list). */
const ONE_COLUMN = '(max-width: 800px)';

export function App() {
  const route = useRoute();
  useStreamsFollowTheNetwork();
  const opened = route.page === 'tasks' ? route.taskId : route.chatId;
  // In one column, a task picked far down the list opens alone, at the top of the page: go there, with the keyboard's focus (the list, and the link pressed, are hidden).
  // Back to the list, the task (or conversation) just shown is where the person left the list: in view, with the focus.
  const lastOpened = useRef<string | null>(null);
  useEffect(() => {
    const before = lastOpened.current;
    lastOpened.current = opened;
    if (!window.matchMedia(ONE_COLUMN).matches) return;
    if (opened) {
      window.scrollTo({ top: 0 });
      document.getElementById('content')?.focus({ preventScroll: true });
      return;
    }
    if (!before) return;
    const item = document.querySelector<HTMLAnchorElement>(`li[data-task="${CSS.escape(before)}"] a, li[data-chat="${CSS.escape(before)}"] a`);
    item?.focus({ preventScroll: true });
    item?.scrollIntoView({ block: 'center' });
  }, [opened]);
  const [teams, setTeams] = useState<TeamInfo[]>([]);
  /** The team a task or chat that names none gets (the gateway's BATON_DEFAULT_TEAM): the forms start on it. */
  const [defaultTeam, setDefaultTeam] = useState<string | null>(null);
  const [authProblem, setAuthProblem] = useState<string | null>(null);
  useEffect(() => {
    api<{ items: TeamInfo[]; default: string | null }>('GET', '/v1/teams').then(
      (r) => {
        setTeams(r.items);
        setDefaultTeam(r.default);
        setAuthProblem(null);
      },
      (err: unknown) => {
        const refused = err instanceof ApiError && (err.status === 401 || err.status === 403);
        // A key that was sent and refused is not a missing key: say which, with the gateway's words.
        setAuthProblem(!refused ? (err as Error).message : apiKey.get() ? `The gateway refused this API key (${(err as Error).message}): enter another above.` : `This gateway needs an API key: enter yours above (your team's admin has it).${location.hash.startsWith('#/tasks/') ? ' Came from a mail? Its own Approve, Reject and Answer buttons work without a key.' : ''}`);
      },
    );
  }, []);
  return (
    <div className="app">
      <Announcer />
      <button className="skip" onClick={() => document.getElementById('content')?.focus()}>
        Skip to the {route.page === 'chat' ? 'conversation' : 'task'}
      </button>
      <header className="top">
        <h1 className="brand">
          <a href="#/tasks">Baton</a>
        </h1>
        <nav className="modes" aria-label="mode">
          <a className={route.page === 'tasks' ? 'on' : ''} href="#/tasks">Tasks</a>
          <a className={route.page === 'chat' ? 'on' : ''} href="#/chat">Chat</a>
        </nav>
        <KeyBox />
      </header>
      {authProblem && <div className="error banner-error" role="alert">{authProblem}</div>}
      {route.page === 'chat' ? (
        <Chat chatId={route.chatId} badId={route.badId} teams={teams} defaultTeam={defaultTeam} />
      ) : (
        <main className={`split${route.taskId ? ' opened' : ''}`}>
          <aside className="side">
            <NewTask teams={teams} defaultTeam={defaultTeam} />
            <TaskList selected={route.taskId} teams={teams} />
          </aside>
          <section className="main" id="content" tabIndex={-1} aria-label="task">
            {route.taskId && (
              <a className="back-to-list" href="#/tasks">
                ← All tasks
              </a>
            )}
            {route.taskId ? (
              <TaskPage key={route.taskId} taskId={route.taskId} />
            ) : route.badId ? (
              <div className="error" role="alert">
                No task '{route.badId}': a task id is a UUID, like 0b9f4c1e-2d3a-4b5c-8d7e-6f5a4b3c2d1e. Pick one from the list.
              </div>
            ) : (
              <p className="hint">Submit a task, or pick one from the list.</p>
            )}
          </section>
        </main>
      )}
    </div>
  );
}

function KeyBox() {
  const [key, setKey] = useState(apiKey.get());
  const [editing, setEditing] = useState(false);
  if (!editing) {
    return (
      <button className="key" onClick={() => setEditing(true)} title="The API key is kept in this browser only and sent as a header">
        {key ? 'API key set' : 'No API key'}
      </button>
    );
  }
  return (
    <form
      className="key"
      onSubmit={(e) => {
        e.preventDefault();
        apiKey.set(key.trim());
        setEditing(false);
        window.location.reload();
      }}
    >
      <input aria-label="API key" type="password" value={key} placeholder="API key" onChange={(e) => setKey(e.target.value)} autoFocus />
      <button type="submit">Save</button>
    </form>
  );
}

/** A configured example project a task can start from (GET /v1/examples). */
interface Example {
  name: string;
  files: number;
  bytes: number;
  error: string | null;
}

/** The workspace picker's value: none, an example by name, or an uploaded archive. */
const UPLOAD = 'upload';
const EXAMPLE = 'example:';
/** The gateway's refusals of an uploaded archive (the file field is marked and focused). */
const ARCHIVE_REFUSALS = new Set(['invalid_workspace', 'workspace_too_large', 'payload_too_large']);

/** A file's bytes as base64 (the JSON body's `workspace.archiveBase64`). */
async function base64Of(file: File): Promise<string> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function NewTask({ teams, defaultTeam }: { teams: TeamInfo[]; defaultTeam: string | null }) {
  const [prompt, setPrompt] = useState('');
  const [picked, setTeam] = useState<string | null>(null);
  const team = startingTeam(picked, defaultTeam);
  const [approve, setApprove] = useState(true);
  const [budget, setBudget] = useState('');
  const [examples, setExamples] = useState<Example[]>([]);
  const [workspace, setWorkspace] = useState('');
  const [archive, setArchive] = useState<File | null>(null);
  // This form's Idempotency-Key: the same until the task is created or the form changes, so a click
  // again after a lost answer is the task already made, not a second one.
  const sendKey = useRef(newIdempotencyKey());
  useEffect(() => {
    sendKey.current = newIdempotencyKey();
  }, [prompt, team, approve, budget, workspace, archive]);
  const { error, setError, busy, run } = useAction();
  /** The field the last refusal of the form names (marked invalid, focused). */
  const [bad, setBad] = useState<'prompt' | 'budget' | 'archive' | null>(null);
  useEffect(() => {
    api<{ items: Example[] }>('GET', '/v1/examples').then(
      (r) => setExamples(r.items.filter((x) => x.error === null)),
      () => setExamples([]), // the form works without them: no example to pick
    );
  }, []);
  const refuse = (field: 'prompt' | 'budget' | 'archive', message: string): void => {
    setBad(field);
    setError(message);
    document.getElementById(`new-task-${field}`)?.focus(); // where it is mended
  };
  const submit = async (): Promise<void> => {
    if (!prompt.trim()) return refuse('prompt', 'Write what the task should do.');
    const usd = budget.trim() ? Number(budget) : undefined;
    if (usd !== undefined && !(usd > 0)) return refuse('budget', 'The budget must be a number of dollars above 0.');
    if (workspace === UPLOAD && !archive) return refuse('archive', 'Choose the .tar.gz of the project to start from, or pick no workspace.');
    setBad(null);
    const t = await run(async () => {
      const ws = workspace.startsWith(EXAMPLE) ? { example: workspace.slice(EXAMPLE.length) } : workspace === UPLOAD && archive ? { archiveBase64: await base64Of(archive), name: archive.name } : undefined;
      return submitTask({ prompt, ...(team ? { team } : {}), requirePlanApproval: approve, ...(usd !== undefined ? { budget: { usd } } : {}), ...(ws ? { workspace: ws } : {}) }, sendKey.current);
    }, 'Task created.', (err) => {
      // An archive the gateway refused (not a .tar.gz, an entry it cannot take, too large): the file field is where it is mended.
      if (workspace === UPLOAD && err instanceof ApiError && ARCHIVE_REFUSALS.has(err.code)) {
        setBad('archive');
        document.getElementById('new-task-archive')?.focus();
      }
    });
    if (!t) return;
    sendKey.current = newIdempotencyKey();
    setPrompt('');
    openTask(t.id);
  };
  return (
    <form
      className="new-task card"
      aria-labelledby="new-task-heading"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <h2 className="sr-only" id="new-task-heading">
        New task
      </h2>
      <textarea id="new-task-prompt" aria-label="prompt" {...invalidProps(bad === 'prompt' && !prompt.trim(), 'new-task-error')} placeholder="What should the agents do?" value={prompt} onChange={(e) => setPrompt(e.target.value)} rows={3} />
      <div className="row">
        <TeamSelect label="team" value={team} onChange={setTeam} teams={teams} />
        <ApprovePlan checked={approve} onChange={setApprove} />
        <input id="new-task-budget" aria-label="budget in USD" {...invalidProps(bad === 'budget', 'new-task-error')} className="budget" placeholder="budget $" value={budget} onChange={(e) => setBudget(e.target.value)} />
        <button type="submit" {...busyProps(busy)}>
          Submit
        </button>
      </div>
      <div className="row">
        <select
          aria-label="workspace"
          value={workspace}
          onChange={(e) => {
            setWorkspace(e.target.value);
            // The file field comes back empty when "upload" is picked again: so does what is sent.
            setArchive(null);
            if (bad === 'archive') setBad(null);
          }}
        >
          <option value="">no workspace (start from nothing)</option>
          {examples.map((x) => (
            <option key={x.name} value={`${EXAMPLE}${x.name}`}>
              example: {x.name} ({x.files} files)
            </option>
          ))}
          <option value={UPLOAD}>upload a project (.tar.gz)…</option>
        </select>
        {workspace === UPLOAD && (
          <input
            id="new-task-archive"
            type="file"
            aria-label="project archive"
            {...invalidProps(bad === 'archive', 'new-task-error')}
            accept=".tar.gz,.tgz,application/gzip"
            onChange={(e) => {
              setArchive(e.target.files?.[0] ?? null);
              if (bad === 'archive') setBad(null);
            }}
          />
        )}
      </div>
      <ErrorLine error={error} id="new-task-error" />
    </form>
  );
}

/** How many tasks one page of the list holds (newest first); "Show older tasks" loads the next. */
const PAGE_SIZE = 100;

/** The list's filters, kept for this browser tab: a reload (or a visit to a chat) keeps them. */
const FILTERS_KEY = 'baton.taskFilters';
interface Filters {
  status: string;
  team: string;
  search: string;
}
function savedFilters(): Filters {
  try {
    const f = JSON.parse(sessionStorage.getItem(FILTERS_KEY) ?? '{}') as Partial<Filters>;
    const text = (v: unknown): string => (typeof v === 'string' ? v : '');
    return { status: text(f.status), team: text(f.team), search: text(f.search) };
  } catch {
    return { status: '', team: '', search: '' };
  }
}

function TaskList({ selected, teams }: { selected: string | null; teams: TeamInfo[] }) {
  const [initial] = useState(savedFilters);
  const [status, setStatus] = useState(initial.status);
  const [team, setTeam] = useState(initial.team);
  /** The search as typed, and as applied (a moment after the typing stops). */
  const [typed, setTyped] = useState(initial.search);
  const [search, setSearch] = useState(initial.search);
  useEffect(() => {
    const t = setTimeout(() => setSearch(typed.trim()), 250);
    return () => clearTimeout(t);
  }, [typed]);
  useEffect(() => sessionStorage.setItem(FILTERS_KEY, JSON.stringify({ status, team, search } satisfies Filters)), [status, team, search]);
  const [items, setItems] = useState<TaskListItem[]>([]);
  /** The list has been read at least once (before that, an empty list says nothing). */
  const [read, setRead] = useState(false);
  /** Where the next (older) page starts; null when every task the filters match is shown. */
  const [more, setMore] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const filter = useRef({ status, team, search });
  filter.current = { status, team, search };
  const complete = useRef(true);
  complete.current = more === null;
  /** Pages wanted: the first, and one more per "Show older tasks". */
  const pages = useRef(1);
  /** Pages the last load that answered for the list read. */
  const loadedPages = useRef(1);
  /** The list as shown: a reload reads down to its oldest task, so none that came in live is dropped. */
  const shown = useRef<TaskListItem[]>([]);
  shown.current = items;
  /** The changes the stream brought while a load is on its way (null: none is): merged into what it read. */
  const arrived = useRef<TaskListItem[] | null>(null);
  const loads = useRef(0);
  /** Load the list: the pages wanted, and on down to the oldest task shown (`fresh`: the filters changed, the first page). True if it answered for the list. */
  const load = useCallback(
    async (opts: { fresh?: boolean } = {}): Promise<boolean> => {
      const seq = ++loads.current;
      arrived.current = [];
      const oldest = opts.fresh ? undefined : shown.current.at(-1);
      try {
        const loaded: TaskListItem[] = [];
        const ids = new Set<string>();
        let cursor: string | null = null;
        let n = 0;
        do {
          const page: { items: TaskListItem[]; nextCursor: string | null } = await listTasks({ status, team, search, limit: PAGE_SIZE, ...(cursor ? { cursor } : {}) });
          n++;
          for (const t of page.items) {
            if (ids.has(t.id)) continue; // a task that moved between two pages' reads: shown once
            ids.add(t.id);
            loaded.push(t);
          }
          cursor = page.nextCursor;
        } while (cursor && (n < pages.current || (oldest !== undefined && !reaches(loaded.at(-1) ?? oldest, oldest))));
        if (seq !== loads.current) return false; // a later load answers for the list
        const changes = arrived.current ?? [];
        arrived.current = null;
        setItems(settle(loaded, changes, filter.current, cursor === null));
        setRead(true);
        setMore(cursor);
        pages.current = loadedPages.current = n;
        setError(null);
        return true;
      } catch (err) {
        if (seq !== loads.current) return false;
        arrived.current = null;
        pages.current = loadedPages.current; // an older page asked for and not loaded is asked for again by the next click
        setError((err as Error).message);
        return false;
      }
    },
    [status, team, search],
  );
  useEffect(() => {
    pages.current = 1; // the first page again whenever a filter changes
    void load({ fresh: true });
  }, [load]);
  const older = async (): Promise<void> => {
    pages.current = loadedPages.current + 1; // a reload meanwhile loads it too
    setLoadingOlder(true);
    await load();
    setLoadingOlder(false);
  };
  // Live: each change on the stream of your tasks' changes is merged into the list as it comes;
  // the list is loaded again when the stream is ready (after a reconnect too: nothing in between
  // is missed). Polled every 4 s while the stream is down, or if the gateway refuses it.
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    const reload = (): void => void latest.current();
    let poll: ReturnType<typeof setInterval> | undefined;
    const polling = (on: boolean): void => {
      if (on && poll === undefined) poll = setInterval(reload, 4000);
      if (!on && poll !== undefined) {
        clearInterval(poll);
        poll = undefined;
      }
    };
    const watch = watchTasks(
      (t) => {
        arrived.current?.push(t);
        setItems((list) => mergeTask(list, t, filter.current, complete.current));
        // For the rest of the page (a task's forks): each change of your tasks as it comes.
        window.dispatchEvent(new CustomEvent<TaskListItem>(TASK_CHANGED, { detail: t }));
      },
      (state) => {
        polling(state === 'reconnecting');
        if (state === 'live') reload();
      },
      (err) => {
        reload();
        // Refused for the key (missing or wrong): polling would be refused too, every 4 s; the page asks for a key, whose saving reloads it.
        const forKey = err instanceof ApiError && (err.status === 401 || err.status === 403);
        if (!forKey) polling(true);
      },
    );
    window.addEventListener('baton:tasks-changed', reload);
    return () => {
      watch.stop();
      polling(false);
      window.removeEventListener('baton:tasks-changed', reload);
    };
  }, []);
  // Cancelling from the list takes a second press on "Confirm cancel" (a misclick would end a run).
  const cancel = async (id: string): Promise<void> => {
    try {
      await api('POST', `/v1/tasks/${id}/cancel`, { reason: 'cancelled from the console' });
      announce('Task cancelled.');
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    // Focus that loses its control here (a task's Cancel gone once it ended) comes back to the list's heading.
    <div className="task-list" data-focus-home="task-list-heading">
      <h2 className="sr-only" id="task-list-heading" tabIndex={-1}>
        Tasks
      </h2>
      <div className="row filters">
        <select aria-label="filter by status" value={status} onChange={(e) => setStatus(e.target.value)}>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s || 'any status'}
            </option>
          ))}
        </select>
        <select aria-label="filter by team" value={team} onChange={(e) => setTeam(e.target.value)}>
          <option value="">any team</option>
          {teams.map((t) => (
            <option key={t.id} value={t.id}>
              {t.id}
            </option>
          ))}
        </select>
        <input type="search" aria-label="search prompts" placeholder="search" value={typed} onChange={(e) => setTyped(e.target.value)} />
      </div>
      <ErrorLine error={error} />
      <ul>
        {items.map((t) => (
          <li key={t.id} className={t.id === selected ? 'selected' : ''} data-task={t.id}>
            <a href={`#/tasks/${t.id}`}>
              <span className={`status s-${t.status}`}>{statusText(t.status)}</span>
              {t.forkedFrom && <span className="fork" title={`fork of ${t.forkedFrom.taskId} at version ${t.forkedFrom.atVersion}`}>⑂ fork</span>}
              <span className="prompt">{t.prompt}</span>
              <span className="meta">
                {t.team} · <time dateTime={t.createdAt}>{createdWhen(t.createdAt)}</time>
              </span>
            </a>
            {!isFinalStatus(t.status) && <ConfirmButton className="small" label="Cancel" confirmLabel="Confirm cancel" name={`Cancel task ${t.prompt.slice(0, 80)}`} confirmName={`Confirm cancel: task ${t.prompt.slice(0, 80)}`} onConfirm={() => void cancel(t.id)} data-cancel={t.id} />}
          </li>
        ))}
        {items.length === 0 && !error && <li className="hint">{!read ? 'Loading…' : status || team || search ? 'No task matches these filters.' : 'No tasks yet.'}</li>}
      </ul>
      {more !== null && (
        <button className="small older" onClick={() => void older()} disabled={loadingOlder}>
          {loadingOlder ? 'Loading…' : `Show older tasks (${items.length} shown)`}
        </button>
      )}
    </div>
  );
}
