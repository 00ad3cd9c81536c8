import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { AuthenticationError, CommandExitError, Sandbox as E2B, FileNotFoundError, InvalidArgumentError, NotFoundError, SandboxError, TimeoutError, type ConnectionOpts } from 'e2b';
import type pg from 'pg';
import { sandboxIdOf, SandboxOutageError, SandboxRefusedError, type CommandResult, type RunOptions, type Sandbox, type SandboxFiles, type SandboxProvider, type SandboxSpec, type TaskLiveness } from './provider.ts';
import { capture, shellQuote } from './confine.ts';
import { SandboxRegistry, type SandboxRow } from './registry.ts';
import { pathCharacterProblem } from '@baton/domain';
import { MAX_SKIPPED_REPORTED, resolveRelative, shownPath, textOf, unnameable, WorkspacePathError, type SkippedEntry, type WalkedFile } from './workspace.ts';

export interface E2BProviderOptions {
  pool: pg.Pool;
  /** Default: E2B_API_KEY (read by the SDK). */
  apiKey?: string;
  /** The template built by infra/e2b (default `baton-agent`). */
  template?: string;
  /**
   * A sandbox's time to live, counted from its create or resume (E2B's `timeout`: not an idle
   * time), after which E2B pauses it (default 10 minutes). Commands and file operations push it
   * on (`setTimeout`): a command's own time and this again, so a long job is not paused under it.
   */
  timeoutMs?: number;
  /**
   * How long a sandbox of this deployment that is not its agent's registered one (a create whose
   * answer was lost, a runner that died before recording it) is left before the sweep kills it
   * (default 30 minutes: far past any create still under way).
   */
  strayGraceMs?: number;
  /** Tests: a fake control plane and envd. */
  apiUrl?: string;
  sandboxUrl?: string;
  domain?: string;
}

/**
 * The environment variable every command runs with, a fresh id each: whatever it starts inherits
 * it — children, orphans whose parent has exited, daemons (`setsid`, a double fork) — and
 * `killMarked` finds them all by it (a walk of parent pids lost whatever outlived its parent, and
 * took seconds for a thousand processes).
 */
export const COMMAND_MARK = 'BATON_COMMAND_ID';

/**
 * A shell script that kills every process carrying `COMMAND_MARK=<mark>` (read from
 * /proc/<pid>/environ): each round stops what it finds (a stopped process forks nothing more), until
 * a round finds no more, then kills them all. bash, grep, cut and tr, nothing else.
 */
export const killMarked = (mark: string): string =>
  `m='${COMMAND_MARK}=${mark}'; seen=''; for _ in 1 2 3 4 5 6 7 8; do p=$(grep -lzx "$m" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\\n' ' '); [ -z "$p" ] && break; kill -STOP $p 2>/dev/null; [ "$p" = "$seen" ] && break; seen=$p; done; [ -n "$seen" ] && kill -KILL $seen 2>/dev/null; true`;

/** Where the agent's files live inside an E2B sandbox (the template creates it). */
export const E2B_WORKSPACE = '/home/user/workspace';

/**
 * E2B sandboxes (`E2B_API_KEY` set): one microVM per agent from a prebuilt template, created
 * with `lifecycle.onTimeout: 'pause'` so an idle one pauses instead of dying. The E2B sandbox
 * id is kept in the `sandboxes` table, so any runner replica reconnects to it (`connect`
 * resumes a paused one). Only the environment the agent's config names is passed in.
 */
export class E2BSandboxProvider implements SandboxProvider {
  readonly name = 'e2b';
  private readonly registry: SandboxRegistry;
  private readonly template: string;
  private readonly timeoutMs: number;
  private readonly strayGraceMs: number;
  private readonly conn: ConnectionOpts;
  /** Sandboxes of live tasks seen unregistered, since when (this process's clock): killed once seen so past strayGraceMs. */
  private readonly strays = new Map<string, number>();

