import { setTimeout as sleep } from 'node:timers/promises';
import { agentStreamId, artifactMode, fold, formatBytes, isFinal, isStepCommand, isToolUse, NamedError, normalPath, own, type Command, type MailRecipientRules, type RecordedEvent, type TaskState } from '@baton/domain';
import { inSpan, metrics } from '@baton/telemetry';
import { ConsumerStoppingError, TaskEndedError } from '@baton/bus';
import { builtinTeams, editFileTool, findAgent, writePolicyOf, ModelUnavailableError, MUTATING_TOOLS, outboxRequest, REVIEW_REMINDER, runAgentLoop, submitReviewTool, writeFileTool, type AgentDefinition, type LoopHost, type ModelClient, type TeamCatalog, type TeamDefinition } from '@baton/agents';
import { handleCommand, isConcurrencyError, loadTask, retryOnConflict, TaskWriter, type EventStore, type LoadedTask, type TaskLoader } from '@baton/event-store';
import { acquireLease, ArtifactPathHeldError, releaseLease, renewLease, type CorpusHit, type StoredArtifact } from '@baton/storage';
import type pg from 'pg';
import type { Logger } from '@baton/runtime';
import { DEFAULT_LIMITS, SandboxFencedError, SandboxOutageError, SandboxRefusedError, WorkspaceTooLargeError, type Sandbox, type SandboxProvider, type SandboxSpec } from '@baton/sandbox';
import { editFile, runTool, type ToolEnv } from './tools.ts';

export interface RunnerDeps {
  store: EventStore;
  model: ModelClient;
  teams?: Readonly<Record<string, TeamDefinition>>;
  /** Resolves a run's pinned config version (default: the current `teams`, versions ignored). */
  catalog?: TeamCatalog;
  /** Where agents work (local bubblewrap or E2B). */
  sandboxes: SandboxProvider;
  /** Where produced files are kept (Postgres); absent → files stay in the sandbox only. */
  artifacts?: ArtifactStore;
  /** The files of a task's input workspace, by digest (Postgres); absent → agents start without them. */
  inputWorkspace?: (digest: string) => Promise<{ path: string; mode: number; content: Buffer }[]>;
  /** The offline web search (full-text corpus). */
  search?: (query: string, limit: number) => Promise<CorpusHit[]>;
  /** The host environment, from which an agent's config may pass named variables into its sandbox. */
  hostEnv?: Readonly<Record<string, string | undefined>>;
  runnerId: string;
  now: () => Date;
  log: Logger;
  /** How tasks are loaded (default: a full re-read); the service passes a TaskCache's load. */
  load?: TaskLoader;
  /** Called with each committed batch (the service publishes its wake-ups at once, and its live ticks within LIVE_TICK_GAP_MS). */
  committed?: (events: readonly RecordedEvent[]) => void;
  /** Agent leases in Postgres (absent: none — tests that drive one runner by hand). */
  lease?: LeaseConfig;
  /** Called just before a tool runs, with the agent stream version the runner had seen (crash tests audit this). */
  audit?: (entry: { taskId: string; agentId: string; toolUseId: string; tool: string; seenVersion: number }) => void;
  /** How long a job waits out the sandbox service failing to open the sandbox (SANDBOX_OUTAGE_LIMIT_MS; default 15 minutes). */
  sandboxOutageLimitMs?: number;
  /** Where each tenant's mail may go (MAIL_ALLOWED_RECIPIENTS): send_email to another address is an error result; absent: anywhere. */
  mailRecipients?: MailRecipientRules | undefined;
}

export interface LeaseConfig {
  db: Pick<pg.Pool, 'query'>;
  /** A lease not renewed for this long is taken over (renewed every third of it). */
  ttlMs: number;
}

/**
 * Take the agent's lease for this attempt and keep renewing it until the job ends; 'held' when
 * another runner holds a live one. A job that throws leaves its error on the (then expired)
 * lease for the watchdog's report; one that ends gives the lease back.
 */
async function holdLease(d: Pick<RunnerDeps, 'runnerId' | 'log'>, c: LeaseConfig, taskId: string, agentId: string, attempt: number) {
  const got = await acquireLease(c.db, { taskId, agentId, attempt, holder: d.runnerId, ttlMs: c.ttlMs });
  if (!got.taken) {
    d.log.info({ taskId, agentId, holder: got.heldBy.holder, until: got.heldBy.expiresAt }, 'job dropped: the agent is being run elsewhere');
    return 'held' as const;
  }
  let error: string | undefined;
  let holdMs = 0;
  const timer = setInterval(() => {
    renewLease(c.db, { taskId, agentId, holder: d.runnerId, ttlMs: c.ttlMs }).then(
      (kept) => kept || d.log.warn({ taskId, agentId }, 'lease lost: another runner took the agent over'),
      (err: unknown) => d.log.warn({ err, taskId, agentId }, 'could not renew the lease; will retry'),
    );
  }, Math.max(50, Math.floor(c.ttlMs / 3)));
  return {
    /** The job failed: the lease keeps the error; `holdMs`: and stays this long (a retry is due), not released now. */
    failed(err: unknown, o: { holdMs?: number } = {}): void {
      error = err instanceof Error ? err.message : String(err);
      holdMs = o.holdMs ?? 0;
    },
    async release(): Promise<void> {
      clearInterval(timer);
      await releaseLease(c.db, { taskId, agentId, holder: d.runnerId, ...(error !== undefined ? { error, holdMs } : {}) }).catch((err: unknown) => d.log.warn({ err, taskId, agentId }, 'could not release the lease (it expires by itself)'));
    },
  };
}

