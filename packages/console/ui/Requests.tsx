import { useId, useRef, useState, useSyncExternalStore } from 'react';
import { RenderedMarkdown } from './Markdown.tsx';
import { busyProps, ConfirmButton, invalidProps } from './a11y.tsx';
import { api, ApiError, type PendingRequest, type TaskView } from './api.ts';
import { requestTitle } from './describe.ts';
import { ErrorLine } from './ErrorLine.tsx';
import { countdown, useAction, useArmed, useNow } from './hooks.ts';

type Approval = Extract<PendingRequest, { kind: 'approval' }>;
type Clarification = Extract<PendingRequest, { kind: 'clarification' }>;
type Budget = Extract<PendingRequest, { kind: 'budget' }>;

/**
 * What a decision reports back to the page: `onDone` with the task after it; `onStale` with the
 * gateway's words when the request was no longer open (decided elsewhere, the task ended: a 409)
 * — the page reads the task again, and the card that can no longer act goes.
 */
export interface Decided {
  onDone: (t: TaskView) => void;
  onStale: (message: string) => void;
}

/** One card per open request: who asks, what, the deadline and what it does; the person decides here. */
export function RequestCard({ taskId, request, editing, setEditing, decided }: { taskId: string; request: PendingRequest; editing: boolean; setEditing: (on: boolean) => void; decided: Decided }) {
  if (request.kind === 'approval') return <ApprovalCard taskId={taskId} r={request} editing={editing} setEditing={setEditing} decided={decided} />;
  if (request.kind === 'budget') return <BudgetCard taskId={taskId} r={request} decided={decided} />;
  return <ClarificationCard taskId={taskId} r={request} decided={decided} />;
}

function Deadline({ deadline, then }: { deadline: string; then: string }) {
  const now = useNow();
  return (
    <span className="deadline" title={new Date(deadline).toLocaleString()}>
      decides itself in {countdown(deadline, now)} — then: {then}
    </span>
  );
}

/**
 * Decisions on their way, by request: the banner's and the card's buttons for one request are busy
 * together (on a slow network each sent its own, and the second came back a 409 in red).
 */
const sending = new Set<string>();
const sendingListeners = new Set<() => void>();
const sendingChanged = (): void => {
  for (const l of sendingListeners) l();
};
const subscribeSending = (l: () => void): (() => void) => {
  sendingListeners.add(l);
  return () => sendingListeners.delete(l);
};
/** Is a decision on `requestId` on its way from this page? */
export const isSending = (requestId: string): boolean => sending.has(requestId);

/**
 * Run a decision on `requestId`, saying what it did (`done`) once it is recorded; the API's
 * refusal is shown on the card and the request stays open — but a request no longer open (a 409)
 * goes to `onStale`. One decision per request at a time, whichever button sent it.
 */
export function useDecision({ onDone, onStale }: Decided, requestId: string) {
  const action = useAction();
  const elsewhere = useSyncExternalStore(subscribeSending, () => sending.has(requestId));
  const run = async (method: string, url: string, body: unknown, done: string): Promise<boolean> => {
    if (sending.has(requestId)) return false;
    sending.add(requestId);
    sendingChanged();
    try {
      const t = await action.run(async () => {
        try {
          return await api<TaskView>(method, url, body);
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 409)) throw err;
          onStale(err.message);
          return undefined;
        }
      }, done);
      if (t) onDone(t);
      return t !== undefined;
    } finally {
      sending.delete(requestId);
      sendingChanged();
    }
  };
  return { ...action, busy: action.busy || elsewhere, run };
}

/**
 * An edit being made to an approval's input, kept for this browser tab by request (a reload had
 * dropped it without a word): back in the card's text box after a reload, gone once the request
 * is decided or the edits discarded.
 */
const EDIT_DRAFT = (requestId: string): string => `baton.editDraft.${requestId}`;
export const savedEditDraft = (requestId: string): string | null => sessionStorage.getItem(EDIT_DRAFT(requestId));
const keepEditDraft = (requestId: string, draft: string | null): void => (draft === null ? sessionStorage.removeItem(EDIT_DRAFT(requestId)) : sessionStorage.setItem(EDIT_DRAFT(requestId), draft));
export const dropEditDraft = (requestId: string): void => keepEditDraft(requestId, null);

