import type { ServerResponse } from 'node:http';
import { configVersion, verifyRun } from '@baton/agents';
import { EVENT_TYPES, isStepEvent, own, STEP_EVENT_TYPES, TERMINAL_EVENT_TYPES, type EventType, type RecordedEvent } from '@baton/domain';
import { HEARTBEAT_HEADER, publicEventView, toEventView, toTaskView, type EventView } from '@baton/api';
import type { RelayedEvent } from '@baton/bus';
import { comesBefore, listTasks, sameCursor, START, type LogCursor } from '@baton/event-store';
import { setBounded } from '@baton/runtime';
import type { ZodTypeProvider } from '@fastify/type-provider-zod';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { keyIndex } from '../api-keys.ts';
import type { GatewayDeps } from '../deps.ts';
import { HttpError, notFound, SECURITY_HEADERS } from '../errors.ts';
import { EventsHeaders, EventsQuery, ListTasksQuery, NoBody, AtQuery, TaskIdParams, VerifyQuery } from './schemas.ts';
import { loadVisibleTask, visibleStateAt } from './tasks.ts';

const BATCH = 500;

/** An event as the API shows it (publicEventView). */
const eventView = (e: RecordedEvent): EventView => publicEventView(toEventView(e));

/** One event as an SSE frame. */
const frame = (view: EventView): string => `id: ${view.position}\nevent: ${view.type}\ndata: ${JSON.stringify(view)}\n\n`;

/** Relayed events a stream keeps between two reads, at most (more: it reads instead). */
const MAX_RELAYED = 64;

/** The most of a stream's frames written to its socket at once; more waits until the client has taken that. */
const SSE_PIECE_BYTES = 64 * 1024;

/** Retry-After of a stream refused for a cap (a slot frees when any stream ends). */
const STREAM_RETRY_AFTER_S = 5;

/**
 * A task-list stream's look back past its previous sweep: a change committed this long after the
 * time its writer stamped on it (a slow commit, another host's clock) is still found by a sweep.
 */
const LIST_SWEEP_OVERLAP_MS = 30_000;
/** Tasks a task-list stream remembers having shown (the version of each), at most; one forgotten may be shown again, never missed. */
const LIST_SHOWN_MAX = 10_000;
/** Task ids a task-list stream collects between two reads, at most; more, and it sweeps instead. */
const LIST_PENDING_MAX = 1_000;
/** A list stream's sweep reads at most this many tasks per statement (it pages through more). */
const LIST_SWEEP_PAGE = 200;
/**
 * How often a list stream sweeps, in heartbeats, while NATS is connected (a wake-up is then
 * rarely lost). A sweep reads the tenant's tasks by `updated_at`, which has no index on purpose
 * (every step updates it: an index would end the `tasks` row's in-place updates), so it goes
 * through the tenant's rows: every minute by default, not every heartbeat.
 */
const LIST_SWEEP_HEARTBEATS = 4;
/** …and at most this far apart while NATS is away (every wake-up may be lost then). */
const LIST_SWEEP_OFFLINE_MS = 5_000;

/**
 * A stream loop's wait: until it is woken or `ms` pass. When `ready()` already holds (a wake-up
 * came while the loop was busy) it goes on at once; else `arm` hands the stream the function that
 * wakes it, and takes it back (null) once awake.
 */
async function sleepUntilWoken(ready: () => boolean, ms: number, arm: (wake: (() => void) | null) => void): Promise<'event' | 'timer'> {
  let timer: NodeJS.Timeout | undefined;
  const by = await new Promise<'event' | 'timer'>((resolve) => {
    if (ready()) return resolve('event');
    arm(() => resolve('event'));
    timer = setTimeout(() => resolve('timer'), ms);
    timer.unref();
  });
  clearTimeout(timer);
  arm(null);
  return by;
}

