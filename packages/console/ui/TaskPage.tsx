import { useCallback, useEffect, useRef, useState } from 'react';
import { RenderedMarkdown } from './Markdown.tsx';
import { api, apiText, download, downloadArchive, followEvents, isFinalStatus, listTasks, saveText, taskChange, type AgentView, type EventView, type TaskChangeView, type TaskListItem, type TaskView } from './api.ts';
import { changeKey, changeTotals, fileSections, fileStat, lineKind, UNFOLDED_FILES } from './change.ts';
import { Deliveries } from './Deliveries.tsx';
import { ErrorLine } from './ErrorLine.tsx';
import { announce, busyProps, ConfirmButton } from './a11y.tsx';
import { closingOf, MAX_RENDERED_REPORT_CHARS, reportStart, requestTitle, statusText, taskNews } from './describe.ts';
import { dropEditDraft, isSending, RequestCard, savedEditDraft, useDecision, type Decided } from './Requests.tsx';
import { Timeline } from './Timeline.tsx';
import { Toasts } from './Toasts.tsx';
import { useAction, useArmed } from './hooks.ts';
import { createdWhen, mergeTask, TASK_CHANGED } from './task-list.ts';

/** A prompt longer than this shows folded to a few lines, with a button to show all of it. */
const LONG_PROMPT = 300;

