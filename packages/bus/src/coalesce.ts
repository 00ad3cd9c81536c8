/**
 * Sends made in one turn of the event loop, sent together.
 *
 * nats.js writes its outbound buffer to the socket once per microtask checkpoint, so sends
 * made in one synchronous block share a write, but sends made from different I/O callbacks
 * (one handler finishing after its Postgres reply, another after its own) each cost a socket
 * write — on a small VM a loopback write costs 0.1–0.2 ms of CPU, and each wakes the NATS
 * server once more. `soon(send)` queues the send and runs every queued one in a single
 * `setImmediate` (the check phase, right after the I/O callbacks of the same turn): one write
 * for all of them, with no timer and no added latency beyond the current turn.
 *
 * Only for sends whose loss is harmless or recovered: acks (an unsent ack is a redelivery) and
 * fast-path wake-ups (the relay publishes the same messages durably). A send that throws (the
 * connection closed meanwhile) is dropped; the others still go.
 */
export class Coalescer {
  private queue: (() => void)[] = [];
  private scheduled: NodeJS.Immediate | null = null;

  readonly soon = (send: () => void): void => {
    this.queue.push(send);
    this.scheduled ??= setImmediate(this.flush);
  };

  /** Send whatever is queued now (before a connection is drained or closed). */
  readonly flush = (): void => {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    const queue = this.queue;
    if (queue.length === 0) return;
    this.queue = [];
    for (const send of queue) {
      try {
        send();
      } catch {
        // closed or draining connection: see above, the loss is recovered elsewhere
      }
    }
  };
}

/** The process's coalescer: every send through it shares the turn's write. */
export const sendSoon = new Coalescer();