  constructor(opts: E2BProviderOptions) {
    this.registry = new SandboxRegistry(opts.pool);
    this.template = opts.template ?? 'baton-agent';
    this.timeoutMs = opts.timeoutMs ?? 600_000;
    this.strayGraceMs = opts.strayGraceMs ?? 1_800_000;
    this.conn = {
      ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
      ...(opts.apiUrl ? { apiUrl: opts.apiUrl } : {}),
      ...(opts.sandboxUrl ? { sandboxUrl: opts.sandboxUrl } : {}),
      ...(opts.domain ? { domain: opts.domain } : {}),
    } as ConnectionOpts;
  }

  async open(spec: SandboxSpec): Promise<Sandbox> {
    const id = sandboxIdOf(spec.taskId, spec.agentId);
    const row = await this.registry.claim(id, spec.taskId, spec.agentId, this.name, spec.attempt);
    let sbx: E2B | null = null;
    if (row.externalId) {
      // Resumes it if paused; a sandbox E2B no longer has (404) is created afresh (its files are
      // gone: the runner rebuilds them from the log). Any other failure is not taken for "gone" —
      // a 500 or a timeout had swapped the agent's sandbox for an empty one and left the old one
      // paused for ever.
      sbx = await E2B.connect(row.externalId, { ...this.conn, timeoutMs: this.timeoutMs }).catch((err: unknown) => {
        if (err instanceof NotFoundError) return null;
        throw e2bOpenError(err, 'resume', this.template);
      });
    }
    if (!sbx) {
      const owner = await this.registry.owner();
      const made: E2B = await E2B.create(this.template, {
        ...this.conn,
        lifecycle: { onTimeout: 'pause' },
        timeoutMs: this.timeoutMs,
        // Whose it is too (deployment and namespace): the sweep lists its own sandboxes by them, and
        // finds one the registry never heard of (its create's answer lost, or the runner gone before recording it).
        // (The namespace only when it is not empty: how E2B keeps an empty value is not known.)
        metadata: { taskId: spec.taskId, agentId: spec.agentId, ...(owner ? { deployment: owner.deployment } : {}), ...(owner?.namespace ? { namespace: owner.namespace } : {}) },
        envs: spec.env,
        allowInternetAccess: spec.network,
      }).catch((err: unknown) => Promise.reject(e2bOpenError(err, 'create', this.template)));
      await this.registry.setExternalId(id, spec.attempt, made.sandboxId); // the template (infra/e2b) makes the workspace
      sbx = made;
    }
    return new E2BSandbox(id, sbx, spec, this.timeoutMs);
  }

  // Pause and kill are the job's last step: a failure once (a 500) had left the sandbox running
  // while its agent waited for a person — the job's redelivery finds the agent paused, nothing to
  // do. So each is tried a few times before the job fails with it.
  async pause(sandbox: Sandbox): Promise<void> {
    await tryAgain(() => (sandbox as E2BSandbox).sbx.pause());
    await this.registry.setState(sandbox.id, 'paused');
  }

  async kill(taskId: string, agentId: string): Promise<void> {
    const id = sandboxIdOf(taskId, agentId);
    const row = await this.registry.get(id);
    const external = row?.externalId;
    if (external && row.state !== 'killed') await tryAgain(() => E2B.kill(external, this.conn));
    if (row) await this.registry.killed(id);
  }

