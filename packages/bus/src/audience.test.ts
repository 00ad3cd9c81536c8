import { randomUUID } from 'node:crypto';
import { recordAs, taskStreamId, type NewEvent, type RecordedEvent } from '@baton/domain';
import type pg from 'pg';
import { describe, expect, test } from 'vitest';
import { hasOwnTargets, mayNotify, NotifierAudience } from './audience.ts';

/** The list functions below do not query: the session they are given is unused. */
const noDb = { query: () => Promise.reject(new Error('unused')) } as unknown as Pick<pg.Pool, 'query'>;
let version = 0;
const recorded = (taskId: string, e: NewEvent): RecordedEvent => recordAs(e, { taskId, streamId: taskStreamId(taskId), version: ++version, position: BigInt(version), recordedAt: new Date() });
const submitted = (taskId: string, tenantId: string, own: { webhook?: { url: string; events: string[] }; notify?: { to: string[]; on: string[] } } = {}): RecordedEvent =>
  recorded(taskId, { id: randomUUID(), type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: own.webhook ?? null, notify: (own.notify ?? null) as never, metadata: {}, tenantId, requestHash: null, forkedFrom: null, workspace: null, budget: null } });
const started = (taskId: string): RecordedEvent => recorded(taskId, { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
const completed = (taskId: string): RecordedEvent => recorded(taskId, { id: randomUUID(), type: 'TaskCompleted', data: { summary: 'r', reportPath: null } });
const emailRequested = (taskId: string): RecordedEvent => recorded(taskId, { id: randomUUID(), type: 'EmailRequested', data: {} } as NewEvent);

describe('mayNotify (the relay\'s and the notifier\'s rule)', () => {
  test('serves an outbox mail always, an unknown task, a task with targets of its own, a tenant with endpoints or not known to have none', () => {
    expect(mayNotify('EmailRequested', { ownTargets: false, tenantHasEndpoints: false })).toBe(true);
    expect(mayNotify('TaskStarted', undefined)).toBe(true);
    expect(mayNotify('TaskStarted', { ownTargets: true, tenantHasEndpoints: false })).toBe(true);
    expect(mayNotify('TaskStarted', { ownTargets: false, tenantHasEndpoints: true })).toBe(true);
    expect(mayNotify('TaskStarted', { ownTargets: false, tenantHasEndpoints: undefined })).toBe(true);
    expect(mayNotify('TaskStarted', { ownTargets: false, tenantHasEndpoints: false })).toBe(false);
  });
  test('own targets: a webhook or mail recipients', () => {
    expect(hasOwnTargets({ webhook: null, notify: null })).toBe(false);
    expect(hasOwnTargets({ webhook: null })).toBe(false);
    expect(hasOwnTargets({ webhook: { url: 'u' }, notify: null })).toBe(true);
    expect(hasOwnTargets({ webhook: null, notify: { to: ['a@b.c'] } })).toBe(true);
  });
});

describe('NotifierAudience', () => {
  const audience = (tenants: () => string[] | Promise<string[]>, o: { refreshMs?: number; maxTasks?: number; now?: () => number } = {}) => {
    const errors: unknown[] = [];
    const a = new NotifierAudience({ tenantsWithEndpoints: async () => tenants(), onRefreshError: (e) => errors.push(e), ...o });
    return { a, errors };
  };

  test('a task with no targets of its own, of a tenant with no endpoints, is not served (its outbox mails are); the others are', async () => {
    const { a } = audience(() => ['loud']);
    await a.refresh(noDb);
    const quiet = randomUUID();
    const hooked = randomUUID();
    const mailed = randomUUID();
    const tenantWide = randomUUID();
    expect(a.serves(submitted(quiet, 'q'))).toBe(false);
    expect(a.serves(started(quiet))).toBe(false);
    expect(a.serves(emailRequested(quiet))).toBe(true);
    expect(a.serves(submitted(hooked, 'q', { webhook: { url: 'https://example.com', events: ['event.TaskStarted'] } }))).toBe(true);
    expect(a.serves(started(hooked))).toBe(true);
    expect(a.serves(submitted(mailed, 'q', { notify: { to: ['a@example.com'], on: ['completed'] } }))).toBe(true);
    expect(a.serves(submitted(tenantWide, 'loud'))).toBe(true);
    expect(a.serves(started(tenantWide))).toBe(true);
  });

  test('a task whose submission it never saw is served', async () => {
    const { a } = audience(() => []);
    await a.refresh(noDb);
    expect(a.serves(started(randomUUID()))).toBe(true);
  });

  test('forgets a task at its final event (what follows is served), and the oldest task beyond maxTasks', async () => {
    const { a } = audience(() => [], { maxTasks: 2 });
    await a.refresh(noDb);
    const t = randomUUID();
    a.serves(submitted(t, 'q'));
    expect(a.serves(completed(t))).toBe(false);
    expect(a.size).toBe(0);
    expect(a.serves(started(t))).toBe(true);
    const [x, y, z] = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of [x, y, z]) a.serves(submitted(id, 'q'));
    expect(a.size).toBe(2);
    expect(a.serves(started(x))).toBe(true); // forgotten
    expect(a.serves(started(z))).toBe(false);
  });

  test('re-reads the tenants with endpoints once the list is older than refreshMs: a new endpoint applies from then on', async () => {
    let now = 0;
    let tenants = ['other'];
    let reads = 0;
    const { a } = audience(() => (reads++, tenants), { refreshMs: 5000, now: () => now });
    const t = randomUUID();
    await a.refresh(noDb);
    expect(a.serves(submitted(t, 'q'))).toBe(false);
    tenants = ['other', 'q'];
    now = 4999;
    await a.refresh(noDb);
    expect(reads).toBe(1);
    expect(a.serves(started(t))).toBe(false);
    now = 5000;
    await a.refresh(noDb);
    expect(reads).toBe(2);
    expect(a.serves(started(t))).toBe(true);
  });

  test('serves everything, before the list was read and while it cannot be (told, tried again after a second, not every batch), then goes back to the rule', async () => {
    let fail = true;
    let now = 0;
    let reads = 0;
    const { a, errors } = audience(() => (reads++, fail ? Promise.reject(new Error('no db')) : []), { now: () => now });
    const t = randomUUID();
    expect(a.serves(submitted(t, 'q'))).toBe(true); // not read yet
    await a.refresh(noDb);
    expect(errors).toHaveLength(1);
    expect(a.serves(started(t))).toBe(true);
    now = 999;
    fail = false;
    await a.refresh(noDb);
    expect(reads).toBe(1);
    expect(a.serves(started(t))).toBe(true);
    now = 1000;
    await a.refresh(noDb);
    expect(reads).toBe(2);
    expect(a.serves(started(t))).toBe(false);
  });

  test('a read that failed slowly (a connection timeout) is tried again a second after it failed, not at once', async () => {
    let now = 0;
    let reads = 0;
    const { a, errors } = audience(() => {
      reads++;
      now += 10_000; // the read took 10 s to fail
      return Promise.reject(new Error('timeout exceeded when trying to connect'));
    }, { now: () => now });
    await a.refresh(noDb);
    expect(errors).toHaveLength(1);
    now += 999;
    await a.refresh(noDb);
    expect(reads).toBe(1);
    now += 1;
    await a.refresh(noDb);
    expect(reads).toBe(2);
  });

  test('a change announced while the list is being read: the list is read again at the next batch (the read under way may have missed it)', async () => {
    let tenants: string[] = [];
    let during: (() => void) | null = null;
    let reads = 0;
    const { a } = audience(async () => {
      reads++;
      const now = tenants;
      during?.();
      return now;
    }, { refreshMs: 3_600_000 });
    const t = randomUUID();
    during = () => {
      tenants = ['q']; // committed after the read's snapshot...
      a.invalidate(); // ...and announced before the read returned
    };
    await a.refresh(noDb);
    during = null;
    expect(a.serves(submitted(t, 'q'))).toBe(false); // what the read saw
    await a.refresh(noDb);
    expect(reads).toBe(2);
    expect(a.serves(started(t))).toBe(true);
    await a.refresh(noDb);
    expect(reads).toBe(2); // fresh now
  });
});
