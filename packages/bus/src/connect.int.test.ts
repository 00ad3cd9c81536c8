import { randomUUID } from 'node:crypto';
import { recordAs, taskStreamId } from '@baton/domain';
import pino from 'pino';
import { privateNats, stackTest, waitFor, type PrivateNats } from '@baton/testing';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { sendSoon } from './coalesce.ts';
import { connectNats, drainNats, natsAnswers } from './connect.ts';
import { LIVE_TICK_GAP_MS, liveTicksDue, publishWakeUps } from './messages.ts';
import { busNames } from './subjects.ts';

const silent = pino({ level: 'silent' });

/** A NATS server of the test's own is stopped and started under a connection made by connectNats. */
describe('connectNats', () => {
  let server: PrivateNats | undefined;
  afterEach(async () => {
    await server?.destroy();
    server = undefined;
  });

  it('keeps reconnecting for as long as NATS is away (longer than the client\'s default 10 attempts), then works again', async () => {
    server = await privateNats();
    const nc = await connectNats(server.url, 'test', silent, { reconnectTimeWaitMs: 50, onClosed: () => {} });
    try {
      const statuses: string[] = [];
      void (async () => {
        for await (const s of nc.status()) statuses.push(s.type);
      })();
      const sub = nc.subscribe('ping', { callback: (_err, m) => void m.respond('pong') });
      expect((await nc.request('ping', '', { timeout: 2000 })).string()).toBe('pong');
      await natsAnswers(nc); // readiness: the server answers
      await server.stop();
      await waitFor(() => statuses.includes('disconnect'), { what: 'the disconnect to be seen' });
      // Reconnecting is not closed: readiness asks the server, which does not answer.
      expect(nc.isClosed()).toBe(false);
      await expect(natsAnswers(nc, 300)).rejects.toThrow(/disconnected|no answer to a ping within 300 ms/);
      // Well past 10 attempts 50 ms apart (the default limit, which would close the connection).
      await waitFor(() => statuses.filter((s) => s === 'reconnecting').length >= 25, { timeoutMs: 20_000, what: '25 reconnect attempts' });
      expect(nc.isClosed()).toBe(false);
      await server.start();
      await waitFor(() => statuses.includes('reconnect'), { timeoutMs: 20_000, what: 'the reconnect' });
      expect((await nc.request('ping', '', { timeout: 2000 })).string()).toBe('pong'); // the subscription came back with it
      sub.unsubscribe();
    } finally {
      await nc.close();
    }
  });

  it('a connection the server closes for good (it now refuses our credentials) is handed to onClosed, not left dead', async () => {
    server = await privateNats();
    const closed: Error[] = [];
    const nc = await connectNats(server.url, 'test', silent, { reconnectTimeWaitMs: 50, onClosed: (err) => closed.push(err) });
    await server.stop();
    await server.start(['--user', 'someone', '--pass', 'else']);
    await waitFor(() => closed.length > 0, { timeoutMs: 20_000, what: 'onClosed to be called' });
    expect(nc.isClosed()).toBe(true);
    expect(closed[0]?.message).toMatch(/authorization/i);
  });

  it('a drained or closed connection is not reported', async () => {
    server = await privateNats();
    const closed: Error[] = [];
    const nc = await connectNats(server.url, 'test', silent, { onClosed: (err) => closed.push(err) });
    await nc.drain();
    await nc.closed();
    await new Promise((r) => setImmediate(r));
    expect(closed).toEqual([]);
  });
});

describe('drainNats', () => {
  stackTest('sends what sendSoon still holds and the live ticks still due before the drain begins (nothing queued is lost)', async ({ nats }) => {
    const subject = `${nats.namespace}.drain-test`;
    const got: string[] = [];
    const sub = nats.nc.subscribe(subject, { callback: (_err, m) => void got.push(m.string()) });
    await nats.nc.flush();
    const names = busNames(nats.namespace);
    const ticks: string[][] = [];
    const tickSub = nats.nc.subscribe(names.liveTicks, { callback: (_err, m) => void ticks.push(JSON.parse(m.string()) as string[]) });
    await nats.nc.flush();
    const nc = await connect({ servers: nats.url });
    // Steps of two tasks, a turn apart: the first's tick goes with its turn and opens a gap; the
    // second's waits for the gap's end, which drainNats does not wait for. (Should this process
    // stall past the gap between the two, the second goes with its turn too: try again.)
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
    const step = (taskId: string): void => {
      const e = { id: randomUUID(), type: 'ModelTurnRecorded' as const, data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'text' as const, text: 't' }], stopReason: 'end_turn', usage, offline: true, durationMs: 0 } };
      publishWakeUps(nc, names, [recordAs(e, { taskId, streamId: taskStreamId(taskId), version: 1, position: 1n, recordedAt: new Date() })]);
    };
    let taskIds: string[] = [];
    for (let attempt = 0; attempt < 20; attempt++) {
      // After a failed attempt, past its gap (this timer is set after the gap's, for longer: it fires after it).
      if (attempt > 0) await new Promise((r) => setTimeout(r, 2 * LIVE_TICK_GAP_MS));
      taskIds = [randomUUID(), randomUUID()];
      step(taskIds[0]!);
      await new Promise((r) => setImmediate(r)); // the end of the turn: sent
      step(taskIds[1]!);
      await new Promise((r) => setImmediate(r));
      if (liveTicksDue() === 1) break;
    }
    expect(liveTicksDue()).toBe(1);
    sendSoon.soon(() => nc.publish(subject, 'queued'));
    await drainNats(nc);
    await waitFor(async () => (await nats.nc.flush(), got.length === 1 && ticks.some((t) => t.includes(taskIds[1]!))), { what: 'the queued message and the tick still due' });
    expect(ticks.slice(-2)).toEqual([[taskIds[0]], [taskIds[1]]]);
    sub.unsubscribe();
    tickSub.unsubscribe();
    expect(got).toEqual(['queued']);
  });
});