/** A job's cause is not readable yet (not expected: the relay publishes only committed events); the job is retried. */
export class CauseNotVisibleError extends Error {
  constructor(eventId: string) {
    super(`event ${eventId} is not readable yet`);
    this.name = new.target.name;
  }
}

export type JobOutcome = 'completed' | 'failed' | 'paused' | 'cancelled' | 'superseded' | 'nothing-to-do' | 'held-elsewhere';

/**
 * Run (or resume) one subagent. Ownership is fenced in Postgres, not by NATS acks: the
 * runner records `SubagentStarted` with the next attempt number, writes each turn to the
 * agent's own stream at the version it read (a concurrent writer makes it conflict), and
 * completes only if its attempt is still the current one. A job redelivered after a crash
 * resumes from the last recorded turn; a tool whose result was recorded never runs again.
 *
 * A tool call that needs a person (ask_user, or a tool the approval policy gates) opens a
 * request on the task stream; the agent is then paused and the job ends, holding nothing.
 * The decision makes a new job, which resumes here: the decided outcome becomes the tool
 * result (or the approved input is run), and the loop goes on.
 */
export async function runSubagentJob(
  d: RunnerDeps,
  taskId: string,
  agentId: string,
  heartbeat: () => void,
  opts: {
    signal?: AbortSignal;
    /** Aborted as soon as the runner begins to stop: a job that has not claimed its attempt yet claims none (its message goes back). */
    stopping?: AbortSignal;
    /** The event that made the job: it must be readable before the state is trusted. */ causeEventId?: string;
  } = {},
): Promise<JobOutcome> {
  const { signal } = opts;
  const teams = d.teams ?? builtinTeams;
  const load = d.load ?? ((id: string) => loadTask(d.store, id));
  const initial = await load(taskId);
  // Never act on a state older than the job's cause (it would look like nothing to do).
  if (opts.causeEventId && !initial.events.some((e) => e.id === opts.causeEventId)) throw new CauseNotVisibleError(opts.causeEventId);
  const agent0 = initial.state.agents[agentId];
  if (!agent0 || isFinal(initial.state) || (agent0.status !== 'dispatched' && agent0.status !== 'running')) return 'nothing-to-do';
  const team = d.catalog ? await d.catalog.resolve(initial.state.team, initial.state.lead?.configVersion) : own(teams, initial.state.team);
  const def = team ? findAgent(team, agent0.type) : undefined;
  if (!team || !def) {
    await handleCommand(d.store, taskId, { type: 'FailSubagent', agentId, code: 'unknown_agent', message: `agent type '${agent0.type}' is not configured in team '${initial.state.team}'` }, { load });
    return 'failed';
  }
  const attempt = agent0.attempt + 1;
  // A job that starts once its runner is already stopping (it waited behind another of the same
  // agent) claims nothing: its message goes back as it is.
  opts.stopping?.throwIfAborted();
  signal?.throwIfAborted();
  // The lease first: a live one held by another runner means the agent is being run — this
  // delivery is a duplicate (an ack that came late, a re-dispatch) and is dropped; the lease's
  // holder owns the agent, and the watchdog re-dispatches it if that holder goes quiet.
  const lease = d.lease ? await holdLease(d, d.lease, taskId, agentId, attempt) : null;
  if (lease === 'held') return 'held-elsewhere';
  /** This job recorded the attempt's start: only then is the attempt its to hand back. */
  let ours = false;
  try {
    const claimed = await claimAttempt(d, taskId, agentId, attempt, initial);
    if (!claimed) return 'superseded';
    ours = true;
    let sandbox: Sandbox;
    try {
      sandbox = await inSpan('baton.sandbox.open', { attributes: { 'baton.sandbox.provider': d.sandboxes.name, 'baton.task_id': taskId, 'gen_ai.agent.id': agentId, 'baton.attempt': attempt } }, () =>
        openWaiting(d, sandboxSpec(d, def, taskId, agentId, attempt), [signal, opts.stopping]),
      );
    } catch (err) {
      if (err instanceof SandboxFencedError) return 'superseded';
      throw err;
    }
    // Open sandboxes and how long each stayed open for this job, by how it ended.
    const provider = d.sandboxes.name;
    const openedAt = performance.now();
    let end = 'left'; // superseded or failed: the sandbox is left to the next attempt or the sweeper
    metrics.sandboxesActive.inc({ provider });
    try {
      if ((claimed.writer.state.agents[agentId]?.turns ?? 0) === 0) await seedInputs(d, sandbox, claimed.writer.state, taskId);
      else await restoreLostWorkspace(d, sandbox, claimed.writer.state, claimed.events, taskId, agentId);

      const { writer } = claimed;
      const events = claimed.events;
      // What it may change: its config's file scope and, for a subtask of a plan, its locks.
      const policy = writePolicyOf(def, initial.state, agentId);
      const env: ToolEnv = {
        sandbox,
        testCommand: def.testCommand,
        search: d.search,
        signal,
        policy,
        // send_email: EmailRequested goes to the log now, before the tool result that says so (a
        // crash between the two runs the call again, which records nothing new: its id is stable).
        outbox: async (toolUseId, input) => {
          const r = outboxRequest(writer.state, agentId, toolUseId, input, d.mailRecipients);
          if (!r.ok) return { content: r.error, isError: true };
          const done = await handleCommand(d.store, taskId, r.command, { load });
          d.committed?.(done.events);
          return { content: r.result };
        },
      };
      /** Task-stream commands (requests, completion) wait for the agent's own writes, then go through handleCommand. */
      let onTaskStream: Command[] = [];
      let changed = false;
      /** After tools that can change files, the workspace is made durable (once) before anything describes it. */
      const syncIfChanged = async (): Promise<void> => {
        if (changed) await sandbox.sync();
        changed = false;
      };
      let outcome = null as JobOutcome | null;
      const stop = (o: JobOutcome): false => ((outcome = o), false);
      /** The task as the last proceed read it (other agents' spending included). */
      let latest: TaskState | null = null;
      /** The agent's own stream as this job knows it (what it committed and what is pending). */
      const ownEvents = (): RecordedEvent[] => events.concat(writer.pending).filter((e) => e.streamId === agentStreamId(taskId, agentId));

      const host: LoopHost = {
        agentId,
        team,
        def,
        runsIn: 'runner',
        model: d.model,
        system: def.prompt,
        prompt: agent0.prompt,
        attempt,
        actor: d.runnerId,
        ...(signal ? { signal } : {}),
        now: d.now,
        state: () => writer.state,
        events: () => events.concat(writer.pending),
        pending: () => writer.pending,
        record: (commands, metadata) => {
          // The agent's own steps go to its stream now; the rest to the task stream at commit.
          onTaskStream = onTaskStream.concat(commands.filter((c) => !isStepCommand(c)));
          if (commands.some(isStepCommand)) writer.apply(commands.filter(isStepCommand), metadata ? { metadata } : {});
        },
        commit: async () => {
          await syncIfChanged();
          try {
            const own = await writer.flush();
            events.push(...own);
            d.committed?.(own);
          } catch (err) {
            if (!isConcurrencyError(err)) throw err;
            d.log.warn({ taskId, agentId, attempt }, 'agent stream moved under us: a newer attempt took over');
            return stop('superseded');
          }
          const commands = onTaskStream;
          onTaskStream = [];
          if (commands.length === 0) return true;
          try {
            const done = await handleCommand(d.store, taskId, (s) => {
              const a = s.agents[agentId];
              return a && a.attempt === attempt && (a.status === 'running' || a.status === 'paused') ? commands : null;
            }, { load });
            d.committed?.(done.events);
            return done.events.length > 0 || stop('superseded');
          } catch (err) {
            const code = (err as { code?: string }).code;
            if (code === 'stale_attempt') return stop('superseded');
            if (code === 'task_final') return stop('cancelled');
            throw err;
          }
        },
        proceed: async () => {
          heartbeat();
          // The task as others see it: cancelled, or this attempt superseded, stops the job here.
          // Read before the first turn too: a cancel can commit between the attempt's claim (on
          // the task stream) and its fence (on the agent's), which the writer's state cannot show.
          const fresh = (await load(taskId)).state;
          latest = fresh;
          const current = fresh.agents[agentId];
          if (isFinal(fresh) || current?.status === 'cancelled') return stop('cancelled');
          if (!current || current.attempt !== attempt || current.status !== 'running') return stop('superseded');
          return true;
        },
        latest: () => latest ?? writer.state,
        execute: async (call) => {
          // (A path outside the agent's scope or locks never reaches here: the loop's triage refuses it.)
          d.audit?.({ taskId, agentId, toolUseId: call.id, tool: call.name, seenVersion: writer.committed.agents[agentId]?.streamVersion ?? 0 });
          if (MUTATING_TOOLS.has(call.name)) changed = true;
          return runTool({ type: 'tool_use', ...call }, def.tools, env);
        },
        plan: (call) => `${def.name} (${agentId}) wants to call ${call.name}.`,
        // A reviewer that ended without a verdict is asked for one (once): otherwise the plan fails for it.
        remind: () => (agent0.role === 'review' && !lastReview(ownEvents(), agentId, agent0.round) ? REVIEW_REMINDER : null),
        finish: async ({ capped, finalText, failure }) => {
          if (failure) return [{ type: 'FailSubagent', agentId, code: failure.code, message: failure.message }];
          const own = ownEvents();
          const files = collectFiles(own);
          await syncIfChanged();
          const { stored, notKept, renamed } = await storeOutputs(d, sandbox, taskId, agentId, files, agent0.fileLocks !== null);
          // Files it made that are not among the task's files, or are under another path (another
          // agent's file held the name), are said where everyone reads (its summary: the lead, the
          // reviewer, the person) and named as kept in its completion.
          const unkept = `${notKept.length > 0 ? `\n[not kept as the task's files: ${notKept.map((n) => `${n.path} (${n.why})`).join('; ')}]` : ''}${
            renamed.size > 0 ? `\n[kept under another path, another agent's file holding its own: ${[...renamed].map(([from, to]) => `${from} as ${to}`).join('; ')}]` : ''
          }`;
          // Its completion names the task's files it made, as kept: not those it made that were not kept (another agent's may hold the path).
          const unkeptPaths = new Set(notKept.map((n) => n.path));
          const keptAs = (paths: readonly string[]): string[] => paths.filter((p) => !unkeptPaths.has(p)).map((p) => renamed.get(p) ?? p);
          const summary = `${capped ? `stopped after reaching the iteration cap of ${def.maxTurns} turns. ${finalText}`.trim() : finalText}${unkept}`;
          const tests = writer.state.agents[agentId]?.tests; // its last test run's counts, as the fold keeps them
          const review = agent0.role === 'review' ? lastReview(own, agentId, agent0.round) : null;
          return [
            ...stored.map((x): Command => ({ type: 'StoreArtifact', agentId, path: x.path, bytes: x.bytes, sha256: x.sha256, mediaType: x.mediaType, mode: x.mode })),
            ...files.deleted.map((path): Command => ({ type: 'DeleteFile', agentId, path })),
            ...(review ? [review] : []),
            { type: 'CompleteSubagent', agentId, attempt, summary, filesCreated: keptAs(files.created), filesModified: keptAs(files.modified), ...(files.deleted.length > 0 ? { filesDeleted: files.deleted } : {}), success: !capped, iterationCapReached: capped, ...(tests ? { tests } : {}) },
          ];
        },
      };

      try {
        const exit = await runAgentLoop(host);
        outcome ??= exit === 'finished' ? 'completed' : exit === 'waiting' ? 'paused' : 'superseded';
      } catch (err) {
        if (err instanceof SandboxFencedError) return 'superseded';
        throw err;
      }
      // The sandbox follows the agent: paused (nothing held) while it waits for a person, gone once
      // it is done or its task was cancelled; a superseded job leaves it to the newer attempt.
      if (outcome === 'paused') {
        await d.sandboxes.pause(sandbox);
        end = 'paused';
      } else if (outcome === 'completed' || outcome === 'cancelled') {
        await d.sandboxes.kill(taskId, agentId);
        end = 'killed';
      }
      return outcome;
    } finally {
      metrics.sandboxesActive.dec({ provider });
      metrics.sandboxSeconds.observe({ provider, end }, (performance.now() - openedAt) / 1000);
    }
  } catch (err) {
    // Its task ended while it ran (its model call or command aborted): nothing more to do; its sandbox goes.
    if (ours && signal?.reason instanceof TaskEndedError) {
      d.log.info({ taskId, agentId, attempt, reason: signal.reason.message }, 'job stopped: its task ended');
      await d.sandboxes.kill(taskId, agentId);
      return 'cancelled';
    }
    // Past its workspace's limit the agent fails now: a retry would run to the same place.
    if (ours && err instanceof WorkspaceTooLargeError) return failForGood(d, load, taskId, agentId, attempt, err, 'its workspace is over its limit');
    // The sandbox service refused for good (its key, its template): every attempt would fail the same way.
    if (ours && (err instanceof SandboxRefusedError || err instanceof SandboxOutageOverError)) return failForGood(d, load, taskId, agentId, attempt, err, err instanceof SandboxRefusedError ? 'the sandbox service refused it' : 'the sandbox service could not open its sandbox for too long');
    if (ours && signal?.reason instanceof ConsumerStoppingError) await handBack(d, load, taskId, agentId, attempt);
    else if (ours && err instanceof ModelUnavailableError) {
      // The model API could not answer (after its client's retries): the attempt was not lost to
      // the agent's work, and its job is retried. The lease is kept a while, so that the watchdog
      // does not start another attempt beside the job's own retry (seven attempts in 16 s had
      // given the agent up as lost to a dying runner).
      await handBack(d, load, taskId, agentId, attempt, err.message);
      lease?.failed(err, { holdMs: d.lease?.ttlMs ?? 0 });
      throw err;
    }
    lease?.failed(err);
    throw err;
  } finally {
    await lease?.release();
  }
}

/** The sandbox service failed to open the sandbox for SANDBOX_OUTAGE_LIMIT_MS: the agent fails with these words. */
class SandboxOutageOverError extends NamedError {
  readonly code = 'sandbox_unavailable';
}

/**
 * Open the agent's sandbox, waiting out the sandbox service's outage (`SandboxOutageError`: E2B
 * answering 5xx or 429, timing out, cut off) — asked again after 1, 2, 4 … 30 s, the job held
 * meanwhile (its heartbeat keeps it), for up to `sandboxOutageLimitMs` (then
 * `SandboxOutageOverError`). Before, the outage was the job's failure: five of them in about 20 s
 * failed the agent `job_failed`. Stopping (the task ended, the runner stopping) ends the wait.
 */
async function openWaiting(d: Pick<RunnerDeps, 'sandboxes' | 'log' | 'sandboxOutageLimitMs'>, spec: SandboxSpec, stops: (AbortSignal | undefined)[]): Promise<Sandbox> {
  const limitMs = d.sandboxOutageLimitMs ?? 900_000;
  const started = Date.now();
  for (let tries = 1; ; tries++) {
    try {
      return await d.sandboxes.open(spec);
    } catch (err) {
      if (!(err instanceof SandboxOutageError)) throw err;
      const waited = Date.now() - started;
      if (waited >= limitMs) throw new SandboxOutageOverError(`the sandbox service could not open the agent's sandbox for ${Math.round(waited / 1000)} s (${tries} tries; SANDBOX_OUTAGE_LIMIT_MS is ${limitMs} ms): given up. Last error: ${err.message}`, { cause: err });
      const pauseMs = Math.min(30_000, 1000 * 2 ** (tries - 1), Math.max(0, limitMs - waited));
      d.log.error({ taskId: spec.taskId, agentId: spec.agentId, attempt: spec.attempt, tries, waitedMs: waited, err: err.message }, `the sandbox service could not open the agent's sandbox: asked again in ${pauseMs} ms`);
      await sleepUnless(pauseMs, stops);
    }
  }
}

/** Wait `ms`, or less when one of `stops` aborts (then its reason is thrown). */
async function sleepUnless(ms: number, stops: (AbortSignal | undefined)[]): Promise<void> {
  const live = stops.filter((s): s is AbortSignal => s !== undefined);
  const any = AbortSignal.any(live);
  await sleep(ms, undefined, { signal: any }).catch(() => any.throwIfAborted());
  any.throwIfAborted();
}

/**
 * The agent fails now, with the error's code and words, while the attempt is still its current
 * one — a retry would end the same way: its workspace grew past its limit
 * (WorkspaceTooLargeError: its sandbox goes, what grew stays out of Postgres and off the host),
 * or the sandbox service refused it for good (SandboxRefusedError: a key, a template to mend)
 * or could not open it for SANDBOX_OUTAGE_LIMIT_MS (SandboxOutageOverError). The lead is told as of any failed agent, and can delegate again.
 */
async function failForGood(d: Pick<RunnerDeps, 'store' | 'sandboxes' | 'committed' | 'log'>, load: TaskLoader, taskId: string, agentId: string, attempt: number, err: Error & { code: string }, why: string): Promise<JobOutcome> {
  const done = await handleCommand(
    d.store,
    taskId,
    (s): Command | null => {
      const a = s.agents[agentId];
      return !isFinal(s) && a && a.attempt === attempt && (a.status === 'running' || a.status === 'paused') ? { type: 'FailSubagent', agentId, code: err.code, message: err.message } : null;
    },
    { load },
  );
  d.committed?.(done.events);
  d.log.warn({ taskId, agentId, attempt, error: err.message }, `agent failed: ${why}`);
  // The sandbox goes — best effort: a service that refuses or is away now would fail the kill too
  // (the sweeper and the agent's release job try again).
  await d.sandboxes.kill(taskId, agentId).catch((e: unknown) => d.log.warn({ taskId, agentId, err: (e as Error).message }, "could not kill the failed agent's sandbox now"));
  return done.events.length > 0 ? 'failed' : 'superseded';
}

/**
 * This runner is stopping and aborted the attempt it ran (its job goes back to the queue): the
 * log says so, so that the attempt does not count as one lost to the agent's own work
 * (`stalledAttempts`) — a deployment that interrupts an agent's long model call again and again
 * must not get it given up. Only while the attempt is still the agent's current one.
 */
async function handBack(d: Pick<RunnerDeps, 'store' | 'runnerId' | 'log' | 'committed'>, load: TaskLoader, taskId: string, agentId: string, attempt: number, reason = 'its runner stopped (a graceful shutdown)'): Promise<void> {
  try {
    const done = await handleCommand(
      d.store,
      taskId,
      (s): Command | null => {
        const a = s.agents[agentId];
        return !isFinal(s) && a?.status === 'running' && a.attempt === attempt ? { type: 'HandBackSubagent', agentId, attempt, runnerId: d.runnerId, reason } : null;
      },
      { load },
    );
    d.committed?.(done.events);
  } catch (err) {
    d.log.warn({ err, taskId, agentId, attempt }, 'could not record the hand-back: the attempt counts as lost');
  }
}

/** Files kept as a task's artifacts (the bytes go to Postgres; ArtifactStored records them). */
export interface ArtifactStore {
  /** `owned`: the agent holds a lock on the path, so it replaces the task's version of the file. */
  store(a: { taskId: string; path: string; agentId: string; content: Buffer; owned?: boolean }): Promise<StoredArtifact>;
  /** A file's bytes: the version named (`sha256`) when it was kept, else the task's current one. */
  read(taskId: string, path: string, sha256?: string): Promise<Buffer | null>;
}

function sandboxSpec(d: RunnerDeps, def: AgentDefinition, taskId: string, agentId: string, attempt: number): SandboxSpec {
  const env: Record<string, string> = {};
  for (const name of def.sandbox?.env ?? []) {
    const v = d.hostEnv?.[name];
    if (v !== undefined) env[name] = v;
  }
  return { taskId, agentId, attempt, network: def.sandbox?.network ?? false, env, limits: { ...DEFAULT_LIMITS, ...def.sandbox?.limits } };
}

/** The task's files at a point: its artifacts (each in a version) and the paths deleted since (TaskState's, or `filesAtStart`). */
type TaskFilesAt = { artifacts: readonly { path: string; sha256: string; mode?: number }[]; deletedFiles: readonly string[] };

/**
 * A new agent's workspace: the task's input workspace (the codebase it started from) without the
 * files agents deleted, then the task's artifacts so far on top — the files earlier agents
 * produced or changed (the researcher's notes for the writer; a dependency's changes for an
 * engineer). As storage's taskTree lays the task's tree.
 */
async function seedInputs(d: RunnerDeps, sandbox: Sandbox, state: TaskState, taskId: string, at: TaskFilesAt = state): Promise<number> {
  const { artifacts } = at;
  const deleted = new Set(at.deletedFiles);
  const inputs = (state.workspace && d.inputWorkspace ? await d.inputWorkspace(state.workspace.digest) : []).filter((f) => !deleted.has(f.path));
  if (inputs.length === 0 && (!d.artifacts || artifacts.length === 0)) return 0;
  let written = 0;
  // Each file with its mode, as the task's tree has it (storage's taskTree): an artifact's as
  // recorded, else the input file's, else 0644.
  const inputModes = new Map(inputs.map((f) => [f.path, f.mode]));
  for (const f of inputs) {
    await sandbox.files.write(f.path, f.content, f.mode);
    written++;
  }
  for (const a of d.artifacts ? artifacts : []) {
    const content = await d.artifacts?.read(taskId, a.path, a.sha256);
    if (content) {
      await writeOver(sandbox, a.path, content, artifactMode(a.mode, inputModes.get(a.path)));
      written++;
    }
  }
  await sandbox.sync();
  return written;
}

/**
 * Write an artifact over what is there, as the task's tree lays it (storage's taskTree): where a
 * file and a directory of one name meet, the later one wins — a directory in the way is removed,
 * and so is a file standing where a directory of the path must be (a file an agent turned into a
 * directory). Seeding failed there for good before, and the agent was lost.
 */
export async function writeOver(sandbox: Sandbox, file: string, content: string | Uint8Array, mode?: number): Promise<void> {
  await sandbox.files.write(file, content, mode).catch(async (err: Error & { code?: string }) => {
    if (err.code === 'EISDIR') await sandbox.files.remove(file);
    else if (err.code === 'ENOTDIR') {
      const parts = file.split('/');
      for (let i = 1; i < parts.length; i++) {
        const ancestor = parts.slice(0, i).join('/');
        if (await sandbox.files.readBytes(ancestor, 0).then(() => true, () => false)) {
          await sandbox.files.remove(ancestor);
          break;
        }
      }
    } else throw err;
    await sandbox.files.write(file, content, mode);
  });
}

/**
 * An agent resumed into an empty workspace: its sandbox's files are gone — a fork of a task whose
 * sandboxes were released (a finished or cancelled one), or whose agent moved on past the fork
 * point (its live workspace is not copied), made while this agent was at work; it may have
 * written nothing yet (it asked a question first, or only read). Its workspace is rebuilt from
 * the log: seeded as it was when the
 * agent first started (the input workspace, the artifacts stored before then, in those versions),
 * then its recorded file writes (`write_file`, `edit_file` that succeeded) applied again in order,
 * so the files its history describes are there when it goes on and when its outputs are stored.
 * What its commands did to files (`run_command`, `run_tests`) is not in the log and does not come
 * back: that is logged. (An agent that emptied its own workspace with a command would see its
 * recorded writes come back: the one case this misreads.)
 */
async function restoreLostWorkspace(d: RunnerDeps, sandbox: Sandbox, state: TaskState, events: readonly RecordedEvent[], taskId: string, agentId: string): Promise<void> {
  if ((await sandbox.files.list('.')).length > 0) return;
  const writes = recordedWrites(events, agentId);
  const seeded = await seedInputs(d, sandbox, state, taskId, filesAtStart(events, agentId));
  if (seeded === 0 && writes.length === 0) return; // it started from nothing and wrote nothing: nothing is gone
  let replayed = 0;
  for (const w of writes) {
    try {
      if (w.kind === 'write') await sandbox.files.write(w.path, w.content);
      else await editFile(sandbox, w.path, w.oldString, w.newString, w.all);
      replayed++;
    } catch (err) {
      d.log.warn({ taskId, agentId, path: w.path, err: (err as Error).message }, 'workspace rebuilt from the log: a recorded write could not be applied again');
    }
  }
  await sandbox.sync();
  const commands = events.some((e) => e.type === 'ToolResultsRecorded' && e.data.agentId === agentId && e.data.results.some((r) => r.toolName === 'run_command' || r.toolName === 'run_tests'));
  d.log.warn({ taskId, agentId, seeded, replayed, of: writes.length, commandsNotReplayed: commands }, "the agent's workspace was gone (a fork of a task whose sandboxes were released, or that moved on): rebuilt from the log");
}

/**
 * The task's files an agent's workspace was seeded with: the task as it stood when the agent
 * first started (the fold of the events before then) — the last version of each artifact and the
 * files deleted by then, not what other agents stored or deleted while it worked (pure).
 */
export function filesAtStart(events: readonly RecordedEvent[], agentId: string): TaskFilesAt {
  const start = events.find((e) => e.type === 'SubagentStarted' && e.data.agentId === agentId)?.position;
  const then = fold(start === undefined ? events : events.filter((e) => e.position < start));
  return { artifacts: then.artifacts.map(({ path, sha256, mode }) => ({ path, sha256, ...(mode !== undefined ? { mode } : {}) })), deletedFiles: then.deletedFiles };
}

/** The ids of an agent's tool uses whose results were recorded as no error. */
function succeededToolUses(events: readonly RecordedEvent[], agentId: string): Set<string> {
  const ok = new Set<string>();
  for (const e of events) if (e.type === 'ToolResultsRecorded' && e.data.agentId === agentId) for (const r of e.data.results) if (!r.isError) ok.add(r.toolUseId);
  return ok;
}

type RecordedWrite = { kind: 'write'; path: string; content: string } | { kind: 'edit'; path: string; oldString: string; newString: string; all: boolean };

/** The file writes an agent's history recorded as done, in order: each successful `write_file` and `edit_file` with its input (pure). */
export function recordedWrites(events: readonly RecordedEvent[], agentId: string): RecordedWrite[] {
  const ok = succeededToolUses(events, agentId);
  const out: RecordedWrite[] = [];
  for (const e of events) {
    if (e.type !== 'ModelTurnRecorded' || e.data.agentId !== agentId) continue;
    for (const b of e.data.content.filter(isToolUse)) {
      if (!ok.has(b.id)) continue;
      if (b.name === 'write_file') {
        const i = writeFileTool.input.safeParse(b.input);
        if (i.success) out.push({ kind: 'write', path: normalPath(i.data.path), content: i.data.content });
      } else if (b.name === 'edit_file') {
        const i = editFileTool.input.safeParse(b.input);
        if (i.success) out.push({ kind: 'edit', path: normalPath(i.data.path), oldString: i.data.old_string, newString: i.data.new_string, all: i.data.replace_all });
      }
    }
  }
  return out;
}

/** A reviewer's verdict: its last submit_review that was accepted (the tool validated it), as the command that records it. */
export function lastReview(events: readonly RecordedEvent[], agentId: string, round: number): Command | null {
  const accepted = succeededToolUses(events, agentId);
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i] as RecordedEvent;
    if (e.type !== 'ModelTurnRecorded') continue;
    const use = e.data.content.filter(isToolUse).findLast((b) => b.name === 'submit_review' && accepted.has(b.id));
    if (!use) continue;
    const parsed = submitReviewTool.input.parse(use.input);
    return { type: 'RecordReview', agentId, round, verdict: parsed.verdict, issues: parsed.issues, summary: parsed.summary };
  }
  return null;
}

