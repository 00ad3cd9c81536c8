import { randomUUID } from 'node:crypto';
import { busNames } from '@baton/bus';
import { createLogger, silentLogger } from '@baton/runtime';
import { stackTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { SseHub } from './sse-hub.ts';

describe('SseHub', () => {
  test('NATS delivers only what watched streams need: transitions (events and signals) of watched tasks, and live ticks only while a stream shows steps', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const hub = new SseHub(names, silentLogger());
    hub.attach(nats.nc);
    // Everything published before a flush has been delivered to this connection when it returns.
    const received = async (): Promise<number> => (await nats.nc.flush(), nats.nc.stats().inMsgs);
    const tick = (...taskIds: string[]): void => nats.nc.publish(names.liveTicks, JSON.stringify(taskIds));
    const task = randomUUID();
    const other = randomUUID();
    const woke: string[] = [];
    const offTransitions = hub.register(task, () => woke.push('transitions'), { steps: false });
    let before = await received();
    tick(task, other); // steps, while no stream shows steps
    nats.nc.publish(names.eventSubject(other, 'TaskStarted')); // an unwatched task
    nats.nc.publish(names.signalSubject(other, 'TaskStarted'));
    expect(await received()).toBe(before); // none of it reached the gateway
    expect(woke).toEqual([]);
    nats.nc.publish(names.signalSubject(task, 'TaskStarted')); // a transition nobody is told of durably (the relay's signal)
    await received();
    expect(woke).toEqual(['transitions']);
    woke.length = 0;
    nats.nc.publish(names.eventSubject(task, 'TaskCompleted'));
    await received();
    expect(woke).toEqual(['transitions']);
    const offSteps = hub.register(task, () => woke.push('steps'), { steps: true });
    const offOther = hub.register(other, () => woke.push('other steps'), { steps: true });
    tick(task);
    await received();
    expect(woke).toEqual(['transitions', 'steps']); // only the stream of the task named, and only the one that shows steps
    tick(other, randomUUID(), task);
    await received();
    expect(woke.slice(2).sort()).toEqual(['other steps', 'steps']);
    offOther();
    offOther(); // a second call changes nothing (the count of step streams stays right: the ticks still come)
    const seen = woke.length;
    tick(task);
    await received();
    expect(woke.slice(seen)).toEqual(['steps']);
    offTransitions();
    offSteps();
    before = await received();
    tick(task);
    nats.nc.publish(names.eventSubject(task, 'TaskFailed'));
    nats.nc.publish(names.signalSubject(task, 'TaskFailed'));
    expect(await received()).toBe(before); // nobody watches: no subscription left
    expect(hub.size).toBe(0);
    hub.close();
  });

  test('streams registered before NATS is connected are subscribed for once it is (the gateway listens before it connects)', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const hub = new SseHub(names, silentLogger());
    const task = randomUUID();
    const woke: string[] = [];
    hub.register(task, () => woke.push('steps'), { steps: true });
    hub.attach(nats.nc);
    nats.nc.publish(names.liveTicks, JSON.stringify([task]));
    nats.nc.publish(names.eventSubject(task, 'TaskCompleted'));
    await nats.nc.flush();
    expect(woke).toEqual(['steps', 'steps']);
    hub.close();
  });

  test('a live tick that is not a list of task ids is refused with a warning that says why, and wakes every stream that shows steps (they read from their cursors)', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const lines: string[] = [];
    const log = createLogger('gateway', { level: 'warn', destination: { write: (line: string) => void lines.push(line) } });
    const hub = new SseHub(names, log);
    hub.attach(nats.nc);
    const woke: string[] = [];
    const task = randomUUID();
    hub.register(task, () => woke.push('steps'), { steps: true });
    hub.register(task, () => woke.push('transitions'), { steps: false });
    hub.register(randomUUID(), () => woke.push('other steps'), { steps: true });
    nats.nc.publish(names.liveTicks, JSON.stringify(['not-a-task-id']));
    await nats.nc.flush();
    expect(woke.sort()).toEqual(['other steps', 'steps']);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'live tick refused (waking every stream that shows steps)', error: expect.stringMatching(/UUID[\s\S]*at \[0\]/) });
    hub.close();
  });
});