export const eventRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const streams = new Set<{ tenant: string; end: (reason: 'shutdown') => void }>();
  const keysNow = keyIndex(d.apiKeys);
  /** A stream opened with a key that has since been revoked is cut (at its next heartbeat): a leaked key's open streams went on showing the tenant's tasks. */
  const revoked = (actor: string): boolean => actor.startsWith('key:') && !keysNow().actors.has(actor); // not the open API's anonymous
  const { ssePerTenant, sseConnections, sseStallMs } = d.limits;
  d.metrics.onScrape(() => d.metrics.sseConnections.set(streams.size));
  const hiddenReads = (): void => d.metrics.sseHiddenReads.inc();

  // End every SSE stream before the server closes, so clients reconnect elsewhere at once.
  app.addHook('preClose', async () => {
    for (const s of streams) s.end('shutdown');
  });

  /** Where to resume: the event with this position (Last-Event-ID / ?after=) in commit order. */
  const resumeCursor = async (taskId: string, after: number | undefined, field: string): Promise<LogCursor> => {
    if (after === undefined || after === 0) return START;
    const c = await d.store.cursorOf(taskId, BigInt(after));
    if (!c) throw new HttpError(400, 'validation_error', `${field}: no event at position ${after} in this task`, [{ field, message: 'unknown position' }]);
    return c;
  };

  /** A new stream for this tenant would go over a cap: 429 before it starts. */
  const checkStreamCaps = (tenant: string): void => {
    const refuse = (message: string) => new HttpError(429, 'too_many_streams', `${message}; close one or retry later`, undefined, { 'retry-after': String(STREAM_RETRY_AFTER_S) });
    if (streams.size >= sseConnections) throw refuse(`this gateway serves at most ${sseConnections} event streams`);
    let mine = 0;
    for (const s of streams) if (s.tenant === tenant) mine++;
    if (mine >= ssePerTenant) throw refuse(`at most ${ssePerTenant} open event streams per tenant`);
  };

  /**
   * An SSE response of this route: its head, a comment heartbeat, its slot among the streams (the
   * caps; a shutdown ends it), ended when the client goes. `send` writes frames and waits until
   * the client has taken them (the socket drained): a loop never reads on for a client that is
   * not reading, and a client that takes nothing for `sseStallMs` is cut (`stalled`) — it held a
   * slot, and what was written for it piled up in memory. `end(reason)` writes what the client
   * needs to know — `shutdown`: reconnect; `final`: the task is over, stop — and calls `woken` so
   * the stream's loop sees it. `run` runs that loop, ends the stream if it fails, and frees the
   * heartbeat, the slot and what `release` lets go of, however it ends.
   */
  function openStream(req: FastifyRequest, reply: { raw: ServerResponse }, woken: () => void) {
    const res = reply.raw;
    // The heartbeat's interval said: a client that hears nothing for three of them takes the connection for dead and reopens it.
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no', [HEARTBEAT_HEADER]: String(d.sseHeartbeatMs), ...SECURITY_HEADERS });
    // A heartbeat only where the client keeps up: behind a full buffer it says nothing new. Its key revoked: the stream ends.
    const heartbeat = setInterval(() => {
      if (revoked(req.actor)) {
        req.log.info({ actor: req.actor }, 'SSE stream of a revoked API key: cut');
        stream.end('revoked');
      } else if (!res.writableNeedDrain) res.write(': heartbeat\n\n');
    }, d.sseHeartbeatMs);
    const stream = {
      res,
      tenant: req.tenant,
      closed: false,
      async send(chunk: string): Promise<void> {
        if (stream.closed) return;
        // A large chunk (a read of a long history) goes in pieces, each taken before the next: a
        // client that reads slowly but on and on takes a piece within sseStallMs and is waited for.
        if (chunk.length <= SSE_PIECE_BYTES / 3) return stream.drained(res.write(chunk));
        const bytes = Buffer.from(chunk);
        for (let at = 0; at < bytes.length && !stream.closed; at += SSE_PIECE_BYTES) await stream.drained(res.write(bytes.subarray(at, at + SSE_PIECE_BYTES)));
      },
      /** After a write: at once if the socket took it (`taken`), else once it drains — or the client is cut when it takes nothing for sseStallMs. */
      async drained(taken: boolean): Promise<void> {
        if (taken || stream.closed) return;
        await new Promise<void>((resolve) => {
          const done = (): void => {
            clearTimeout(stall);
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          const stall = setTimeout(() => {
            req.log.info({ stalledMs: sseStallMs, buffered: res.writableLength }, 'SSE client took nothing of its stream: cut');
            stream.end('stalled');
            done();
          }, sseStallMs);
          res.on('drain', done);
          res.on('close', done);
        });
      },
      end(reason: 'client' | 'shutdown' | 'final' | 'error' | 'stalled' | 'revoked'): void {
        if (stream.closed) return;
        stream.closed = true;
        clearInterval(heartbeat); // nothing written after the end
        if (reason === 'shutdown') res.write('event: shutdown\ndata: {}\n\n');
        // The task is over: a client stops here instead of reconnecting (a resumed stream past the final event ends so at once).
        else if (reason === 'final') res.write('event: end\ndata: {"reason":"final"}\n\n');
        // A client that reads nothing would never take the end either: the connection goes, and what waited for it.
        if (reason === 'stalled') res.destroy();
        else res.end();
        woken();
      },
      run(loop: () => Promise<void>, release: () => void, context: Record<string, unknown>): void {
        loop()
          .catch((err: unknown) => {
            req.log.warn({ err, ...context }, 'SSE stream failed');
            stream.end('error');
          })
          .finally(() => {
            clearInterval(heartbeat);
            release();
            streams.delete(stream);
          });
      },
    };
    streams.add(stream);
    req.raw.on('close', () => stream.end('client'));
    return stream;
  }

  r.get('/v1/tasks', { schema: { querystring: ListTasksQuery, tags: ['tasks'], summary: "List tasks (JSON), or follow your tasks' changes (SSE with Accept: text/event-stream)" } }, async (req, reply) => {
    const q = req.query;
    if (!(req.headers.accept ?? '').includes('text/event-stream')) {
      return listTasks(d.kysely, { tenantId: req.tenant, status: q.status, team: q.team, search: q.search, limit: q.limit, cursor: q.cursor, updatedAfter: q.updatedAfter, forkedFrom: q.forkedFrom, ...(q.stuck === 'true' ? { stuckAfterMs: d.limits.stuckAfterMs } : {}) });
    }
    // A stream follows changes from now on, each with the task's whole summary: a page, a time, a
    // status or a search to filter by are the JSON list's (a task's status changes; the client
    // sees it, and the prompt, in each summary: matchesSearch).
    // `limit` has a default: whether the client sent it is in the URL itself.
    const sent = new URLSearchParams(req.url.split('?')[1] ?? '');
    const refused = (['status', 'cursor', 'updatedAfter', 'stuck', 'search', 'forkedFrom', 'limit'] as const).filter((f) => (f === 'limit' ? sent.has('limit') : q[f] !== undefined));
    if (refused.length > 0) throw new HttpError(400, 'validation_error', refused.map((f) => `query.${f}: not with Accept: text/event-stream (a stream sends every change of your tasks, each with its status; filter by team only)`).join('; '), refused.map((f) => ({ field: `query.${f}`, message: 'not with Accept: text/event-stream' })));
    checkStreamCaps(req.tenant);
    reply.hijack();
    return streamTaskChanges(req, reply, q.team);
  });

  /**
   * The changes of a tenant's tasks (of one team, or all), each as the task's list summary
   * (`event: task`), from the moment the stream says `ready` on: a client that loads the list
   * after `ready` misses nothing. A relayed transition of any task wakes it (the hub's
   * `watchAll`); it then reads the `tasks` rows of the tasks that moved, and shows those whose
   * version it has not shown yet. A sweep of what changed since the last one (looking
   * LIST_SWEEP_OVERLAP_MS further back; the first, that far before the stream opened) is the
   * safety net for a wake-up lost on the way: every LIST_SWEEP_HEARTBEATS heartbeats (more often
   * while NATS is away), however often wake-ups come.
   */
  function streamTaskChanges(req: FastifyRequest, reply: { raw: ServerResponse }, team: string | undefined): void {
    const tenant = req.tenant;
    let wake: (() => void) | null = null;
    const stream = openStream(req, reply, () => wake?.());
    const res = stream.res;
    let sweptAt = d.now().getTime();
    let pending = new Set<string>();
    let sweepNeeded = false;
    /** Version shown, by task. */
    const shownVersion = new Map<string, number>();
    // Listening before `ready` goes out: a change the client's list load cannot see yet still comes.
    const unwatch = d.hub.watchAll((taskId) => {
      const known = d.tenants.get(taskId);
      if (known !== undefined && known !== tenant) return; // another tenant's
      if (pending.size >= LIST_PENDING_MAX) sweepNeeded = true;
      else pending.add(taskId);
      wake?.();
    });
    res.write('retry: 2000\n\nevent: ready\ndata: {}\n\n');

    const sweepEvery = (): number => (d.hub.connected ? LIST_SWEEP_HEARTBEATS * d.sseHeartbeatMs : Math.min(d.sseHeartbeatMs, LIST_SWEEP_OFFLINE_MS));

    const show = async (items: Awaited<ReturnType<typeof listTasks>>['items']): Promise<void> => {
      let frames = '';
      for (const t of items) {
        if ((shownVersion.get(t.id) ?? -1) >= t.version) continue;
        setBounded(shownVersion, t.id, t.version, LIST_SHOWN_MAX);
        frames += `event: task\ndata: ${JSON.stringify(t)}\n\n`;
      }
      if (frames) await stream.send(frames);
    };

    const loop = async (): Promise<void> => {
      while (!stream.closed) {
        if (pending.size > 0) {
          const ids = [...pending];
          pending = new Set();
          const page = await listTasks(d.kysely, { tenantId: tenant, team, ids, limit: ids.length });
          if (stream.closed) return;
          for (const t of page.items) d.tenants.remember(t.id, tenant);
          await show(page.items);
        }
        if (sweepNeeded || d.now().getTime() - sweptAt >= sweepEvery()) {
          sweepNeeded = false;
          const startedAt = d.now().getTime();
          const since = new Date(sweptAt - LIST_SWEEP_OVERLAP_MS).toISOString();
          for (let cursor: string | undefined; ; ) {
            const page = await listTasks(d.kysely, { tenantId: tenant, team, updatedAfter: since, limit: LIST_SWEEP_PAGE, cursor });
            if (stream.closed) return;
            await show(page.items);
            if (!page.nextCursor) break;
            cursor = page.nextCursor;
          }
          sweptAt = startedAt;
        }
        if (pending.size > 0 || sweepNeeded) continue;
        const wait = Math.max(1, sweptAt + sweepEvery() - d.now().getTime());
        const by = await sleepUntilWoken(() => pending.size > 0 || sweepNeeded || stream.closed, wait, (w) => (wake = w));
        if (by === 'timer') sweepNeeded = true;
      }
    };
    stream.run(loop, unwatch, { list: tenant });
  }

  r.get('/v1/tasks/:id/events', { schema: { params: TaskIdParams, querystring: EventsQuery, headers: EventsHeaders, tags: ['events'], summary: 'Events of a task (JSON, or SSE with Accept: text/event-stream); ?steps=false: transitions only; ?type=A,B: only those types (JSON only)' } }, async (req, reply) => {
    const taskId = req.params.id;
    let tenant = d.tenants.get(taskId);
    if (tenant === undefined) {
      tenant = (await d.kysely.selectFrom('tasks').select('tenant_id').where('id', '=', taskId).executeTakeFirst())?.tenant_id;
      if (tenant !== undefined) d.tenants.remember(taskId, tenant);
    }
    if (tenant !== req.tenant) throw notFound(`task ${taskId}`);
    const wantsSse = (req.headers.accept ?? '').includes('text/event-stream');
    // SSE resumes after Last-Event-ID (what EventSource sends on reconnecting), else after ?after=.
    const lastEventId = wantsSse ? req.headers['last-event-id'] : undefined;
    const after = lastEventId ?? req.query.after;
    const cursor = await resumeCursor(taskId, after, lastEventId !== undefined ? 'headers.last-event-id' : 'query.after');
    if (!wantsSse) {
      // A snapshot of what is committed now, by position. Tailing without gaps is SSE's job.
      // (?type= is read as the types to leave out: no other statement, no other plan.)
      const only = req.query.type;
      if (only && !req.query.steps && only.every(isStepEvent)) throw new HttpError(400, 'validation_error', `query.type: ${only.join(', ')} ${only.length === 1 ? 'is a step' : 'are steps'}, which steps=false leaves out: ask for ${only.length === 1 ? 'it' : 'them'} without steps=false`);
      const skip = only ? EVENT_TYPES.filter((t) => !only.includes(t) || (!req.query.steps && isStepEvent(t))) : req.query.steps ? [] : STEP_EVENT_TYPES;
      const items = await d.store.readTaskPage(taskId, BigInt(after ?? 0), req.query.limit, skip);
      // `next`: a full page may have more after it (pass it as ?after=); null: this page is the last of what is committed now.
      return { items: items.map(eventView), next: items.length === req.query.limit ? Number(items.at(-1)?.position) : null };
    }
    if (req.query.type) throw new HttpError(400, 'validation_error', 'query.type: filters the JSON list only; a stream takes steps=false (transitions only)');
    checkStreamCaps(req.tenant); // and at once (nothing awaited) the stream takes its slot
    reply.hijack();
    return streamEvents(req, reply, taskId, cursor, req.query.steps);
  });

  /**
   * A gap-free tail of the task in commit order; `steps` false leaves out model turns and tool
   * results (and is not woken by them). It reads Postgres from its cursor when woken, except for
   * a relayed event whose previous event (by the relay's word) is where the stream stands: that
   * one is shown as it came (a stream of transitions then reads once, when it opens).
   */
  function streamEvents(req: FastifyRequest, reply: { raw: ServerResponse }, taskId: string, start: LogCursor, steps: boolean): void {
    let wake: (() => void) | null = null;
    const stream = openStream(req, reply, () => wake?.());
    // The head and the reconnect delay go out with the first read's events, in the same socket
    // write (Node sends a response's head with its first write); after that read, whatever it found.
    let preamble = 'retry: 2000\n\n';
    let cursor = start;
    let readNeeded = true; // something moved that only a read shows
    /** Relayed events that came since the last read began, in arrival order. */
    let relayed: RelayedEvent[] = [];
    const unregister = d.hub.register(taskId, (e) => {
      if (e && relayed.length < MAX_RELAYED) relayed.push(e);
      else readNeeded = true;
      wake?.();
    }, { steps });
    const skipTypes = steps ? [] : STEP_EVENT_TYPES;

    const loop = async (): Promise<void> => {
      let finalSeen = false;
      // Read from the start, the final event (if any) comes in the reads themselves; only a
      // stream resumed after some event may already be past it.
      let finalChecked = start === START;
      let hidden = false;
      let hiddenDelay = 2;
      while (!stream.closed) {
        if (readNeeded) {
          readNeeded = false;
          relayed = []; // the read shows them, or says rows are still hidden
          const read = await d.store.readTaskAfter(taskId, cursor, BATCH, skipTypes);
          if (stream.closed) return;
          hidden = read.hidden;
          if (hidden) hiddenReads();
          // A read's events in one write: one chunk, one socket write. (`res.cork()` would not do:
          // on uncork a ServerResponse sends the chunk's size, each part and its end as separate
          // socket writes — a system call each.)
          let frames = '';
          for (const { event, cursor: c } of read.events) {
            frames += frame(eventView(event));
            cursor = c;
            if (TERMINAL_EVENT_TYPES.has(event.type)) finalSeen = true;
          }
          if (preamble || frames) await stream.send(preamble + frames);
          preamble = '';
          if (read.events.length === BATCH) {
            readNeeded = true;
            continue;
          }
        }
        if (finalSeen) return stream.end('final');
        // What came since the read began: shown already, skipped; the next event after this
        // stream's cursor by the relay's word, shown as it came; anything else, read. (Only
        // without steps: the link says nothing of the steps before the event.)
        for (const e of relayed.splice(0)) {
          if (!comesBefore(cursor, e.cursor)) continue;
          const view = !steps && e.prev && sameCursor(e.prev, cursor) ? e.event() : null;
          if (!view || view.taskId !== taskId) {
            readNeeded = true;
            break;
          }
          await stream.send(frame(publicEventView(view)));
          cursor = e.cursor;
          if (TERMINAL_EVENT_TYPES.has(view.type as EventType)) finalSeen = true;
        }
        if (finalSeen) return stream.end('final');
        if (readNeeded) continue;
        // Reconnected after the final event (Last-Event-ID at or past it): nothing more will come.
        if (!finalChecked) {
          finalChecked = true;
          if (await d.store.finalEventSent(taskId, cursor, [...TERMINAL_EVENT_TYPES])) return stream.end('final');
        }
        // Committed rows an older open transaction still hides: look again soon (a wake-up may
        // have come before they became visible). Else wait for a wake-up from NATS; poll slowly
        // as a safety net (and faster while NATS is away).
        const wait = hidden ? hiddenDelay : d.hub.connected ? d.sseHeartbeatMs : 1000;
        hiddenDelay = hidden ? Math.min(hiddenDelay * 2, 250) : 2;
        // A wake-up that came while this loop was not waiting (the final-event check above is
        // awaited) is not lost: it goes on at once instead of sleeping until the backstop.
        const by = await sleepUntilWoken(() => readNeeded || relayed.length > 0 || stream.closed, wait, (w) => (wake = w));
        if (by === 'timer') readNeeded = true;
      }
    };
    stream.run(loop, unregister, { taskId });
  }

  r.get('/v1/tasks/:id/state', { schema: { params: TaskIdParams, querystring: AtQuery, tags: ['events'], summary: 'The task as it was after a version of its stream' } }, async (req) => {
    return toTaskView(await visibleStateAt(d, req, req.params.id, req.query.at));
  });

  // The determinism check: the current code against the run's recorded model outputs and tool results (docs/verify.md),
  // with the team configuration the run was pinned to (a code change shows, not a config change) or, asked, the one loaded now.
  r.post('/v1/tasks/:id/verify', { schema: { params: TaskIdParams, querystring: VerifyQuery, body: NoBody, tags: ['events'], summary: "Re-run the code's decisions against the recorded run: the first divergence, or identical (?config=pinned: with the run's own team configuration, the default; current: with the one loaded now)" } }, async (req) => {
    const { state, events } = await loadVisibleTask(d, req, req.params.id);
    const pinned = state.lead?.configVersion ?? null;
    const team = req.query.config === 'pinned' && pinned ? await d.catalog.resolve(state.team, pinned) : own(d.teams, state.team);
    if (!team) throw new HttpError(422, 'unknown_team', `the task's team '${state.team}' is not configured here; configured: ${Object.keys(d.teams).join(', ')}`);
    const version = configVersion(team);
    // Asked for the run's own but it is not recorded here (older data, another deployment): said, not hidden.
    const note = req.query.config === 'pinned' && version !== pinned ? { note: pinned ? `the run's configuration (${pinned}) is not recorded here: checked with the current one` : 'the run never started: checked with the current configuration' } : {};
    // The run's own configuration, when recorded here: a refusal it made that `team` would not make shows too.
    const runs = version === pinned ? team : pinned ? await d.catalog.resolve(state.team, pinned) : undefined;
    const recorded = runs && configVersion(runs) === pinned ? runs : null;
    // `version`: the configuration checked with; `pinnedVersion`: the run's own (the same: the run was checked with its own).
    return { ...verifyRun(events, team, recorded), config: { version, pinnedVersion: pinned, ...note } };
  });
};
