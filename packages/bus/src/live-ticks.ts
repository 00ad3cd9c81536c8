import { z } from 'zod';

/**
 * Live ticks: the core-NATS messages that wake live views of tasks' steps (which then read
 * Postgres). A process sends the ids of the tasks whose steps it committed, many tasks to a
 * message, at most one message per `gapMs`: the first tick of a quiet process goes at the end of
 * its event-loop turn (with the turn's other ticks and sends), the ones that follow within the
 * gap after a send wait for its end and go together (at the end of that turn). A view therefore
 * sees every step, about `gapMs` late at worst (a timer: later on a busy event loop), and a
 * thousand runs stepping at once cost one send per gap instead of one per step (each a socket
 * write in the writer and a wake-up of the NATS server, whether or not anyone watches).
 */

/** At most this many task ids in one message (~40 bytes each, far below NATS's 1 MiB default payload limit). */
export const LIVE_TICK_IDS_PER_MESSAGE = 1000;

/** A live-ticks message: the ids of tasks whose steps were committed. */
export const LiveTicksPayload = z.array(z.uuid()).min(1);

export const encodeLiveTicks = (taskIds: readonly string[]): string => JSON.stringify(taskIds);

/** The task ids a live-ticks message names, or an error that says what is wrong with it. */
export function parseLiveTicks(data: Uint8Array): { ok: true; taskIds: string[] } | { ok: false; error: string } {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const parsed = LiveTicksPayload.safeParse(json);
  return parsed.success ? { ok: true, taskIds: parsed.data } : { ok: false, error: z.prettifyError(parsed.error) };
}

interface Pending {
  taskIds: Set<string>;
  /** Sends one message (the newest connection asked to tick this subject). */
  send: (taskIds: string[]) => void;
}

export class LiveTicks {
  /** Ticks still to send, by subject (one per namespace: tests share a process). */
  private readonly pending = new Map<string, Pending>();
  /** The gap after the last send: ticks asked for meanwhile wait for its end. */
  private window: NodeJS.Timeout | null = null;
  /** A send is queued for the end of the turn (`soon`). */
  private queued = false;
  private readonly gapMs: number;
  private readonly soon: (send: () => void) => void;

  /** `soon` runs a send at the end of the current turn (`sendSoon`: with the turn's other sends, in one socket write). */
  constructor(gapMs: number, soon: (send: () => void) => void) {
    this.gapMs = gapMs;
    this.soon = soon;
  }

  /** Ask for a tick of `taskId` on `subject`; `send` makes one message (called at the end of this turn or of the gap). */
  tick(subject: string, taskId: string, send: (taskIds: string[]) => void): void {
    const p = this.pending.get(subject);
    if (p) {
      p.taskIds.add(taskId);
      p.send = send;
    } else this.pending.set(subject, { taskIds: new Set([taskId]), send });
    if (!this.window) this.queue(); // else the gap's end sends it
  }

  /** Send every tick now and close the gap (before a connection is drained: a view would wait for its backstop poll). */
  flush(): void {
    if (this.window) clearTimeout(this.window);
    this.window = null;
    this.sendPending();
  }

  /** Task ids with a tick still to send (for tests and diagnostics). */
  get due(): number {
    let n = 0;
    for (const p of this.pending.values()) n += p.taskIds.size;
    return n;
  }

  private queue(): void {
    if (this.queued) return;
    this.queued = true;
    this.soon(this.sendQueued);
  }

  /** The queued send: what is pending goes, and a gap opens (ticks asked for within it wait for its end). */
  private readonly sendQueued = (): void => {
    this.queued = false;
    if (this.pending.size === 0) return; // flushed meanwhile
    this.sendPending();
    this.window = setTimeout(this.gapEnded, this.gapMs); // none is open: a send is queued only while none is
    this.window.unref(); // a process that exits loses at most a gap's ticks: live views also poll (drainNats flushes them)
  };

  private readonly gapEnded = (): void => {
    this.window = null;
    if (this.pending.size > 0) this.queue(); // quiet: the next tick goes with its turn
  };

  private sendPending(): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const { taskIds, send } of pending) {
      const ids = [...taskIds];
      for (let i = 0; i < ids.length; i += LIVE_TICK_IDS_PER_MESSAGE) {
        try {
          send(ids.slice(i, i + LIVE_TICK_IDS_PER_MESSAGE));
        } catch {
          // closed or draining connection: live views poll as a backstop
        }
      }
    }
  }
}
