import { useRef, useState, useSyncExternalStore } from 'react';
import { RenderedMarkdown } from './Markdown.tsx';
import { api, type PendingRequest, type TaskView } from './api.ts';
import { ErrorLine } from './ErrorLine.tsx';
import { countdown, useAction, useArmed, useNow } from './hooks.ts';

type Approval = Extract<PendingRequest, { kind: 'approval' }>;
type Clarification = Extract<PendingRequest, { kind: 'clarification' }>;
type Budget = Extract<PendingRequest, { kind: 'budget' }>;

/** One card per open request: who asks, what, the deadline and what it does; the person decides here. */
export function RequestCard({ taskId, request, editing, setEditing, onDone }: { taskId: string; request: PendingRequest; editing: boolean; setEditing: (on: boolean) => void; onDone: (t: TaskView) => void }) {
  if (request.kind === 'approval') return <ApprovalCard taskId={taskId} r={request} editing={editing} setEditing={setEditing} onDone={onDone} />;
  if (request.kind === 'budget') return <BudgetCard taskId={taskId} r={request} onDone={onDone} />;
  return <ClarificationCard taskId={taskId} r={request} onDone={onDone} />;
}

function Deadline({ deadline, then }: { deadline: string; then: string }) {
  const now = useNow();
  return (
    <span className="deadline" title={new Date(deadline).toLocaleString()}>
      decides itself in {countdown(deadline, now)} — then: {then}
    </span>
  );
}

/** Run a decision; the API's refusal is shown on the card and the request stays open. */
function useDecision(onDone: (t: TaskView) => void) {
  const action = useAction();
  const run = async (method: string, url: string, body: unknown): Promise<boolean> => {
    const t = await action.run(() => api<TaskView>(method, url, body));
    if (t) onDone(t);
    return t !== undefined;
  };
  return { ...action, run };
}

function ApprovalCard({ taskId, r, editing, setEditing, onDone }: { taskId: string; r: Approval; editing: boolean; setEditing: (on: boolean) => void; onDone: (t: TaskView) => void }) {
  const { error, setError, busy, run } = useDecision(onDone);
  const asProposed = (): string => JSON.stringify(r.input, null, 2);
  const [draft, setDraft] = useState(asProposed);
  const [rejecting, setRejecting] = useState(false);
  // Disabled for a moment after the card shows: it may have just taken the place of one decided with a double-click.
  const armed = useArmed(r.requestId);
  const card = useRef<HTMLElement>(null);
  /** Keyboard focus back where the person was (the card's button that opened the form), not lost to the page's top. */
  const refocus = (label: string): void => {
    requestAnimationFrame(() => [...(card.current?.querySelectorAll('button') ?? [])].find((b) => b.textContent?.trim() === label)?.focus());
  };
  const discard = (): void => {
    setDraft(asProposed());
    setError(null);
    setEditing(false);
    refocus('Review & Edit');
  };
  const [reason, setReason] = useState('');
  const url = `/v1/tasks/${taskId}/approvals/${encodeURIComponent(r.requestId)}`;
  const target = typeof r.input.agent === 'string' ? r.input.agent : null;
  const saveEdit = async (): Promise<void> => {
    let input: unknown;
    try {
      input = JSON.parse(draft);
    } catch (err) {
      setError(`The edited input is not JSON: ${(err as Error).message}`);
      return;
    }
    if (await run('POST', url, { decision: 'approve', input })) setEditing(false);
  };
  return (
    <article ref={card} className="card request approval" data-request={r.requestId} aria-label={`approval ${r.requestId}`}>
      <header>
        <span className="badge agent">{r.agentId}</span> wants to call <b>{r.toolName}</b>
        {target && (
          <>
            {' '}→ <span className="badge agent">{target}</span>
          </>
        )}
        <Deadline deadline={r.deadline} then={r.onTimeout === 'approve' ? 'approved' : 'rejected'} />
      </header>
      <div className="plan-text">
        <RenderedMarkdown>{r.plan}</RenderedMarkdown>
      </div>
      {editing ? (
        <div className="edit">
          <label>
            Tool input (JSON) — checked against the tool's schema and meaning when you approve
            <textarea aria-label="edited input" value={draft} onChange={(e) => setDraft(e.target.value)} onKeyDown={(e) => e.key === 'Escape' && discard()} rows={Math.min(20, draft.split('\n').length + 1)} spellCheck={false} />
          </label>
          <div className="row">
            <button className="primary" disabled={busy} onClick={() => void saveEdit()}>
              Approve with edits
            </button>
            <button onClick={discard}>Discard edits</button>
          </div>
        </div>
      ) : (
        <InputView input={r.input} />
      )}
      {rejecting ? (
        <form
          className="row"
          onSubmit={(e) => {
            e.preventDefault();
            void run('POST', url, { decision: 'reject', ...(reason.trim() ? { reason: reason.trim() } : {}) });
          }}
        >
          <input
            aria-label="reason"
            placeholder="Why? The agent re-plans with your reason"
            value={reason}
            onChange={(e) => setReason(e.target.value)}
            onKeyDown={(e) => {
              if (e.key !== 'Escape') return;
              setRejecting(false);
              refocus('Reject…');
            }}
            autoFocus
          />
          <button type="submit" disabled={busy}>
            Reject
          </button>
          <button
            type="button"
            onClick={() => {
              setRejecting(false);
              refocus('Reject…');
            }}
          >
            Back
          </button>
        </form>
      ) : (
        !editing && (
          <div className="row">
            <button className="primary" disabled={busy || !armed} onClick={() => void run('POST', url, { decision: 'approve' })}>
              Approve
            </button>
            <button disabled={busy} onClick={() => setEditing(true)}>
              Review &amp; Edit
            </button>
            <button disabled={busy} onClick={() => setRejecting(true)}>
              Reject…
            </button>
          </div>
        )
      )}
      <ErrorLine error={error} />
    </article>
  );
}