function ApprovalCard({ taskId, r, editing, setEditing, decided }: { taskId: string; r: Approval; editing: boolean; setEditing: (on: boolean) => void; decided: Decided }) {
  const { error, setError, busy, run } = useDecision(decided, r.requestId);
  const ids = useId();
  const errorId = `${ids}-error`;
  const titleId = `${ids}-title`;
  const asProposed = (): string => JSON.stringify(r.input, null, 2);
  const [draft, setDraftState] = useState(() => savedEditDraft(r.requestId) ?? asProposed());
  const setDraft = (d: string): void => {
    setDraftState(d);
    keepEditDraft(r.requestId, d === asProposed() ? null : d);
  };
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
  const editor = useRef<HTMLTextAreaElement>(null);
  const saveEdit = async (): Promise<void> => {
    let input: unknown;
    try {
      input = JSON.parse(draft);
    } catch (err) {
      // A phone's smart punctuation turns " into “ ”: say so, not the parser's words.
      const curly = /[\u201c\u201d\u2018\u2019]/.test(draft);
      setError(curly ? 'The edited input has curly quotes (“ ” or ‘ ’), which JSON does not take — a keyboard’s smart punctuation makes them: use straight quotes (").' : `The edited input is not JSON: ${(err as Error).message}`);
      editor.current?.focus(); // where it is mended
      return;
    }
    if (await run('POST', url, { decision: 'approve', input }, `Approved with your edits: ${requestTitle(r)}.`)) {
      keepEditDraft(r.requestId, null);
      setEditing(false);
    } else editor.current?.focus(); // refused: where it is mended (the card of a request no longer open goes)
  };
  const reject = (): void => void run('POST', url, { decision: 'reject', ...(reason.trim() ? { reason: reason.trim() } : {}) }, `Rejected: ${requestTitle(r)}. The agent is told${reason.trim() ? ', with your reason' : ''}.`);
  return (
    <article ref={card} className="card request approval" data-request={r.requestId} aria-labelledby={titleId}>
      <header>
        <h3 className="card-title" id={titleId}>
          <span className="badge agent">{r.agentId}</span> wants to call <b>{r.toolName}</b>
          {target && (
            <>
              {' '}→ <span className="badge agent">{target}</span>
            </>
          )}
        </h3>
        <Deadline deadline={r.deadline} then={r.onTimeout === 'approve' ? 'approved' : 'rejected'} />
      </header>
      <div className="plan-text">
        <RenderedMarkdown>{r.plan}</RenderedMarkdown>
      </div>
      {editing ? (
        <div className="edit">
          <label>
            Tool input (JSON) — checked against the tool's schema and meaning when you approve
            <textarea ref={editor} autoFocus aria-label="edited input" {...invalidProps(error !== null, errorId)} value={draft} onChange={(e) => setDraft(e.target.value)} onKeyDown={(e) => e.key === 'Escape' && discard()} rows={Math.min(20, draft.split('\n').length + 1)} spellCheck={false} autoCapitalize="off" autoCorrect="off" autoComplete="off" />
          </label>
          <div className="row">
            <button className="primary" {...busyProps(busy)} onClick={() => void saveEdit()}>
              Approve with edits
            </button>
            <button onClick={discard}>Discard edits</button>
          </div>
        </div>
      ) : (
        <InputView input={r.input} folded={r.plan.length > 0 && JSON.stringify(r.input).length > FOLDED_INPUT_CHARS} />
      )}
      {rejecting ? (
        <form
          className="row"
          onSubmit={(e) => {
            e.preventDefault();
            reject();
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
          <button type="submit" {...busyProps(busy)}>
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
            <button className="primary" disabled={!armed} {...busyProps(busy)} onClick={() => void run('POST', url, { decision: 'approve' }, `Approved: ${requestTitle(r)}.`)}>
              Approve
            </button>
            <button {...busyProps(busy)} onClick={() => !busy && setEditing(true)}>
              Review &amp; Edit
            </button>
            <button {...busyProps(busy)} onClick={() => !busy && setRejecting(true)}>
              Reject…
            </button>
          </div>
        )
      )}
      <ErrorLine error={error} id={errorId} />
    </article>
  );
}

/** A tool input this long, whose request is shown rendered above it (a plan), opens folded: a 20-subtask plan made the card 46,000 px tall, its Approve at the bottom. */
const FOLDED_INPUT_CHARS = 2000;

/** A tool input, readably: each field on its line, long text as text. */
function InputView({ input, folded = false }: { input: Record<string, unknown>; folded?: boolean }) {
  const fields = (
    <dl className="input">
      {Object.entries(input).map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{typeof v === 'string' ? v : <pre>{JSON.stringify(v, null, 2)}</pre>}</dd>
        </div>
      ))}
    </dl>
  );
  return folded ? (
    <details className="input-fold">
      <summary>The tool input, as the agent gave it (shown above as text)</summary>
      {fields}
    </details>
  ) : (
    fields
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

/**
 * An open question, answered here. `compact`: the copy in the asking agent's toast (the same
 * draft; its fields named as the toast's, so a screen reader's list of fields tells the two apart).
 */
export function ClarificationCard({ taskId, r, decided, compact = false }: { taskId: string; r: Pick<Clarification, 'requestId' | 'questions' | 'options'> & Partial<Clarification>; decided: Decided; compact?: boolean }) {
  const { error, setError, busy, run } = useDecision(decided, r.requestId);
  const ids = useId();
  const errorId = `${ids}-error`;
  const titleId = `${ids}-title`;
  const form = useRef<HTMLFormElement>(null);
  /** The questions left unanswered when the person last tried to send (marked invalid until filled). */
  const [missing, setMissing] = useState<number[]>([]);
  const answers = useSyncExternalStore(watchDrafts, () => draftOf(r.requestId, r.questions.length));
  const setAnswers = (a: string[]): void => setQuestionDraft(r.requestId, a);
  const send = async (values: string[]): Promise<void> => {
    const filled = values.map((a) => a.trim());
    const empty = filled.flatMap((a, i) => (a === '' ? [i] : []));
    setMissing(empty);
    if (empty.length > 0) {
      const orPick = r.options?.length ? ' (or pick an option)' : '';
      setError(r.questions.length > 1 ? `Answer every question${orPick}.` : `Write an answer${orPick}.`);
      form.current?.querySelectorAll('input')[empty[0] as number]?.focus();
      return;
    }
    if (await run('POST', `/v1/tasks/${taskId}/answers/${encodeURIComponent(r.requestId)}`, { answers: filled }, `Answer sent${r.agentId ? ` to ${r.agentId}` : ''}.`)) setQuestionDraft(r.requestId, null);
  };
  return (
    <article className={`card request clarification${compact ? ' compact' : ''}`} data-request={r.requestId} {...(compact ? { 'aria-label': 'answer here' } : { 'aria-labelledby': titleId })}>
      {!compact && (
        <header>
          <h3 className="card-title" id={titleId}>
            <span className="badge agent">{r.agentId}</span> asks
          </h3>
          {r.context ? <span className="context"> — {r.context}</span> : null}
          {r.deadline && <Deadline deadline={r.deadline} then="it goes on with its best judgement" />}
        </header>
      )}
      <form
        ref={form}
        onSubmit={(e) => {
          e.preventDefault();
          void send(answers);
        }}
      >
        {r.questions.map((q, i) => (
          <label key={i} className="question">
            <span>{q}</span>
            <input aria-label={compact ? `${q} (in the toast)` : q} {...invalidProps(missing.includes(i) && !(answers[i] ?? '').trim(), errorId)} value={answers[i] ?? ''} onChange={(e) => setAnswers(answers.map((a, j) => (j === i ? e.target.value : a)))} />
          </label>
        ))}
        {r.options && r.options.length > 0 && (
          <div className="row options">
            {r.options.map((o) => (
              <button
                type="button"
                key={o}
                {...busyProps(busy)}
                aria-pressed={answers.includes(o)}
                // It fills the answer (one question: its field; several: the first still empty), sent with Answer — not at once: on a
                // phone the last option sat right above Answer, and a tap that slipped sent an answer with no way back.
                onClick={() => {
                  const at = r.questions.length === 1 ? 0 : answers.findIndex((a) => !a.trim());
                  if (at < 0) return void setError('Every question has an answer: clear one to put this choice there.');
                  setAnswers(answers.map((a, j) => (j === at ? o : a)));
                  form.current?.querySelector<HTMLButtonElement>('button[type="submit"]')?.focus();
                }}
              >
                {o}
              </button>
            ))}
          </div>
        )}
        <div className="row">
          <button className="primary" type="submit" {...busyProps(busy)}>
            Answer
          </button>
        </div>
      </form>
      <ErrorLine error={error} id={errorId} />
    </article>
  );
}

function BudgetCard({ taskId, r, decided }: { taskId: string; r: Budget; decided: Decided }) {
  const { error, setError, busy, run } = useDecision(decided, r.requestId);
  const ids = useId();
  const errorId = `${ids}-error`;
  const titleId = `${ids}-title`;
  /** The limit the person typed that is not a number above 0 (marked invalid, focused). */
  const [bad, setBad] = useState<'usd' | 'tokens' | null>(null);
  const [usd, setUsd] = useState(r.limit.usd !== null ? String(Math.max(r.limit.usd, r.spent.usd) * 2) : '');
  const [tokens, setTokens] = useState(r.limit.tokens !== null ? String(Math.max(r.limit.tokens, r.spent.tokens) * 2) : '');
  const url = `/v1/tasks/${taskId}/approvals/${encodeURIComponent(r.requestId)}`;
  const raise = async (): Promise<void> => {
    const budget: { usd?: number; tokens?: number } = {};
    if (usd.trim()) budget.usd = Number(usd);
    if (tokens.trim()) budget.tokens = Math.ceil(Number(tokens));
    const wrong = budget.usd !== undefined && !(budget.usd > 0) ? 'usd' : budget.tokens !== undefined && !(budget.tokens > 0) ? 'tokens' : null;
    setBad(wrong);
    if (wrong) {
      setError('A new limit must be a number above 0.');
      document.getElementById(`${ids}-${wrong}`)?.focus();
      return;
    }
    await run('POST', url, { decision: 'approve', budget }, 'Budget raised: the run goes on.');
  };
  return (
    <article className="card request budget" data-request={r.requestId} aria-labelledby={titleId}>
      <header>
        <h3 className="card-title" id={titleId}>
          The task reached its budget
        </h3>
        <span>
          spent {r.limit.usd !== null && `$${r.spent.usd.toFixed(4)} of $${r.limit.usd}`} {r.limit.tokens !== null && `${r.spent.tokens} of ${r.limit.tokens} tokens`}
        </span>
        <Deadline deadline={r.deadline} then="the run stops" />
      </header>
      <p>No agent calls a model until you decide.</p>
      <div className="row">
        {r.limit.usd !== null && (
          <label>
            New limit, US$ <input id={`${ids}-usd`} aria-label="new limit in USD" {...invalidProps(bad === 'usd', errorId)} value={usd} onChange={(e) => setUsd(e.target.value)} />
          </label>
        )}
        {r.limit.tokens !== null && (
          <label>
            New limit, tokens <input id={`${ids}-tokens`} aria-label="new limit in tokens" {...invalidProps(bad === 'tokens', errorId)} value={tokens} onChange={(e) => setTokens(e.target.value)} />
          </label>
        )}
        <button className="primary" {...busyProps(busy)} onClick={() => void raise()}>
          Raise and continue
        </button>
        {/* Ends the task for good: asked twice, as Cancel is (one tap had failed the task). */}
        <ConfirmButton label="Stop the run" confirmLabel="Stop it for good?" busy={busy} onConfirm={() => void run('POST', url, { decision: 'reject', reason: 'stopped at the budget from the console' }, 'The run stops at its budget.')} />
      </div>
      <ErrorLine error={error} id={errorId} />
    </article>
  );
}