/** A task: what waits for the person first, then the agents at work, the report or change, and the run's timeline — live. */
export function TaskPage({ taskId }: { taskId: string }) {
  const [task, setTask] = useState<TaskView | null>(null);
  const [agents, setAgents] = useState<AgentView[]>([]);
  const [events, setEvents] = useState<EventView[]>([]);
  const [streamState, setStreamState] = useState<'connecting' | 'live' | 'reconnecting' | 'ended'>('connecting');
  const [error, setError] = useState<string | null>(null);
  /** Why the live view ended, if the gateway refused it (kept apart from `error`, which each refresh clears). */
  const [lost, setLost] = useState<string | null>(null);
  // What the page says of its live view: the stream's own state, or lost once refused.
  const live = lost !== null ? 'lost' : streamState;
  const [editing, setEditing] = useState<string | null>(null);
  /** What the gateway said of a decision on a request no longer open (a 409): shown until the next decision. */
  const [stale, setStale] = useState<string | null>(null);
  /** The request being edited when it closed elsewhere (said until the person acts again). */
  const [closedEdit, setClosedEdit] = useState<string | null>(null);
  const [wholePrompt, setWholePrompt] = useState(false);
  const refreshTimer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const lastRefresh = useRef(0);

  // What changes on its own (the status, a new request) is said to a screen reader, as it is shown.
  const before = useRef<TaskView | null>(null);
  useEffect(() => {
    if (!task) return;
    announce(taskNews(before.current, task));
    before.current = task;
  }, [task]);

  // The browser tab names the task (several tasks open in tabs are told apart).
  const prompt = task?.prompt;
  useEffect(() => {
    if (prompt) document.title = `${prompt.length > 60 ? `${prompt.slice(0, 59)}…` : prompt} — Baton`;
    return () => {
      document.title = 'Baton';
    };
  }, [prompt]);

  const refresh = useCallback(async () => {
    try {
      const [t, a] = await Promise.all([api<TaskView>('GET', `/v1/tasks/${taskId}`), api<{ items: AgentView[] }>('GET', `/v1/tasks/${taskId}/agents`)]);
      setTask(t);
      setAgents(a.items);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }, [taskId]);

  useEffect(() => {
    let stream: { stop(): void } | null = null;
    let cancelled = false;
    // The timeline comes from one stream, from the start: the event stream is gap-free (commit
    // order), where a snapshot by position followed from its last event could miss an event whose
    // transaction began first and committed after the snapshot. Events arriving together are shown
    // together (one render per batch, not per event).
    let batch: EventView[] = [];
    let flush: ReturnType<typeof setTimeout> | null = null;
    const show = (): void => {
      flush = null;
      const got = batch;
      batch = [];
      if (!cancelled) setEvents((prev) => [...prev, ...got]);
    };
    setEvents([]);
    void (async () => {
      await refresh();
      if (cancelled) return;
      stream = followEvents(
        taskId,
        0,
        (e) => {
          batch.push(e);
          flush ??= setTimeout(show, 0);
          // The task and its agents read again soon after an event, and at most once a second while
          // events flow (each read folds the task: a long history streamed in made a read per batch).
          if (!refreshTimer.current) {
            refreshTimer.current = setTimeout(() => {
              refreshTimer.current = null;
              lastRefresh.current = Date.now();
              void refresh();
            }, Math.max(120, lastRefresh.current + 1000 - Date.now()));
          }
        },
        (s) => {
          setStreamState(s);
          if (s === 'ended') void refresh();
        },
        (err) => {
          setLost(`The live view stopped: ${err.message}. Reload the page to follow the task again.`);
        },
      );
    })();
    return () => {
      cancelled = true;
      stream?.stop();
      if (flush) clearTimeout(flush);
      if (refreshTimer.current) clearTimeout(refreshTimer.current);
      refreshTimer.current = null;
    };
  }, [taskId, refresh]);

  /** The task as an action's answer left it, read again for what followed. */
  const showAnswer = (t: TaskView): void => {
    setTask(t);
    setEditing(null);
    setStale(null);
    setClosedEdit(null);
    void refresh();
  };
  const decided: Decided = {
    onDone: (t) => {
      // What the person just did is said by the action itself: not again as news.
      before.current = t;
      showAnswer(t);
    },
    onStale: (message) => {
      setClosedEdit(null);
      setStale(`${message}. The page shows the task as it is now.`);
      setEditing(null);
      void refresh();
    },
  };
  // An edit kept from before a reload is open again on its card (the text box has it back).
  useEffect(() => {
    if (editing !== null || !task) return;
    const kept = task.pendingRequests.find((r) => r.kind === 'approval' && savedEditDraft(r.requestId) !== null);
    if (kept) setEditing(kept.requestId);
    // Only when the task is first shown (its id the only dependency): a person who discards later is not sent back into the edit.
  }, [task?.id]);
  // An edit whose request closed before it was sent — decided in another tab, its deadline passed,
  // the task ended — is said, with what closed it (the card went and the edits with it, silently).
  useEffect(() => {
    if (editing === null || !task || isSending(editing) || task.pendingRequests.some((r) => r.requestId === editing)) return;
    setStale(null);
    setClosedEdit(editing);
    dropEditDraft(editing);
    setEditing(null);
  }, [task, editing]);
  // What closed it is read from the events as they come: the task can show the request gone
  // before its event is in (it had said "decided elsewhere" for a rejection with a reason).
  const closedEditText = closedEdit === null || !task ? null : `The request you were editing closed before your edits were sent (${closingOf(events, closedEdit) ?? (isFinalStatus(task.status) ? `the task ${statusText(task.status)}` : 'decided elsewhere')}): they were not applied.`;
  // Its own error: a refusal stays shown (a refresh clears only the page's load errors).
  const cancelling = useAction();
  const cancel = async (): Promise<void> => {
    const t = await cancelling.run(() => api<TaskView>('POST', `/v1/tasks/${taskId}/cancel`, { reason: 'cancelled from the console' }));
    if (!t) return;
    // Said once, as the task's news ("The task was cancelled."), when the page shows it cancelled.
    showAnswer(t);
    window.dispatchEvent(new Event('baton:tasks-changed'));
  };
  const cancelButton = (className: string) => <ConfirmButton className={className} label="Cancel task" confirmLabel="Confirm cancel" busy={cancelling.busy} onConfirm={() => void cancel()} />;

  if (!task) return error ? <div className="error" role="alert">{error}</div> : <p className="hint">Loading…</p>;
  const approvals = task.pendingRequests.filter((r) => r.kind === 'approval');
  const waiting = task.pendingRequests.length > 0 && !isFinalStatus(task.status);
  const long = task.prompt.length > LONG_PROMPT;
  return (
    // Focus that loses its control here (a card decided, a button gone) comes back to the task's heading.
    <div className="task-page" data-focus-home="task-heading">
      {waiting && (
        <div className="banner" role="region" aria-label="waiting for you">
          <span>{approvals.length > 0 ? 'Waiting for your approval…' : task.pendingRequests.some((r) => r.kind === 'budget') ? 'Waiting for your decision on the budget…' : 'Waiting for your answer…'}</span>
          {/* Keyed by the request: what the last one left (an error, a busy state) is not shown beside the next. */}
          {approvals[0] && <BannerApproval key={approvals[0].requestId} taskId={taskId} r={approvals[0]} editing={editing !== null} onEdit={(id) => setEditing(id)} decided={decided} />}
          {cancelButton('danger')}
        </div>
      )}
      <ErrorLine error={lost} />
      <header className="task-head">
        <h2 id="task-heading" tabIndex={-1} className={long && !wholePrompt ? 'folded' : undefined}>
          {task.prompt}
        </h2>
        {long && (
          <button className="small link" aria-expanded={wholePrompt} onClick={() => setWholePrompt(!wholePrompt)}>
            {wholePrompt ? 'Show less of the prompt' : 'Show the whole prompt'}
          </button>
        )}
        <div className="row meta">
          <span className={`status s-${task.status}`}>{statusText(task.status)}</span>
          <span>team {task.team}</span>
          {task.workspace && (
            <span className="workspace" title={`input workspace, digest ${task.workspace.digest}`}>
              from {task.workspace.source === 'example' ? `example ${task.workspace.name ?? ''}` : `upload${task.workspace.name ? ` ${task.workspace.name}` : ''}`} · {task.workspace.files} files, {task.workspace.bytes} bytes
            </span>
          )}
          <span>v{task.version}</span>
          {task.forkedFrom && (
            <a href={`#/tasks/${task.forkedFrom.taskId}`}>
              ⑂ fork of {task.forkedFrom.taskId.slice(0, 8)} at v{task.forkedFrom.atVersion}
            </a>
          )}
          {typeof task.metadata.chatId === 'string' && <a href={`#/chat/${task.metadata.chatId}`}>from a conversation</a>}
          {task.lead && <span>lead: {task.lead.phase}</span>}
          <span>
            {task.usage.inputTokens + task.usage.outputTokens} tokens{task.usage.costUsd > 0 ? `, $${task.usage.costUsd.toFixed(4)}` : ''}
          </span>
          <span className={`live l-${live}`}>{live === 'live' ? '● live' : live === 'reconnecting' ? '○ reconnecting' : live === 'ended' ? 'ended' : live === 'lost' ? '✕ not live' : 'connecting'}</span>
          {!isFinalStatus(task.status) && !waiting && cancelButton('small danger')}
        </div>
      </header>
      <ErrorLine error={error ?? cancelling.error ?? stale ?? closedEditText} />
      {task.pendingRequests.map((r) => (
        <RequestCard key={r.requestId} taskId={task.id} request={r} editing={editing === r.requestId} setEditing={(on) => setEditing(on ? r.requestId : null)} decided={decided} />
      ))}
      {task.error && <div className="card failed">Failed ({task.error.code}): {task.error.message}</div>}
      {task.cancellation && (
        <div className="card cancelled">
          Cancelled by {task.cancellation.requestedBy} at {new Date(task.cancellation.at).toLocaleString()}: {task.cancellation.reason}
        </div>
      )}
      {(task.emails.length > 0 || task.notify) && <Mail task={task} />}
      {task.plan && <PlanView task={task} />}
      <Report task={task} />
      <Deliveries taskId={task.id} version={task.version} />
      <Forks taskId={task.id} />
      <Timeline task={task} events={events} />
      <Toasts task={task} agents={agents} decided={decided} />
    </div>
  );
}

/** How many of a task's forks its page lists (the newest); the rest: `baton list --forks-of <id>`. */
const FORKS_SHOWN = 50;

/**
 * The task's forks (`GET /v1/tasks?forkedFrom=`), newest first: each with its status and the
 * version it was copied at. Read when the page opens and whenever the console makes a task; live
 * after that from the task list's stream (TASK_CHANGED): a fork made elsewhere comes in, each
 * fork's status moves. Shown only once there is one.
 */
function Forks({ taskId }: { taskId: string }) {
  const [forks, setForks] = useState<{ items: TaskListItem[]; more: boolean } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let mounted = true;
    const load = (): void =>
      void listTasks({ forkedFrom: taskId, limit: FORKS_SHOWN }).then(
        (page) => mounted && (setForks({ items: page.items, more: page.nextCursor !== null }), setError(null)),
        (err: unknown) => mounted && setError(`The forks could not be read: ${(err as Error).message}`),
      );
    // A change of one of your tasks, live: a fork of this one merged in as the task list merges (newest version wins, newest first; one older than every fork shown waits for its page).
    const changed = (e: Event): void => {
      const t = (e as CustomEvent<TaskListItem>).detail;
      if (t.forkedFrom?.taskId !== taskId) return;
      setForks((f) => ({ items: mergeTask(f?.items ?? [], t, { status: '', team: '', search: '' }, !(f?.more ?? false)), more: f?.more ?? false }));
    };
    load();
    window.addEventListener('baton:tasks-changed', load);
    window.addEventListener(TASK_CHANGED, changed);
    return () => {
      mounted = false;
      window.removeEventListener('baton:tasks-changed', load);
      window.removeEventListener(TASK_CHANGED, changed);
    };
  }, [taskId]);
  if (!error && (!forks || forks.items.length === 0)) return null;
  return (
    <section className="forks" aria-labelledby="forks-heading">
      <h3 id="forks-heading">Forks</h3>
      <ul>
        {forks?.items.map((f) => (
          <li key={f.id} data-fork={f.id}>
            <a href={`#/tasks/${f.id}`}>⑂ {f.id.slice(0, 8)}</a> <span className={`status s-${f.status}`}>{statusText(f.status)}</span>{' '}
            <span className="meta">
              from version {f.forkedFrom?.atVersion} · <time dateTime={f.createdAt}>{createdWhen(f.createdAt)}</time>
            </span>
          </li>
        ))}
      </ul>
      {forks?.more && <p className="meta">The {FORKS_SHOWN} newest; every one: baton list --forks-of {taskId}</p>}
      <ErrorLine error={error} />
    </section>
  );
}

