import { useState } from 'react';
import { api, type EventView, type TaskView } from './api.ts';
import { ErrorLine } from './ErrorLine.tsx';
import { go } from './hooks.ts';

type Content = { type: string; text?: string; name?: string; input?: Record<string, unknown> }[];

/** What an event says, in a line. */
export function describe(e: EventView): string {
  const d = (e.data ?? {}) as Record<string, unknown>;
  const s = (v: unknown, n = 160): string => {
    const t = typeof v === 'string' ? v : JSON.stringify(v);
    return t.length > n ? `${t.slice(0, n - 1)}…` : t;
  };
  switch (e.type) {
    case 'TaskSubmitted':
      return `submitted: ${s(d.prompt)}`;
    case 'TaskStarted':
      return `the lead (${s(d.leadAgentType)}) starts`;
    case 'ModelTurnRecorded': {
      const content = (d.content ?? []) as Content;
      const text = content.filter((b) => b.type === 'text').map((b) => b.text).join(' ');
      const tools = content.filter((b) => b.type === 'tool_use').map((b) => b.name);
      return `turn ${String(d.turn)}${text ? `: ${s(text)}` : ''}${tools.length ? ` → ${tools.join(', ')}` : ''}`;
    }
    case 'ToolResultsRecorded':
      return ((d.results ?? []) as { toolName: string; content: string; isError?: boolean }[]).map((r) => `${r.toolName}${r.isError ? ' ✗' : ''}: ${s(r.content, 100)}`).join(' · ');
    case 'ApprovalRequested':
      return `asks approval for ${s(d.toolName)}`;
    case 'ApprovalGranted':
      return `approved${d.edited ? ' with edits' : ''} by ${s(d.decidedBy)}`;
    case 'ApprovalRejected':
      return `rejected by ${s(d.decidedBy)}: ${s(d.reason)}`;
    case 'ApprovalTimedOut':
      return `no decision before the deadline (${s(d.action)})`;
    case 'ClarificationRequested':
      return `asks: ${((d.questions ?? []) as string[]).join(' / ')}`;
    case 'ClarificationAnswered':
      return `answered by ${s(d.answeredBy)}: ${((d.answers ?? []) as string[]).join(' / ')}`;
    case 'SubagentDispatched':
      return `${s(d.agentId)} dispatched: ${s(d.prompt, 120)}`;
    case 'SubagentStarted':
      return `${s(d.agentId)} runs (attempt ${String(d.attempt)} on ${s(d.runnerId)})`;
    case 'SubagentPaused':
      return `${s(d.agentId)} paused: the budget is reached`;
    case 'SubagentCompleted':
      return `${s(d.agentId)} finished: ${s(d.summary, 120)}`;
    case 'SubagentFailed':
      return `${s(d.agentId)} failed (${s(d.code)}): ${s(d.message)}`;
    case 'BudgetExceeded':
      return `budget reached (${s(d.spent)} of ${s(d.limit)})`;
    case 'BudgetRaised':
      return `budget raised to ${s(d.limit)} by ${s(d.decidedBy)}`;
    case 'ArtifactStored':
      return `stored ${s(d.path)} (${String(d.bytes)} bytes)`;
    case 'PlanRecorded':
      return `plan: ${s(d.summary)}`;
    case 'ReviewRecorded':
      return `review round ${String(d.round)}: ${s(d.verdict)} — ${s(d.summary, 120)}`;
    case 'TaskCompleted':
      return `completed: ${s(d.summary)}`;
    case 'TaskFailed':
      return `failed (${s(d.code)}): ${s(d.message)}`;
    case 'TaskCancelled':
      return `cancelled: ${s(d.reason)}`;
    default:
      return e.type;
  }
}

const agentOf = (e: EventView): string => {
  const d = (e.data ?? {}) as { agentId?: unknown };
  return typeof d.agentId === 'string' ? d.agentId : e.streamId.startsWith('task-') ? 'task' : e.streamId.split('-').at(-1) ?? '';
};

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
  const fork = async (version: number): Promise<void> => {
    try {
      const t = await api<TaskView>('POST', `/v1/tasks/${task.id}/fork`, { atVersion: version });
      window.dispatchEvent(new Event('baton:tasks-changed'));
      go(`#/tasks/${t.id}`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const shown = filter ? events.filter((e) => agentOf(e) === filter) : events;
  return (
    <section className="timeline">
      <h3>
        Timeline{' '}
        <select aria-label="timeline agent" value={filter} onChange={(e) => setFilter(e.target.value)}>
          <option value="">every agent</option>
          {agents.map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
      </h3>
      <ErrorLine error={error} />
      {stateAt && (
        <div className="card state-at" aria-label="state at version">
          <div className="row">
            <b>The task after version {stateAt.version}</b>
            <span className={`status s-${stateAt.task.status}`}>{stateAt.task.status.replace('_', ' ')}</span>
            <span className="meta">
              agents: {stateAt.task.agents.map((a) => `${a.id} ${a.status}`).join(', ') || 'none'} · open requests: {stateAt.task.pendingRequests.map((r) => r.requestId).join(', ') || 'none'}
            </span>
            <button className="small" onClick={() => setStateAt(null)}>
              close
            </button>
          </div>
          <details>
            <summary>the whole task object</summary>
            <pre>{JSON.stringify(stateAt.task, null, 2)}</pre>
          </details>
        </div>
      )}
      <ol>
        {shown.map((e) => {
          const onTask = e.streamId.startsWith('task-');
          return (
            <li key={e.id} className={`ev ev-${e.type}`} data-type={e.type}>
              <time>{new Date(e.recordedAt).toLocaleTimeString()}</time>
              <span className="badge agent">{agentOf(e)}</span>
              <span className="what">{describe(e)}</span>
              <span className="row">
                {onTask && (
                  <button className="small" title={`the task as it was after version ${e.version}`} onClick={() => void showState(e.version)}>
                    state
                  </button>
                )}
                {onTask && e.version < task.version && (
                  <button className="small fork-here" title={`a new task from version ${e.version}`} onClick={() => void fork(e.version)}>
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
