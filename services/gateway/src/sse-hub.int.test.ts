import { randomUUID } from 'node:crypto';
import { busNames } from '@baton/bus';
import { createLogger, silentLogger } from '@baton/runtime';
import { stackTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { allPays, SseHub, WASTE_PER_WATCH, WASTE_WINDOW } from './sse-hub.ts';

/** The real connection, with the subjects subscribed to and unsubscribed from written down. */
function countingSubscriptions(real: NatsConnection): { nc: NatsConnection; subscribed: string[]; unsubscribed: string[] } {
  const subscribed: string[] = [];
  const unsubscribed: string[] = [];
  const nc = new Proxy(real, {
    get(target, key) {
      if (key === 'subscribe') {
        return (subject: string, opts?: Parameters<NatsConnection['subscribe']>[1]): Subscription => {
          subscribed.push(subject);
          const sub = target.subscribe(subject, opts);
          const unsubscribe = sub.unsubscribe.bind(sub);
          sub.unsubscribe = (max?: number) => (unsubscribed.push(subject), unsubscribe(max));
          return sub;
        };
      }
      const v: unknown = Reflect.get(target, key);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { nc, subscribed, unsubscribed };
}

describe('SseHub', () => {
  test('mode all (the default): one subscription to every task\'s transitions, whatever the number of streams; each transition wakes only its task\'s streams; live ticks only while a stream shows steps', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const { nc, subscribed, unsubscribed } = countingSubscriptions(nats.nc);
    const hub = new SseHub(names, silentLogger());
    hub.attach(nc);
    const received = async (): Promise<number> => (await nats.nc.flush(), nats.nc.stats().inMsgs);
    const tick = (...taskIds: string[]): void => nats.nc.publish(names.liveTicks, JSON.stringify(taskIds));
    expect(subscribed).toEqual([]); // nothing watched yet: nothing held
    const task = randomUUID();
    const other = randomUUID();
    const woke: string[] = [];
    const offTransitions = hub.register(task, () => woke.push('transitions'), { steps: false });
    expect(subscribed.sort()).toEqual([names.allEvents, names.allSignals].sort());
    const before = await received();
    tick(task, other); // steps, while no stream shows steps: not delivered
    nats.nc.publish(names.eventSubject(other, 'TaskStarted')); // an unwatched task: delivered, wakes nobody
    nats.nc.publish(names.signalSubject(other, 'TaskStarted'));
    expect(await received()).toBe(before + 2);
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
    expect(hub.size).toBe(0);
    // Twenty more streams, one after another, as clients that follow each task they submit: no subscription of their own.
    for (let i = 0; i < 20; i++) {
      const id = randomUUID();
      let hit = 0;
      const off = hub.register(id, () => hit++, { steps: false });
      nats.nc.publish(names.signalSubject(id, 'TaskCompleted'));
      await received();
      expect(hit).toBe(1);
      off();
    }
    expect(subscribed.filter((s) => s !== names.liveTicks).sort()).toEqual([names.allEvents, names.allSignals].sort());
    expect(unsubscribed).toEqual([names.liveTicks]); // the live ticks, once no stream showed steps
    expect(hub.mode).toBe('all');
    hub.close();
  });

  test('mode all moves to a subscription per watched task when most of what it is delivered is of tasks nobody watches, and back after the cooldown', async ({ nats }) => {
    const names = busNames(nats.namespace);
    const { nc, subscribed } = countingSubscriptions(nats.nc);
    let now = 1_000;
    const hub = new SseHub(names, silentLogger(), { cooldownMs: 60_000, now: () => now });
    hub.attach(nc);
    const received = async (): Promise<number> => (await nats.nc.flush(), nats.nc.stats().inMsgs);
    const task = randomUUID();
    const woke: string[] = [];
    const off = hub.register(task, () => woke.push('task'), { steps: false });
    // Many watched tasks per window: all pays, whatever the waste below the ratio.
    const many = Array.from({ length: WASTE_WINDOW / WASTE_PER_WATCH }, () => hub.register(randomUUID(), () => woke.push('other'), { steps: false }));
    for (let i = 0; i < WASTE_WINDOW; i++) nats.nc.publish(names.signalSubject(randomUUID(), 'TaskStarted'));
    await received();
    expect(hub.mode).toBe('all');
    for (const o of many) o();
    // Then a window of waste with one task watched: a console open on one task while thousands run.
    for (let i = 0; i < WASTE_WINDOW; i++) nats.nc.publish(names.signalSubject(randomUUID(), 'TaskStarted'));
    await received();
    expect(hub.mode).toBe('per-task');
    expect(woke).toEqual([]);
    expect(subscribed.slice(-2).sort()).toEqual([names.taskEvents(task), names.taskSignals(task)].sort());
    let before = await received();
    nats.nc.publish(names.signalSubject(randomUUID(), 'TaskStarted')); // unwatched: no longer delivered
    nats.nc.publish(names.eventSubject(randomUUID(), 'TaskStarted'));
    expect(await received()).toBe(before);
    nats.nc.publish(names.signalSubject(task, 'TaskStarted'));
    nats.nc.publish(names.eventSubject(task, 'TaskCompleted'));
    await received();
    expect(woke).toEqual(['task', 'task']); // the watched task, through its own subscriptions
    off();
    before = await received();
    nats.nc.publish(names.signalSubject(task, 'TaskFailed'));
    expect(await received()).toBe(before); // nobody watches: nothing held
    now += 59_999;
    const again = randomUUID();
    const offAgain = hub.register(again, () => woke.push('again'), { steps: false });
    expect(hub.mode).toBe('per-task'); // still cooling down
    offAgain();
    now += 1;
    const last = randomUUID();
    hub.register(last, () => woke.push('last'), { steps: false });
    expect(hub.mode).toBe('all');
    nats.nc.publish(names.eventSubject(last, 'TaskCompleted'));
    before = await received();
    nats.nc.publish(names.signalSubject(randomUUID(), 'TaskStarted'));
    expect(await received()).toBe(before + 1); // every task's again
    expect(woke.slice(2)).toEqual(['last']);
    hub.close();
  });

  test("watchAll (a task list following changes): every task's transitions; what it hears is not waste; a listener brings mode all back at once", async ({ nats }) => {
    const names = busNames(nats.namespace);
    const { nc, subscribed, unsubscribed } = countingSubscriptions(nats.nc);
    const hub = new SseHub(names, silentLogger(), { cooldownMs: 60_000, now: () => 1_000 });
    hub.attach(nc);
    const received = async (): Promise<number> => (await nats.nc.flush(), nats.nc.stats().inMsgs);
    const heard: string[] = [];
    const stop = hub.watchAll((taskId) => heard.push(taskId));
    expect(subscribed.sort()).toEqual([names.allEvents, names.allSignals].sort()); // nothing else watched: held for the list
    expect(hub.listeningToAll).toBe(1);
    // One task watched by a stream, thousands of others moving: heard by the list, so no waste — the mode stays.
    const task = randomUUID();
    const woke: string[] = [];
    const off = hub.register(task, () => woke.push('task'), { steps: false });
    const others = Array.from({ length: WASTE_WINDOW * 2 }, () => randomUUID());
    for (const id of others) nats.nc.publish(names.signalSubject(id, 'TaskStarted'));
    nats.nc.publish(names.eventSubject(task, 'TaskCompleted'));
    await received();
    expect(hub.mode).toBe('all');
    expect(heard).toEqual([...others, task]);
    expect(woke).toEqual(['task']);
    // Without the list, the same waste moves the hub to a subscription per watched task…
    stop();
    stop(); // twice is once
    expect(hub.listeningToAll).toBe(0);
    for (let i = 0; i < WASTE_WINDOW; i++) nats.nc.publish(names.signalSubject(randomUUID(), 'TaskStarted'));
    await received();
    expect(hub.mode).toBe('per-task');
    expect(unsubscribed.sort()).toEqual([names.allEvents, names.allSignals].sort());
    // …and a list that starts listening brings mode all back at once, cooldown or not: one subscription
    // to every task's, the watched task's own pair dropped (it would be paid for twice), woken once.
    heard.length = 0;
    woke.length = 0;
    const stop2 = hub.watchAll((taskId) => heard.push(taskId));
    expect(hub.mode).toBe('all');
    expect(subscribed.filter((s) => s === names.allEvents)).toHaveLength(2);
    expect(unsubscribed).toEqual(expect.arrayContaining([names.taskEvents(task), names.taskSignals(task)]));
    const stranger = randomUUID();
    nats.nc.publish(names.signalSubject(stranger, 'TaskStarted'));
    nats.nc.publish(names.eventSubject(task, 'TaskFailed'));
    await received();
    expect(heard).toEqual([stranger, task]);
    expect(woke).toEqual(['task']);
    stop2();
    off();
    hub.close();
  });

  test('allPays: at most WASTE_PER_WATCH deliveries nobody needed per task watched in the window', () => {
    expect(allPays({ wasted: 0, watched: 0 })).toBe(true);
    expect(allPays({ wasted: WASTE_WINDOW, watched: WASTE_WINDOW / WASTE_PER_WATCH })).toBe(true);
    expect(allPays({ wasted: WASTE_WINDOW, watched: WASTE_WINDOW / WASTE_PER_WATCH - 1 })).toBe(false);
    expect(allPays({ wasted: WASTE_WINDOW, watched: 0 })).toBe(false);
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