/**
 * Store the files an agent created or modified as artifacts (before it is recorded as complete).
 * `renamed`: each file kept under another path than its own (another agent's file held the path:
 * `<agentId>/<path>`), from its path to the one kept.
 */
async function storeOutputs(d: RunnerDeps, sandbox: Sandbox, taskId: string, agentId: string, files: { created: string[]; modified: string[] }, owned: boolean): Promise<{ stored: (StoredArtifact & { mode: number })[]; notKept: { path: string; why: string }[]; renamed: Map<string, string> }> {
  const stored: (StoredArtifact & { mode: number })[] = [];
  const notKept: { path: string; why: string }[] = [];
  const renamed = new Map<string, string>();
  if (!d.artifacts) return { stored, notKept, renamed };
  for (const file of [...files.created, ...files.modified]) {
    const { bytes, size, mode } = await sandbox.files.readBytes(file).catch(() => ({ bytes: null, size: 0, mode: 0 }));
    if (!bytes || size > bytes.length) {
      d.log.warn({ taskId, agentId, file, size }, 'file not stored as an artifact (gone, or too large)');
      notKept.push({ path: file, why: bytes ? `${formatBytes(size)}, ${size} bytes: more than the ${bytes.length} a file may have` : "gone by the agent's end" });
      continue;
    }
    const kept = await d.artifacts.store({ taskId, path: file, agentId, content: bytes, owned }).catch((err: unknown) => {
      // Both names held by other agents' files: this one is not kept, and said (it had failed the agent on every attempt, each paid again).
      if (err instanceof ArtifactPathHeldError) return null;
      throw err;
    });
    if (!kept) {
      notKept.push({ path: file, why: `${agentId}/${file} as well as ${file} are other agents' files` });
      continue;
    }
    if (kept.path !== file) renamed.set(file, kept.path);
    stored.push({ ...kept, mode });
  }
  return { stored, notKept, renamed };
}