  /**
   * Two passes, each orphan on its own (one E2B will not kill now does not hold up the rest: it is
   * named, and tried at the next sweep). The registry's sandboxes of tasks no longer live; then
   * E2B's list of this deployment's sandboxes (tagged at create): one of a finished task, or one
   * of a live task that is not its agent's registered sandbox — seen so for strayGraceMs — is
   * killed. A task this deployment's log does not know is never touched.
   */
  async sweep(liveness: TaskLiveness): Promise<number> {
    let swept = 0;
    const failed: string[] = [];
    // Counted when something was there to kill (E2B's kill of a sandbox gone already says false).
    const kill = async (label: string, f: () => Promise<boolean>): Promise<void> => {
      try {
        if (await f()) swept++;
      } catch (err) {
        failed.push(`${label}: ${(err as Error).message}`);
      }
    };
    const rows = await this.registry.live(this.name);
    if (rows.length > 0) {
      const known = await liveness([...new Set(rows.map((r) => r.taskId))]);
      for (const r of rows) if (known.get(r.taskId) !== 'live') await kill(r.externalId ?? sandboxIdOf(r.taskId, r.agentId), () => this.kill(r.taskId, r.agentId).then(() => true));
    }
    // E2B's list failing is one more failure named, not one that hides the first pass's.
    const strays = await this.strayVerdicts(liveness).catch((err: unknown) => {
      failed.push(`listing this deployment's sandboxes: ${(err as Error).message}`);
      return [];
    });
    for (const id of strays) await kill(id, () => E2B.kill(id, this.conn));
    if (failed.length > 0) throw new Error(`${swept} orphaned sandboxes killed; ${failed.length} could not be (tried again at the next sweep): ${failed.join('; ')}`);
    return swept;
  }

  /** The sandboxes E2B lists for this deployment that are to be killed now. */
  private async strayVerdicts(liveness: TaskLiveness): Promise<string[]> {
    const owner = await this.registry.owner();
    if (!owner) return [];
    const listed: ListedSandbox[] = [];
    // Listed by the deployment; the namespace checked here (an empty one is not tagged).
    const pages = E2B.list({ ...this.conn, query: { metadata: { deployment: owner.deployment } } });
    while (pages.hasNext) {
      for (const s of await pages.nextItems()) {
        const { taskId, agentId } = s.metadata;
        if ((s.metadata.namespace ?? '') !== owner.namespace) continue;
        // Only what Baton's creates tag (a task id is a UUID): anything else under the tag is left alone.
        if (taskId && agentId && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(taskId)) listed.push({ sandboxId: s.sandboxId, taskId, agentId });
      }
    }
    const registered = await this.registry.byIds(listed.map((s) => sandboxIdOf(s.taskId, s.agentId)));
    const known = listed.length ? await liveness([...new Set(listed.map((s) => s.taskId))]) : new Map<string, 'live' | 'finished'>();
    const now = Date.now();
    const kill: string[] = [];
    const strays = new Set<string>();
    for (const s of listed) {
      const verdict = strayVerdict(s, registered.get(sandboxIdOf(s.taskId, s.agentId)), known.get(s.taskId));
      if (verdict === 'finished') kill.push(s.sandboxId);
      if (verdict !== 'stray') continue;
      strays.add(s.sandboxId);
      const since = this.strays.get(s.sandboxId) ?? now;
      this.strays.set(s.sandboxId, since);
      if (now - since >= this.strayGraceMs) kill.push(s.sandboxId);
    }
    for (const id of this.strays.keys()) if (!strays.has(id)) this.strays.delete(id);
    return kill;
  }
}

/** A sandbox E2B lists with this deployment's tag, and the agent it was made for. */
export interface ListedSandbox {
  sandboxId: string;
  taskId: string;
  agentId: string;
}

/**
 * What the sweep makes of a sandbox E2B lists for this deployment: `keep` — its agent's
 * registered sandbox, the task live, or a task this log does not know (never touched);
 * `finished` — its task is (kill it); `stray` — its task is live but its agent's registered
 * sandbox is another, killed or none: a create whose answer was lost, or one still under way (so
 * killed only once seen so for a while).
 */
export function strayVerdict(s: ListedSandbox, row: Pick<SandboxRow, 'externalId' | 'state'> | undefined, task: 'live' | 'finished' | undefined): 'keep' | 'finished' | 'stray' {
  if (task === undefined) return 'keep';
  if (task === 'finished') return 'finished';
  return row && row.externalId === s.sandboxId && row.state !== 'killed' ? 'keep' : 'stray';
}

