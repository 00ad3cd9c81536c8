import { useEffect, useRef, useState } from 'react';
import { api, download, forkTask, type EventView, type TaskView } from './api.ts';
import { agentOf, describe, onTaskStream, statusText } from './describe.ts';
import { ErrorLine } from './ErrorLine.tsx';
import { busyProps } from './a11y.tsx';
import { go, useAction } from './hooks.ts';

/** How many of the newest timeline entries are shown at first, and how many more each "show earlier" adds. */
export const TIMELINE_PAGE = 500;

/** The run as it happened: every agent's turns, tool calls, requests and decisions; fork from any task-stream entry. */
export function Timeline({ task, events }: { task: TaskView; events: EventView[] }) {
  const [error, setError] = useState<string | null>(null);
  const [filter, setFilter] = useState('');
  const [stateAt, setStateAt] = useState<{ version: number; task: TaskView } | null>(null);
  const showState = async (version: number): Promise<void> => {
    try {
      setStateAt({ version, task: await api<TaskView>('GET', `/v1/tasks/${task.id}/state?at=${version}`) });
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const agents = [...new Set(events.map(agentOf))];
  // One fork per click: a double-click does not make two tasks.
  const forking = useAction();
  const fork = async (version: number): Promise<void> => {
    const t = await forking.run(() => forkTask(task.id, version), `Forked from version ${version}: the new task opens.`);
    if (!t) return;
    window.dispatchEvent(new Event('baton:tasks-changed'));
    go(`#/tasks/${t.id}`);
    window.scrollTo({ top: 0 }); // the new task opens at the top of its pane, far above a row low on the timeline
  };
  // An error of a click low on the timeline shows at its top: bring it into view.
  const errorLine = useRef<HTMLDivElement>(null);
  const shownError = error ?? forking.error;
  useEffect(() => {
    if (shownError) errorLine.current?.scrollIntoView({ block: 'nearest' });
  }, [shownError]);
  // The state asked for opens above the timeline: bring it into view, and focus it, where the person is.
  const stateCard = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!stateAt) return;
    stateCard.current?.scrollIntoView({ block: 'nearest' });
    stateCard.current?.focus({ preventScroll: true });
  }, [stateAt]);
  const matching = filter ? events.filter((e) => agentOf(e) === filter) : events;
  // The newest entries only, more on request: a task of 20,000 events had made 140,000 nodes in the page.
  const [limit, setLimit] = useState(TIMELINE_PAGE);
  useEffect(() => setLimit(TIMELINE_PAGE), [task.id, filter]);
  const earlier = Math.max(0, matching.length - limit);
  const shown = earlier > 0 ? matching.slice(earlier) : matching;
  // A fork continues a task: none from its end (its final event) or after it.
  const end = events.find((e) => onTaskStream(e) && FINAL_TYPES.has(e.type))?.version ?? task.version;
  return (
    <section className="timeline" aria-labelledby="timeline-heading">
      <div className="row section-head">
        <h3 id="timeline-heading">Timeline</h3>
        <select aria-label="timeline agent" value={filter} onChange={(e) => setFilter(e.target.value)}>
          <option value="">every agent</option>
          {agents.map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
      </div>
      <div ref={errorLine}>
        <ErrorLine error={shownError} />
      </div>
      {stateAt && (
        // Escape closes it, as its close button does.
        <div className="card state-at" role="region" aria-label="state at version" ref={stateCard} tabIndex={-1} onKeyDown={(e) => e.key === 'Escape' && setStateAt(null)}>
          <div className="row">
            <b>The task after version {stateAt.version}</b>
            <span className={`status s-${stateAt.task.status}`}>{statusText(stateAt.task.status)}</span>
            <span className="meta">
              agents: {stateAt.task.agents.map((a) => `${a.id} ${a.status}`).join(', ') || 'none'} · open requests: {stateAt.task.pendingRequests.map((r) => r.requestId).join(', ') || 'none'}
            </span>
            <button className="small" onClick={() => setStateAt(null)}>
              close
            </button>
          </div>
          <div className="artifacts" aria-label="files at version">
            files then:{' '}
            {stateAt.task.artifacts.length === 0
              ? 'none'
              : stateAt.task.artifacts.map((a, i) => (
                  <span key={a.path}>
                    {i > 0 && ', '}
                    <button className="link" title={`${a.path} as it was after version ${stateAt.version} (${a.bytes} bytes)`} onClick={() => void download(task.id, a.path, stateAt.version).catch((err: unknown) => setError((err as Error).message))}>
                      {a.path}
                    </button>
                  </span>
                ))}
          </div>
          <details>
            <summary>the whole task object</summary>
            <pre>{JSON.stringify(stateAt.task, null, 2)}</pre>
          </details>
        </div>
      )}
      {earlier > 0 && (
        <p className="row">
          <span className="meta">{earlier} earlier {earlier === 1 ? 'entry' : 'entries'} not shown</span>
          <button className="small" onClick={() => setLimit((l) => l + TIMELINE_PAGE)}>
            show {Math.min(TIMELINE_PAGE, earlier)} earlier
          </button>
        </p>
      )}
      <ol>
        {shown.map((e) => {
          const onTask = onTaskStream(e);
          return (
            <li key={e.id} className={`ev ev-${e.type}`} data-type={e.type}>
              <EventTime e={e} />
              <span className="badge agent">{agentOf(e)}</span>
              <span className="what">{describe(e, events)}</span>
              <span className="row">
                {onTask && (
                  <button className="small" title={`the task as it was after version ${e.version}`} aria-label={`state after version ${e.version}`} onClick={() => void showState(e.version)}>
                    state
                  </button>
                )}
                {onTask && e.version < end && (
                  <button className="small fork-here" title={`a new task from version ${e.version}`} aria-label={`fork from here, version ${e.version}`} {...busyProps(forking.busy)} onClick={() => void fork(e.version)}>
                    fork from here
                  </button>
                )}
              </span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}

const FINAL_TYPES: ReadonlySet<string> = new Set(['TaskCompleted', 'TaskFailed', 'TaskCancelled']);

/** When it happened: a fork's copy of its source's history shows the source's time, marked as a copy. */
function EventTime({ e }: { e: EventView }) {
  const m = (e.metadata ?? {}) as { copiedFrom?: unknown; copiedRecordedAt?: unknown };
  if (typeof m.copiedFrom !== 'string') return <time dateTime={e.recordedAt}>{new Date(e.recordedAt).toLocaleTimeString()}</time>;
  const at = typeof m.copiedRecordedAt === 'string' ? m.copiedRecordedAt : null;
  return (
    <span className="copied" title={`copied into this fork at ${new Date(e.recordedAt).toLocaleString()}${at ? `; recorded in the source task at ${new Date(at).toLocaleString()}` : ''}`}>
      <time dateTime={at ?? e.recordedAt}>{new Date(at ?? e.recordedAt).toLocaleTimeString()}</time> <span className="badge">copied</span>
    </span>
  );
}
