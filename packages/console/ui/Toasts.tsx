import { useState } from 'react';
import type { AgentView, TaskView } from './api.ts';
import { isFinalStatus } from './api.ts';
import { ClarificationCard, type Decided } from './Requests.tsx';
import { progressText } from './describe.ts';

const ACTIVE = new Set(['dispatched', 'running', 'paused', 'waiting']);

/**
 * One toast per active agent, newest on top; those that ask a question float above the rest and
 * are answered in place (with the question's context, so two agents asking the same question
 * can be told apart). When the task ends, one toast says how, until dismissed. Nothing here is
 * a live region: the page says a new question, and the end, once (`taskNews`), not every step's
 * progress; the toasts are a labelled region a screen reader can go to, or skip.
 */
export function Toasts({ task, agents, decided }: { task: TaskView; agents: AgentView[]; decided: Decided }) {
  const [dismissed, setDismissed] = useState<string | null>(null);
  /** Folded to one line (they cover the page's right edge): questions stay answerable on the page's cards. */
  const [folded, setFolded] = useState(false);
  if (isFinalStatus(task.status)) {
    if (dismissed === task.id) return null;
    const text = task.status === 'completed' ? 'All done' : task.status === 'failed' ? `Failed: ${task.error?.message ?? ''}` : 'Cancelled';
    return (
      <div className="toasts" role="region" aria-label="how it ended">
        <div className={`toast final t-${task.status} row`}>
          <span>{text}</span>
          <button className="small dismiss" aria-label="dismiss" onClick={() => setDismissed(task.id)}>
            ×
          </button>
        </div>
      </div>
    );
  }
  const contextOf = (a: AgentView): string | null => {
    const r = a.openQuestion && task.pendingRequests.find((p) => p.requestId === a.openQuestion?.requestId);
    return r && r.kind === 'clarification' && r.context ? r.context : null;
  };
  const active = agents.filter((a) => ACTIVE.has(a.status) || (a.role === 'lead' && a.currentAction !== null)).reverse();
  const ordered = [...active.filter((a) => a.openQuestion), ...active.filter((a) => !a.openQuestion)];
  if (ordered.length === 0) return null;
  const asking = ordered.filter((a) => a.openQuestion).length;
  if (folded)
    return (
      <div className="toasts" role="region" aria-label="agents at work">
        <button className="toast folded" aria-expanded={false} onClick={() => setFolded(false)}>
          {ordered.length} agent{ordered.length === 1 ? '' : 's'} at work{asking > 0 ? `, ${asking} asking` : ''} — show
        </button>
      </div>
    );
  return (
    <div className="toasts" role="region" aria-label="agents at work">
      <button className="small fold" aria-expanded onClick={() => setFolded(true)}>
        Hide progress
      </button>
      {ordered.map((a) => {
        const context = contextOf(a);
        return (
          <div key={a.id} className={`toast${a.openQuestion ? ' asking' : ''}`} data-agent={a.id}>
            <div className="row">
              <span className="badge agent">{a.id}</span>
              <span className="action">{a.currentAction ?? a.status}</span>
            </div>
            <div className="progress" title={progressText(a)}>
              <div className="bar" style={{ width: `${progressPct(a)}%` }} />
            </div>
            <div className="meta">{progressText(a)}</div>
            {context && <div className="context">{context}</div>}
            {a.openQuestion && <ClarificationCard compact taskId={task.id} r={{ ...a.openQuestion, agentId: a.id }} decided={decided} />}
          </div>
        );
      })}
    </div>
  );
}

/** The lead: subtasks done; a subagent: turns against a soft scale (it has no known total). */
function progressPct(a: AgentView): number {
  if ('done' in a.progress) return a.progress.total > 0 ? (100 * a.progress.done) / a.progress.total : Math.min(90, a.turns * 15);
  return Math.min(95, 100 * (1 - Math.exp(-a.progress.turns / 4)));
}