/** Who is mailed at which moments, and the mails the agents sent through the outbox. */
function Mail({ task }: { task: TaskView }) {
  return (
    <section className="mail" aria-label="mail">
      <h3>Mail</h3>
      {task.notify && (
        <p className="meta">
          {task.notify.email.to.join(', ')} {task.notify.email.to.length > 1 ? 'are' : 'is'} mailed when the task is {task.notify.email.on.join(', ').replace('_', ' ')}.
        </p>
      )}
      <ul>
        {task.emails.map((m) => (
          <li key={m.emailId} data-email={m.emailId}>
            <span className={`status s-${m.status === 'sent' ? 'completed' : m.status === 'failed' ? 'failed' : 'running'}`}>{m.status}</span> <b>{m.subject}</b> to {m.to.join(', ')} by <span className="badge agent">{m.agentId}</span>
            {m.attachments.length > 0 && <span className="meta"> · attached {m.attachments.join(', ')}</span>}
            {m.error && <span className="meta"> · {m.error.code}: {m.error.message}</span>}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** The report rendered (report.md), the result, and every artifact for download. */
function Report({ task }: { task: TaskView }) {
  const [report, setReport] = useState<string | null>(null);
  const [wholeReport, setWholeReport] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const path = task.result?.reportPath ?? task.artifacts.find((a) => /(^|\/)report\.md$/.test(a.path))?.path ?? null;
  const sha = task.artifacts.find((a) => a.path === path)?.sha256;
  useEffect(() => {
    if (!path) return;
    apiText(`/v1/tasks/${task.id}/artifacts/${path.split('/').map(encodeURIComponent).join('/')}`).then(setReport, (err: unknown) => setError((err as Error).message));
  }, [task.id, path, sha]);
  if (!task.result && task.artifacts.length === 0) return null;
  return (
    <section className="report">
      {task.result && <p className="summary">{task.result.summary}</p>}
      {report !== null && (
        <article className="markdown" aria-label="report">
          <RenderedMarkdown>{wholeReport || report.length <= MAX_RENDERED_REPORT_CHARS ? report : reportStart(report)}</RenderedMarkdown>
          {!wholeReport && report.length > MAX_RENDERED_REPORT_CHARS && (
            <p className="muted">
              The report goes on: {report.length.toLocaleString('en')} characters in all, too many to show at once without the page stopping to answer.{' '}
              <button className="small" onClick={() => void download(task.id, path!).catch((err: unknown) => setError(`The report could not be downloaded: ${(err as Error).message}`))}>
                Download it
              </button>{' '}
              <button className="small" onClick={() => setWholeReport(true)}>
                Show it all here
              </button>
            </p>
          )}
        </article>
      )}
      {task.artifacts.length > 0 && (
        <div className="artifacts">
          <div className="row section-head">
            <h3>Artifacts</h3>
            <button
              className="small"
              title={task.workspace ? 'the input workspace with the agents\' files over it, as a .tar.gz (submit it again as a workspace)' : 'every file the agents stored, as a .tar.gz'}
              onClick={() => void downloadArchive(task.id).catch((err: unknown) => setError(`The files could not be downloaded: ${(err as Error).message}`))}
            >
              Download all files
            </button>
          </div>
          <ul>
            {task.artifacts.map((a) => (
              <li key={a.path}>
                <button className="link" onClick={() => void download(task.id, a.path).catch((err: unknown) => setError((err as Error).message))}>
                  {a.path}
                </button>{' '}
                <span className="meta">
                  {a.bytes} bytes{a.agentId ? ` · ${a.agentId}` : ''}
                </span>
              </li>
            ))}
          </ul>
        </div>
      )}
      <ErrorLine error={error} />
    </section>
  );
}

type Approval = Extract<TaskView['pendingRequests'][number], { kind: 'approval' }>;

/**
 * The banner's shortcut for the first approval: it names what it approves, is disabled while a
 * decision is on its way and for a moment after a new request takes its place (the rest of a
 * double-click is not a decision on a plan nobody saw), and while the person edits a request it
 * steps aside — approving there would drop their edits.
 */
function BannerApproval({ taskId, r, editing, onEdit, decided }: { taskId: string; r: Approval; editing: boolean; onEdit: (requestId: string) => void; decided: Decided }) {
  const action = useDecision(decided, r.requestId);
  const armed = useArmed(r.requestId);
  const target = typeof r.input.agent === 'string' ? ` → ${r.input.agent}` : '';
  if (editing) return <span className="meta">Editing below: approve with your edits, or discard them, on the card.</span>;
  const approve = (): void => void action.run('POST', `/v1/tasks/${taskId}/approvals/${encodeURIComponent(r.requestId)}`, { decision: 'approve' }, `Approved: ${requestTitle(r)}.`);
  return (
    <>
      <button className="primary" disabled={!armed} {...busyProps(action.busy)} title={`Approve ${r.agentId}'s call to ${r.toolName}${target}`} onClick={approve}>
        Approve {r.toolName}
        {target}
      </button>
      <button
        {...busyProps(action.busy)}
        onClick={() => {
          if (action.busy) return;
          onEdit(r.requestId);
          // Where the person edits: the card's text box, not the banner they clicked.
          requestAnimationFrame(() => document.querySelector<HTMLTextAreaElement>(`[data-request="${CSS.escape(r.requestId)}"] textarea`)?.focus());
        }}
      >
        Review &amp; Edit
      </button>
      <ErrorLine error={action.error} />
    </>
  );
}

/** An engineering plan as a DAG (columns by dependency depth), each subtask's state, the reviews, and the diff. */
function PlanView({ task }: { task: TaskView }) {
  const plan = task.plan as NonNullable<TaskView['plan']>;
  const [change, setChange] = useState<TaskChangeView | null>(null);
  const [changeError, setChangeError] = useState<string | null>(null);
  const key = changeKey(task);
  const depth = new Map<string, number>();
  const depthOf = (id: string, seen = new Set<string>()): number => {
    if (depth.has(id)) return depth.get(id) as number;
    if (seen.has(id)) return 0;
    seen.add(id);
    const t = plan.subtasks.find((x) => x.id === id);
    const d = t && t.dependsOn.length > 0 ? 1 + Math.max(...t.dependsOn.map((x) => depthOf(x, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  const columns: (typeof plan.subtasks)[] = [];
  for (const t of plan.subtasks) (columns[depthOf(t.id)] ??= []).push(t);
  const review = plan.reviews.at(-1);
  useEffect(() => {
    let mounted = true;
    taskChange(task.id).then(
      (c) => mounted && (setChange(c), setChangeError(null)),
      (err: unknown) => mounted && setChangeError(`The change could not be read: ${(err as Error).message}`),
    );
    return () => {
      mounted = false;
    };
  }, [task.id, key]);
  const sections = change ? fileSections(change) : [];
  return (
    <section className="plan">
      <h3>
        Plan <span className={`status s-${plan.status}`}>{plan.status}</span> {plan.round > 0 && <span className="meta">after {plan.round} {plan.round === 1 ? 'round' : 'rounds'} of changes</span>}
      </h3>
      <p>{plan.summary}</p>
      <div className="dag" role="group" aria-label="plan">
        {columns.map((col, i) => (
          <div className="dag-col" key={i}>
            {col.map((t) => (
              <div key={t.id} className={`subtask st-${t.status}`} data-subtask={t.id}>
                <b>{t.id}</b> <span className="badge agent">{t.agent}</span> <span className={`status s-${t.status}`}>{t.status}</span>
                <div className="meta">locks {t.fileLocks.join(', ')}</div>
                {t.dependsOn.length > 0 && <div className="meta">after {t.dependsOn.join(', ')}</div>}
                {t.tests && (
                  <div className="meta">
                    tests {t.tests.passed} passed, {t.tests.failed} failed
                  </div>
                )}
                {t.summary && <div className="summary">{t.summary}</div>}
              </div>
            ))}
          </div>
        ))}
      </div>
      {review && (
        <div className={`card review v-${review.verdict}`}>
          Review ({review.agentId}): <b>{review.verdict.replace('_', ' ')}</b> — {review.summary}
          {review.issues.length > 0 && (
            <ul>
              {review.issues.map((x, i) => (
                <li key={i}>
                  [{x.severity}] {x.file ? `${x.file}${x.line ? `:${x.line}` : ''} ` : ''}
                  {x.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {plan.acceptance.accepted !== null && (
        <div className={`card acceptance ${plan.acceptance.accepted ? 'v-approve' : 'v-request_changes'}`} role="status" data-accepted={String(plan.acceptance.accepted)}>
          {plan.acceptance.accepted ? (
            <b>The change is accepted{plan.reviewAgent ? ': the last review approved it' : ''}, and no subtask's last test run fails.</b>
          ) : (
            <>
              <b>The change is not accepted:</b>
              <ul>
                {plan.acceptance.concerns.map((c) => (
                  <li key={c.code}>{c.message}</li>
                ))}
              </ul>
            </>
          )}
        </div>
      )}
      {sections.length > 0 && change && (
        <details className="diff" open>
          <summary>The change: {changeTotals(change)}</summary>
          {/* Beside the summary, not in it: a button inside a summary is read as the summary's text, and its click folds the change. */}
          <button className="small patch" title="git apply it in a checkout of the input" onClick={() => saveText(change.patch, `task-${task.id.slice(0, 8)}.patch`, 'text/x-diff')}>
            Download patch
          </button>
          {sections.map(({ file, lines }) => (
            <details key={file.path} className="diff-file" data-file={file.path} open={sections.length <= UNFOLDED_FILES}>
              <summary>
                <code>{file.path}</code> <span className="meta">{fileStat(file)}</span>
              </summary>
              {/* Focusable: a line wider than the page scrolls with the keyboard too. */}
              <pre tabIndex={0} role="region" aria-label={`changes of ${file.path}`}>
                {lines.map((l, i) => (
                  <span key={i} className={lineKind(l)}>
                    {l}
                    {'\n'}
                  </span>
                ))}
              </pre>
            </details>
          ))}
        </details>
      )}
      <ErrorLine error={changeError} />
    </section>
  );
}
