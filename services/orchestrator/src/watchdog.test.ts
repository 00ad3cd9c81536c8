import { initialState, newLoop, type AgentState, type TaskState } from '@baton/domain';
import { WATCHDOG_HOLDER, type Lease } from '@baton/storage';
import { describe, expect, it } from 'vitest';
import { watchdogActions } from './watchdog.ts';

const now = new Date('2026-11-23T12:00:00Z');
const agent = (id: string, status: AgentState['status'], attempt = 1, stalledAttempts = 0): AgentState => ({ ...newLoop(), id, type: 'researcher', status, attempt, stalledAttempts } as AgentState);
const task = (agents: AgentState[], leadWaits = true): TaskState => ({
  ...initialState(),
  status: 'running',
  id: 't',
  lead: { ...newLoop(), agentId: 'lead', type: 'lead', configVersion: 'v', phase: leadWaits ? 'tools' : 'model', openToolUses: leadWaits ? [{ toolUseId: 'tu', name: 'Task', input: {}, state: 'dispatched', result: null, approvedInput: null }] : [] },
  agents: Object.fromEntries(agents.map((a) => [a.id, a])),
});
const lease = (agentId: string, o: Partial<Lease>): Lease => ({ taskId: 't', agentId, attempt: 1, holder: 'runner-a', expiresAt: new Date(now.getTime() + 10_000), fires: 0, lastError: null, ...o });
const opts = { maxRedispatches: 3, maxStalledAttempts: 5, jobsBacklog: false };

describe('watchdogActions', () => {
  it('leaves an agent with a live lease alone; re-dispatches one whose lease expired or that has none', () => {
    const s = task([agent('a', 'running'), agent('b', 'running'), agent('c', 'dispatched', 0)]);
    const a = watchdogActions(s, [lease('a', {}), lease('b', { expiresAt: new Date(now.getTime() - 1) })], now, opts);
    expect(a).toEqual({ trigger: false, redispatch: ['b', 'c'], fail: [], dropLeases: [] });
  });

  it('wakes a lead that has a turn to take (or has not started)', () => {
    expect(watchdogActions(task([], false), [], now, opts).trigger).toBe(true);
    expect(watchdogActions({ ...task([]), lead: null }, [], now, opts).trigger).toBe(true);
  });

  it('gives up on an attempt re-dispatched maxRedispatches times — not while jobs wait in the queue — with the last error', () => {
    const s = task([agent('a', 'running', 2)]);
    const tired = [lease('a', { holder: WATCHDOG_HOLDER, attempt: 2, fires: 3, lastError: 'sandbox would not start', expiresAt: now })];
    expect(watchdogActions(s, tired, now, opts).fail).toEqual([{ agentId: 'a', message: expect.stringMatching(/re-dispatched 3 times.*Last error: sandbox would not start/) }]);
    expect(watchdogActions(s, tired, now, { ...opts, jobsBacklog: true })).toMatchObject({ redispatch: ['a'], fail: [] });
    // Fires of an older attempt do not count against a newer one (a runner claimed it since).
    expect(watchdogActions(s, [lease('a', { holder: WATCHDOG_HOLDER, attempt: 1, fires: 3, expiresAt: now })], now, opts)).toMatchObject({ redispatch: ['a'], fail: [] });
  });

  it('gives up on an agent whose last maxStalledAttempts attempts were each lost before recording anything (its runner keeps dying on it)', () => {
    const dead = (attempt: number) => [lease('a', { attempt, holder: 'runner-a', expiresAt: new Date(now.getTime() - 1), lastError: 'runner runner-a restarted' })];
    // Four lost attempts: a fifth is started.
    expect(watchdogActions(task([agent('a', 'running', 6, 4)]), dead(6), now, opts)).toMatchObject({ redispatch: ['a'], fail: [] });
    // Five: given up, naming the attempts and the lease's last word.
    expect(watchdogActions(task([agent('a', 'running', 7, 5)]), dead(7), now, opts)).toMatchObject({
      redispatch: [],
      fail: [{ agentId: 'a', message: expect.stringMatching(/lost 5 attempts in a row \(the last: attempt 7\), each ended before it recorded a turn.*Last error: runner runner-a restarted/) }],
    });
    // Even with a job waiting in the queue (the queue does not explain a runner that dies).
    expect(watchdogActions(task([agent('a', 'running', 7, 5)]), dead(7), now, { ...opts, jobsBacklog: true }).fail).toHaveLength(1);
    // A live lease: the sixth attempt is being worked on, nothing to do yet.
    expect(watchdogActions(task([agent('a', 'running', 7, 5)]), [lease('a', { attempt: 7 })], now, opts)).toMatchObject({ redispatch: [], fail: [] });
  });

  it('drops the leases of agents no longer active, and all of a finished task', () => {
    const s = task([agent('a', 'completed'), agent('b', 'running')]);
    expect(watchdogActions(s, [lease('a', {}), lease('b', {})], now, opts).dropLeases).toEqual(['a']);
    expect(watchdogActions({ ...s, status: 'completed' }, [lease('a', {}), lease('b', {})], now, opts)).toEqual({ trigger: false, redispatch: [], fail: [], dropLeases: ['a', 'b'] });
  });
});
