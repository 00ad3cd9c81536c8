import { useCallback, useEffect, useRef, useState } from 'react';
import { api, apiKey, ApiError, isFinalStatus, watchTasks, type TaskView, type TeamInfo } from './api.ts';
import { Chat } from './Chat.tsx';
import { ErrorLine } from './ErrorLine.tsx';
import { ApprovePlan, TeamSelect } from './TeamSelect.tsx';
import { openTask, useAction, useRoute } from './hooks.ts';
import { TaskPage } from './TaskPage.tsx';

type TaskSummary = Pick<TaskView, 'id' | 'status' | 'prompt' | 'team' | 'createdAt' | 'updatedAt'> & { forkedFrom?: TaskView['forkedFrom']; pendingRequests?: unknown[] };
const STATUSES = ['', 'pending', 'running', 'awaiting_input', 'completed', 'failed', 'cancelled'] as const;

export function App() {
  const route = useRoute();
  const [teams, setTeams] = useState<TeamInfo[]>([]);
  const [authProblem, setAuthProblem] = useState<string | null>(null);
  useEffect(() => {
    api<{ items: TeamInfo[] }>('GET', '/v1/teams').then(
      (r) => {
        setTeams(r.items);
        setAuthProblem(null);
      },
      (err: unknown) => setAuthProblem(err instanceof ApiError && (err.status === 401 || err.status === 403) ? 'This gateway needs an API key: enter yours above.' : (err as Error).message),
    );
  }, []);
  return (
    <div className="app">
      <header className="top">
        <a className="brand" href="#/tasks">Baton</a>
        <nav className="modes" aria-label="mode">
          <a className={route.page === 'tasks' ? 'on' : ''} href="#/tasks">Tasks</a>
          <a className={route.page === 'chat' ? 'on' : ''} href="#/chat">Chat</a>
        </nav>
        <KeyBox />
      </header>
      {authProblem && <div className="error banner-error" role="alert">{authProblem}</div>}
      {route.page === 'chat' ? (
        <Chat chatId={route.chatId} teams={teams} />
      ) : (
        <main className="split">
          <aside className="side">
            <NewTask teams={teams} />
            <TaskList selected={route.taskId} teams={teams} />
          </aside>
          <section className="main">{route.taskId ? <TaskPage key={route.taskId} taskId={route.taskId} /> : <p className="hint">Submit a task, or pick one from the list.</p>}</section>
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

function NewTask({ teams }: { teams: TeamInfo[] }) {
  const [prompt, setPrompt] = useState('');
  const [team, setTeam] = useState('research');
  const [approve, setApprove] = useState(true);
  const [budget, setBudget] = useState('');
  const { error, setError, busy, run } = useAction();
  const submit = async (): Promise<void> => {
    if (!prompt.trim()) return setError('Write what the task should do.');
    const usd = budget.trim() ? Number(budget) : undefined;
    if (usd !== undefined && !(usd > 0)) return setError('The budget must be a number of dollars above 0.');
    const t = await run(() => api<TaskView>('POST', '/v1/tasks', { prompt, team, requirePlanApproval: approve, ...(usd !== undefined ? { budget: { usd } } : {}) }));
    if (!t) return;
    setPrompt('');
    openTask(t.id);
  };
  return (
    <form
      className="new-task card"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <textarea aria-label="prompt" placeholder="What should the agents do?" value={prompt} onChange={(e) => setPrompt(e.target.value)} rows={3} />
      <div className="row">
        <TeamSelect label="team" value={team} onChange={setTeam} teams={teams} />
        <ApprovePlan checked={approve} onChange={setApprove} />
        <input aria-label="budget in USD" className="budget" placeholder="budget $" value={budget} onChange={(e) => setBudget(e.target.value)} />
        <button type="submit" disabled={busy}>
          Submit
        </button>
      </div>
      <ErrorLine error={error} />
    </form>
  );
}

function TaskList({ selected, teams }: { selected: string | null; teams: TeamInfo[] }) {
  const [status, setStatus] = useState('');
  const [team, setTeam] = useState('');
  const [items, setItems] = useState<TaskSummary[]>([]);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async () => {
    const q = new URLSearchParams({ limit: '100', ...(status ? { status } : {}), ...(team ? { team } : {}) });
    try {
      setItems((await api<{ items: TaskSummary[] }>('GET', `/v1/tasks?${q}`)).items);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }, [status, team]);
  useEffect(() => void load(), [load]); // and again whenever a filter changes
  // Live: the list loads again when the stream of changes is ready (after a reconnect too: nothing
  // in between is missed) and after each change (changes that come together, one load). Polled
  // only if the gateway refuses the stream.
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    const reload = (): void => void latest.current();
    let soon: ReturnType<typeof setTimeout> | undefined;
    let poll: ReturnType<typeof setInterval> | undefined;
    const watch = watchTasks(
      () => {
        clearTimeout(soon);
        soon = setTimeout(reload, 100);
      },
      reload,
      () => {
        reload();
        poll = setInterval(reload, 4000);
      },
    );
    window.addEventListener('baton:tasks-changed', reload);
    return () => {
      watch.stop();
      clearTimeout(soon);
      clearInterval(poll);
      window.removeEventListener('baton:tasks-changed', reload);
    };
  }, []);
  const cancel = async (id: string): Promise<void> => {
    try {
      await api('POST', `/v1/tasks/${id}/cancel`, { reason: 'cancelled from the console' });
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <div className="task-list">
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
      </div>
      <ErrorLine error={error} />
      <ul>
        {items.map((t) => (
          <li key={t.id} className={t.id === selected ? 'selected' : ''} data-task={t.id}>
            <a href={`#/tasks/${t.id}`}>
              <span className={`status s-${t.status}`}>{t.status.replace('_', ' ')}</span>
              {t.forkedFrom && <span className="fork" title={`fork of ${t.forkedFrom.taskId} at v${t.forkedFrom.atVersion}`}>⑂ fork</span>}
              <span className="prompt">{t.prompt}</span>
              <span className="meta">
                {t.team} · {new Date(t.createdAt).toLocaleTimeString()}
              </span>
            </a>
            {!isFinalStatus(t.status) && (
              <button className="small" onClick={() => void cancel(t.id)} aria-label={`cancel task ${t.id}`}>
                Cancel
              </button>
            )}
          </li>
        ))}
        {items.length === 0 && !error && <li className="hint">No tasks yet.</li>}
      </ul>
    </div>
  );
}