/** A tool input, readably: each field on its line, long text as text. */
function InputView({ input }: { input: Record<string, unknown> }) {
  return (
    <dl className="input">
      {Object.entries(input).map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{typeof v === 'string' ? v : <pre>{JSON.stringify(v, null, 2)}</pre>}</dd>
        </div>
      ))}
    </dl>
  );
}

/**
 * What a person has typed into an open question, by request: one draft that the question's card
 * and its toast both show and edit (typed in one, it is there in the other), until it is sent.
 */
const drafts = new Map<string, string[]>();
const draftWatchers = new Set<() => void>();
const watchDrafts = (f: () => void): (() => void) => {
  draftWatchers.add(f);
  return () => draftWatchers.delete(f);
};
function draftOf(requestId: string, questions: number): string[] {
  let d = drafts.get(requestId);
  if (!d) drafts.set(requestId, (d = Array.from({ length: questions }, () => '')));
  return d;
}
function setQuestionDraft(requestId: string, d: string[] | null): void {
  if (d) drafts.set(requestId, d);
  else drafts.delete(requestId);
  for (const f of draftWatchers) f();
}

export function ClarificationCard({ taskId, r, onDone, compact = false }: { taskId: string; r: Pick<Clarification, 'requestId' | 'questions' | 'options'> & Partial<Clarification>; onDone: (t: TaskView) => void; compact?: boolean }) {
  const { error, setError, busy, run } = useDecision(onDone);
  const answers = useSyncExternalStore(watchDrafts, () => draftOf(r.requestId, r.questions.length));
  const setAnswers = (a: string[]): void => setQuestionDraft(r.requestId, a);
  const send = async (values: string[]): Promise<void> => {
    const filled = values.map((a) => a.trim());
    if (filled.some((a) => a === '')) {
      const orPick = r.options?.length ? ' (or pick an option)' : '';
      setError(r.questions.length > 1 ? `Answer every question${orPick}.` : `Write an answer${orPick}.`);
      return;
    }
    if (await run('POST', `/v1/tasks/${taskId}/answers/${encodeURIComponent(r.requestId)}`, { answers: filled })) setQuestionDraft(r.requestId, null);
  };
  return (
    <article className={`card request clarification${compact ? ' compact' : ''}`} data-request={r.requestId} aria-label={`question ${r.requestId}`}>
      {!compact && (
        <header>
          <span className="badge agent">{r.agentId}</span> asks
          {r.context ? <span className="context"> — {r.context}</span> : null}
          {r.deadline && <Deadline deadline={r.deadline} then="it goes on with its best judgement" />}
        </header>
      )}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void send(answers);
        }}
      >
        {r.questions.map((q, i) => (
          <label key={i} className="question">
            <span>{q}</span>
            <input aria-label={q} value={answers[i] ?? ''} onChange={(e) => setAnswers(answers.map((a, j) => (j === i ? e.target.value : a)))} />
          </label>
        ))}
        {r.options && r.options.length > 0 && (
          <div className="row options">
            {r.options.map((o) => (
              <button
                type="button"
                key={o}
                disabled={busy}
                // One question: the option is the answer. Several: it fills the first one still empty (not every one), for the person to go on.
                onClick={() => {
                  if (r.questions.length === 1) return void send([o]);
                  const empty = answers.findIndex((a) => !a.trim());
                  if (empty >= 0) setAnswers(answers.map((a, j) => (j === empty ? o : a)));
                }}
              >
                {o}
              </button>
            ))}
          </div>
        )}
        <div className="row">
          <button className="primary" type="submit" disabled={busy}>
            Answer
          </button>
        </div>
      </form>
      <ErrorLine error={error} />
    </article>
  );
}