/** `f`, tried again after 1 s and 3 s when it fails (E2B's API answering a 5xx or cut off once). */
async function tryAgain<T>(f: () => Promise<T>, delaysMs: readonly number[] = [1000, 3000]): Promise<T> {
  for (const delay of delaysMs) {
    try {
      return await f();
    } catch {
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  return f();
}

/**
 * What a failure of E2B's API to resume or create a sandbox means for the agent: refused for good
 * (`SandboxRefusedError`: the key, the template, a request E2B will not take — the agent fails
 * saying which setting) or not now (`SandboxOutageError`: 5xx, 429, a timeout, a cut connection —
 * the job is tried again).
 */
export function e2bOpenError(err: unknown, what: 'resume' | 'create', template: string): Error {
  const message = (err as Error | null)?.message ?? String(err);
  if (err instanceof AuthenticationError) return new SandboxRefusedError(`E2B refused the API key (E2B_API_KEY): ${message}`, { cause: err });
  if (err instanceof InvalidArgumentError) return new SandboxRefusedError(`E2B refused to ${what} the sandbox: ${message}`, { cause: err });
  const status = err instanceof SandboxError ? (err as SandboxError & { statusCode?: number }).statusCode : undefined;
  // Only a create E2B will never take is a refusal for good (a template it does not have, a
  // request it cannot read, a forbidden one); anything else on a resume — a 409 mid-pause — may
  // pass, and a refusal would have deleted the agent's sandbox with its files.
  if (what === 'create' && status !== undefined && [400, 403, 404, 422].includes(status)) {
    return new SandboxRefusedError(status === 404 ? `E2B has no template '${template}' (E2B_TEMPLATE; infra/e2b builds it): ${message}` : `E2B refused to create the sandbox: ${message}`, { cause: err });
  }
  return new SandboxOutageError(`E2B could not ${what} the sandbox: ${message}`, { cause: err });
}

class E2BSandbox implements Sandbox {
  readonly provider = 'e2b';
  readonly files: SandboxFiles;
  readonly id: string;
  readonly sbx: E2B;
  private readonly spec: SandboxSpec;
  private readonly timeoutMs: number;
  /** When E2B pauses the sandbox unless told otherwise (its create or resume set it). */
  private aliveUntil: number;
  constructor(id: string, sbx: E2B, spec: SandboxSpec, timeoutMs: number) {
    this.id = id;
    this.sbx = sbx;
    this.spec = spec;
    this.timeoutMs = timeoutMs;
    this.aliveUntil = Date.now() + timeoutMs;
    const abs = (rel: string): string => path.posix.join(E2B_WORKSPACE, ...resolveRelative(rel));
    const files: SandboxFiles = {
      readBytes: async (p, maxBytes = 50_000_000) => {
        const [read, info] = await Promise.all([sbx.files.read(abs(p), { format: 'bytes' }), sbx.files.getInfo(abs(p))]);
        const bytes = Buffer.from(read);
        return { bytes: bytes.subarray(0, maxBytes), size: bytes.length, mode: info.mode & 0o777 };
      },
      read: async (p, maxBytes = 1_000_000) => {
        const { bytes, size } = await this.files.readBytes(p, maxBytes);
        return textOf(bytes, size, maxBytes);
      },
      write: async (p, content, mode) => {
        const existed = await sbx.files.exists(abs(p));
        const data = typeof content === 'string' ? content : (new Uint8Array(content).buffer as ArrayBuffer);
        await sbx.files.write(abs(p), data);
        // envd's files API sets no mode (a new file is 0644): a command does, where one is asked for
        // that the file may not have already.
        if (mode !== undefined && (existed || (mode & 0o777) !== 0o644)) {
          const rel = resolveRelative(p).join('/');
          await sbx.commands.run(`chmod ${(mode & 0o777).toString(8)} -- ${shellQuote(rel)}`, { cwd: E2B_WORKSPACE, timeoutMs: 30_000 });
        }
        return existed ? 'modified' : 'created';
      },
      // envd removes with RemoveAll: a missing path is no error (older envds answering
      // not-found are treated the same). envd may resolve links first, so a link the agent made
      // can take its target with it — inside the agent's own VM, which is the sandbox here.
      remove: async (p) => {
        if (resolveRelative(p).length === 0) throw new WorkspacePathError(p, 'the workspace itself cannot be removed');
        await sbx.files.remove(abs(p)).catch((err: unknown) => {
          if (!(err instanceof FileNotFoundError)) throw err;
        });
      },
      list: async (p) => (await sbx.files.list(abs(p))).map((e) => (e.type === 'dir' ? `${e.name}/` : e.name)).sort(),
      walk: async (p = '.', limit = 10_000, opts = {}) => {
        const entries = (await sbx.files.list(abs(p), { depth: 64 })).map((e) => ({ ...e, rel: path.posix.relative(E2B_WORKSPACE, e.path) }));
        // A name no path can carry is left out with all under it, and said (the first of each such name).
        const skipped: SkippedEntry[] = [];
        for (const e of entries) {
          const parts = e.rel.split('/');
          if (parts.slice(0, -1).some((d) => opts.skipDirs?.has(d))) continue;
          const bad = parts.findIndex(unnameable);
          if (bad === parts.length - 1 && skipped.length < MAX_SKIPPED_REPORTED) skipped.push({ path: shownPath(e.rel), why: `${(pathCharacterProblem(parts[bad] ?? '') ?? '').replace(/^the path/, 'its name')}${e.type === 'dir' ? ', and it is a directory: nothing in it is kept' : ''}` });
        }
        const files: WalkedFile[] = entries
          .filter((e) => e.type === 'file')
          .filter((e) => !e.rel.split('/').some(unnameable) && !e.rel.split('/').slice(0, -1).some((d) => opts.skipDirs?.has(d)))
          .map((e) => ({ path: e.rel, size: e.size, mode: e.mode & 0o777, changedMs: e.modifiedTime ? new Date(e.modifiedTime).getTime() : 0 }))
          .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
        return { files: files.slice(0, limit), truncated: files.length > limit, skipped };
      },
    };
    // Each file operation keeps the sandbox alive for another `timeoutMs` (asked of E2B at most
    // every half of it): a job of many model turns outlived the time its resume had given.
    this.files = Object.fromEntries(Object.entries(files).map(([k, f]) => [k, (...a: unknown[]) => (void this.keepAlive(timeoutMs), (f as (...x: unknown[]) => unknown)(...a))])) as unknown as SandboxFiles;
  }

  private extending: Promise<void> | null = null;
  /** After a failed ask, none before this time (a slow or away control plane is not asked before every operation). */
  private askAfter = 0;

  /**
   * Ask E2B to keep the sandbox running `forMs` from now, unless it will for most of that
   * already: one ask at a time, of at most 5 s, waited for only by a command (a file operation
   * goes on beside it). A refusal is not the operation's failure: asked again a minute later.
   */
  private keepAlive(forMs: number): Promise<void> {
    const now = Date.now();
    if (now + forMs <= this.aliveUntil + this.timeoutMs / 2 || now < this.askAfter) return Promise.resolve();
    this.extending ??= this.sbx.setTimeout(forMs, { requestTimeoutMs: 5000 }).then(
      () => {
        this.aliveUntil = Date.now() + forMs;
        this.extending = null;
      },
      () => {
        this.askAfter = Date.now() + 60_000;
        this.extending = null;
      },
    );
    return this.extending;
  }

  async run(command: string, opts: RunOptions): Promise<CommandResult> {
    const started = Date.now();
    const cwd = path.posix.join(E2B_WORKSPACE, ...resolveRelative(opts.cwd ?? '.'));
    // Kept as the local provider keeps it: past 1 MB a stream's start and end (`capture`).
    const kept = (text: string) => {
      const c = capture();
      c.push(Buffer.from(text));
      return { text: c.text(), bytes: c.total() };
    };
    /** The result, once a kill under way is through (the next attempt had run beside what it left), bounded: its time counts. */
    const done = async (exitCode: number | null, stdout: string, stderr: string, timedOut: boolean): Promise<CommandResult> => {
      if (killing) await Promise.race([killing, new Promise((r) => setTimeout(r, 12_000).unref())]);
      const [out, err] = [kept(stdout), kept(stderr)];
      return { exitCode, stdout: out.text, stderr: err.text, timedOut, durationMs: Date.now() - started, stdoutBytes: out.bytes, stderrBytes: err.bytes };
    };
    // The command's own time and the usual time to live after it: a 10-minute command had its sandbox paused under it.
    await this.keepAlive(opts.timeoutMs + this.timeoutMs);
    opts.signal?.throwIfAborted();
    // Started in the background and killed by its pid when aborted or past its time: in envd a
    // command outlives the stream that started it, and an aborted one had gone on beside the
    // next attempt's (and was reported as timed out).
    const mark = randomUUID();
    const handle = await this.sbx.commands.run(command, { background: true, cwd, timeoutMs: opts.timeoutMs, envs: { ...this.spec.env, [COMMAND_MARK]: mark } });
    let stopped: 'aborted' | 'timed out' | null = null;
    /** The kill under way (awaited before the result goes back): its pid through envd, and every process carrying its mark. */
    let killing: Promise<unknown> | null = null;
    const killAll = (): Promise<unknown> => (killing ??= Promise.allSettled([handle.kill(), this.killMarked(mark)]));
    let given: () => void = () => {};
    // Killed: its output stream may stay open (a child holding it) — waited for 2 s more, then left.
    const givenUp = new Promise<'given up'>((resolve) => (given = () => void setTimeout(() => resolve('given up'), 2000)));
    const kill = (why: 'aborted' | 'timed out'): void => {
      if (stopped) return;
      stopped = why;
      void killAll();
      given();
    };
    const onAbort = (): void => kill('aborted');
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.signal?.aborted) onAbort();
    const timer = setTimeout(() => kill('timed out'), opts.timeoutMs);
    try {
      const r = await Promise.race([handle.wait(), givenUp]);
      if (r === 'given up') {
        void handle.disconnect().catch(() => undefined);
        return done(null, handle.stdout, handle.stderr, stopped === 'timed out');
      }
      return done(stopped ? null : r.exitCode, r.stdout, r.stderr, stopped === 'timed out');
    } catch (err) {
      if (err instanceof CommandExitError) return done(stopped ? null : err.exitCode, err.stdout, err.stderr, stopped === 'timed out');
      if (err instanceof TimeoutError) {
        kill('timed out');
        return done(null, handle.stdout, handle.stderr, stopped === 'timed out');
      }
      // Its stream broke (a cut connection): the command may run on in envd — killed, best effort, before the error goes up.
      void killAll();
      await done(null, '', '', false);
      throw err;
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Kill every process of a command (by its mark), tried again when envd does not take the kill
   * command (a 503, a timeout): a command's children (a test runner's workers, a server it
   * started) had gone on, holding a port, writing files beside the next attempt's.
   */
  private async killMarked(mark: string): Promise<void> {
    for (const wait of [0, 500, 1500]) {
      if (wait) await new Promise((r) => setTimeout(r, wait));
      const ok = await this.sbx.commands.run(killMarked(mark), { timeoutMs: 10_000 }).then(
        () => true,
        () => false,
      );
      if (ok) return;
    }
  }

  /** E2B keeps the VM's files itself; nothing to copy. */
  async sync(): Promise<void> {}
}
