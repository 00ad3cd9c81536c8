import type { AgentView, TaskView } from './api.ts';
import { isFinalStatus } from './api.ts';
import { ClarificationCard } from './Requests.tsx';
import { progressText } from './describe.ts';

const ACTIVE = new Set(['dispatched', 'running', 'paused', 'waiting']);

/**
 * One toast per active agent, newest on top; those that ask a question float above the rest and
 * are answered in place. When the task ends, one toast says how.
 */
export function Toasts({ task, agents, onDone }: { task: TaskView; agents: AgentView[]; onDone: (t: TaskView) => void }) {
  if (isFinalStatus(task.status)) {
    const text = task.status === 'completed' ? 'All done' : task.status === 'failed' ? `Failed: ${task.error?.message ?? ''}` : 'Cancelled';
    return (
      <div className="toasts" aria-live="polite">
        <div className={`toast final t-${task.status}`} role="status">
          {text}
        </div>
      </div>
    );
  }
  const active = agents.filter((a) => ACTIVE.has(a.status) || (a.role === 'lead' && a.currentAction !== null)).reverse();
  const ordered = [...active.filter((a) => a.openQuestion), ...active.filter((a) => !a.openQuestion)];
  return (
    <div className="toasts" aria-live="polite">
      {ordered.map((a) => (
        <div key={a.id} className={`toast${a.openQuestion ? ' asking' : ''}`} data-agent={a.id} role="status">
          <div className="row">
            <span className="badge agent">{a.id}</span>
            <span className="action">{a.currentAction ?? a.status}</span>
          </div>
          <div className="progress" title={progressText(a)}>
            <div className="bar" style={{ width: `${progressPct(a)}%` }} />
          </div>
          <div className="meta">{progressText(a)}</div>
          {a.openQuestion && <ClarificationCard compact taskId={task.id} r={a.openQuestion} onDone={onDone} />}
        </div>
      ))}
    </div>
  );
}

/** The lead: subtasks done; a subagent: turns against a soft scale (it has no known total). */
function progressPct(a: AgentView): number {
  if ('done' in a.progress) return a.progress.total > 0 ? (100 * a.progress.done) / a.progress.total : Math.min(90, a.turns * 15);
  return Math.min(95, 100 * (1 - Math.exp(-a.progress.turns / 4)));
}