function BudgetCard({ taskId, r, onDone }: { taskId: string; r: Budget; onDone: (t: TaskView) => void }) {
  const { error, setError, busy, run } = useDecision(onDone);
  const [usd, setUsd] = useState(r.limit.usd !== null ? String(Math.max(r.limit.usd, r.spent.usd) * 2) : '');
  const [tokens, setTokens] = useState(r.limit.tokens !== null ? String(Math.max(r.limit.tokens, r.spent.tokens) * 2) : '');
  const url = `/v1/tasks/${taskId}/approvals/${encodeURIComponent(r.requestId)}`;
  const raise = async (): Promise<void> => {
    const budget: { usd?: number; tokens?: number } = {};
    if (usd.trim()) budget.usd = Number(usd);
    if (tokens.trim()) budget.tokens = Math.ceil(Number(tokens));
    if (Object.values(budget).some((v) => !(v > 0))) return setError('A new limit must be a number above 0.');
    await run('POST', url, { decision: 'approve', budget });
  };
  return (
    <article className="card request budget" data-request={r.requestId} aria-label={`budget ${r.requestId}`}>
      <header>
        The task reached its budget: spent {r.limit.usd !== null && `$${r.spent.usd.toFixed(4)} of $${r.limit.usd}`} {r.limit.tokens !== null && `${r.spent.tokens} of ${r.limit.tokens} tokens`}
        <Deadline deadline={r.deadline} then="the run stops" />
      </header>
      <p>No agent calls a model until you decide.</p>
      <div className="row">
        {r.limit.usd !== null && (
          <label>
            New limit, US$ <input aria-label="new limit in USD" value={usd} onChange={(e) => setUsd(e.target.value)} />
          </label>
        )}
        {r.limit.tokens !== null && (
          <label>
            New limit, tokens <input aria-label="new limit in tokens" value={tokens} onChange={(e) => setTokens(e.target.value)} />
          </label>
        )}
        <button className="primary" disabled={busy} onClick={() => void raise()}>
          Raise and continue
        </button>
        <button disabled={busy} onClick={() => void run('POST', url, { decision: 'reject', reason: 'stopped at the budget from the console' })}>
          Stop the run
        </button>
      </div>
      <ErrorLine error={error} />
    </article>
  );
}
