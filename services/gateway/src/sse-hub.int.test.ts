import { randomUUID } from 'node:crypto';
import { busNames } from '@baton/bus';
import { silentLogger } from '@baton/runtime';
import { stackTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { SseHub } from './sse-hub.ts';

describe('SseHub', () => {
  test('NATS delivers only what watched streams need: transitions of watched tasks, and steps\' live ticks only to streams that show steps', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const hub = new SseHub(names, silentLogger());
    hub.attach(nats.nc);
    // Everything published before a flush has been delivered to this connection when it returns.
    const received = async (): Promise<number> => (await nats.nc.flush(), nats.nc.stats().inMsgs);
    const task = randomUUID();
    const woke: string[] = [];
    const offTransitions = hub.register(task, () => woke.push('transitions'), { steps: false });
    let before = await received();
    nats.nc.publish(names.liveSubject(task)); // a step of a task watched for transitions only
    nats.nc.publish(names.liveSubject(randomUUID())); // an unwatched task
    nats.nc.publish(names.eventSubject(randomUUID(), 'TaskStarted'));
    expect(await received()).toBe(before); // none of it reached the gateway
    expect(woke).toEqual([]);
    nats.nc.publish(names.eventSubject(task, 'TaskCompleted'));
    await received();
    expect(woke).toEqual(['transitions']);
    const offSteps = hub.register(task, () => woke.push('steps'), { steps: true });
    nats.nc.publish(names.liveSubject(task));
    await received();
    expect(woke).toEqual(['transitions', 'steps']);
    offTransitions();
    offSteps();
    before = await received();
    nats.nc.publish(names.liveSubject(task));
    nats.nc.publish(names.eventSubject(task, 'TaskFailed'));
    expect(await received()).toBe(before); // nobody watches: no subscription left
    expect(hub.size).toBe(0);
    hub.close();
  });
});