/**
 * Claim the next attempt: first on the task stream (decide admits exactly attempt n+1, so
 * competing runners serialise there), then on the agent's own stream — its version moves, so
 * an older attempt still running conflicts on its next append and stops. One writer, one load
 * (the caller's, if it has one) unless a conflict makes it read again. Returns the writer and
 * the task's events, or null when another runner claimed a newer attempt first.
 */
export async function claimAttempt(d: Pick<RunnerDeps, 'store' | 'runnerId' | 'now' | 'load'>, taskId: string, agentId: string, attempt: number, loaded?: LoadedTask) {
  const load = d.load ?? ((id: string) => loadTask(d.store, id));
  let given = loaded;
  try {
    return await retryOnConflict(async () => {
      const task = given ?? (await load(taskId));
      given = undefined;
      const writer = new TaskWriter(d.store, taskId, task.state, { now: d.now });
      const events = task.events.slice();
      if (task.state.agents[agentId]?.attempt !== attempt) {
        writer.apply({ type: 'StartSubagent', agentId, attempt, runnerId: d.runnerId });
        events.push(...(await writer.flush()));
      }
      writer.apply({ type: 'ClaimAgentStream', agentId, attempt, runnerId: d.runnerId });
      events.push(...(await writer.flush()));
      return { writer, events };
    });
  } catch (err) {
    if ((err as { code?: string }).code === 'stale_attempt') return null;
    throw err;
  }
}

/** Files created, modified and deleted, from the recorded tool results (so a takeover runner reports them too). Pure. */
export function collectFiles(events: readonly RecordedEvent[]): { created: string[]; modified: string[]; deleted: string[] } {
  // Each path's effect since the agent began, in the order its tools had them: a file created and
  // then deleted was never the task's; one deleted and then written again is changed, not new.
  const effect = new Map<string, 'created' | 'modified' | 'deleted'>();
  for (const e of events) {
    if (e.type !== 'ToolResultsRecorded') continue;
    for (const r of e.data.results) {
      for (const p of r.files?.created ?? []) {
        const was = effect.get(p);
        effect.set(p, was === undefined ? 'created' : was === 'deleted' ? 'modified' : was);
      }
      for (const p of r.files?.modified ?? []) if (effect.get(p) !== 'created') effect.set(p, 'modified');
      for (const p of r.files?.deleted ?? []) {
        if (effect.get(p) === 'created') effect.delete(p);
        else effect.set(p, 'deleted');
      }
    }
  }
  const of = (kind: 'created' | 'modified' | 'deleted') => [...effect].filter(([, k]) => k === kind).map(([p]) => p).sort();
  return { created: of('created'), modified: of('modified'), deleted: of('deleted') };
}
