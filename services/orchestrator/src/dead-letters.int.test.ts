import { randomUUID } from 'node:crypto';
import { busNames, encodeEvent, type DeadLetter } from '@baton/bus';
import { handleCommand, loadTask } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { leadDeadLetters } from './worker.ts';

describe('a dead-lettered lead trigger (leadDeadLetters)', () => {
  test("one only cut short leaves the lead to the watchdog — until the task's third, which fails it; one whose handler failed fails it at once", async ({ pg }) => {
    const names = busNames('t');
    const handle = leadDeadLetters({ pool: pg.db.pool, store: pg.store, names, log: silentLogger(), now: () => new Date() });
    const running = async () => {
      const id = randomUUID();
      await handleCommand(pg.store, id, { type: 'SubmitTask', prompt: 'p', team: 'bench', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null });
      const { events } = await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
      const trigger = events[0]!;
      return { id, payload: new TextDecoder().decode(encodeEvent(trigger)), subject: names.triggerSubject(id, trigger.type) };
    };
    let seq = 0;
    const dl = (t: { payload: string; subject: string }, unsettled: boolean): DeadLetter => ({ consumer: names.consumers.orchestrator, subject: t.subject, streamSequence: ++seq, storedAtNanos: BigInt(Date.now()) * 1_000_000n, deliveries: 6, payload: t.payload, error: unsettled ? 'delivered 6 times without being settled' : 'gave up after 5 attempts: model down', unsettled });
    const status = async (id: string) => (await loadTask(pg.store, id)).state;

    const cut = await running();
    await handle(dl(cut, true));
    await handle(dl(cut, true));
    expect((await status(cut.id)).status).toBe('running');
    await handle(dl(cut, true));
    expect(await status(cut.id)).toMatchObject({ status: 'failed', error: { code: 'lead_failed', message: expect.stringMatching(/without being settled/) } });

    const failing = await running();
    await handle(dl(failing, false));
    expect(await status(failing.id)).toMatchObject({ status: 'failed', error: { code: 'lead_failed', message: expect.stringMatching(/model down/) } });
    expect((await pg.db.pool.query('select count(*)::int as n from dead_letters')).rows[0].n).toBe(4);

    // A lead whose last model call found the API unable to answer: its trigger ran out of attempts
    // waiting for the model. The watchdog wakes it again; the agent loop ends the task once the
    // outage has lasted the model's limit.
    const waiting = await running();
    await handleCommand(pg.store, waiting.id, { type: 'RecordModelUnavailable', agentId: 'lead', error: 'the Messages API could not answer: 529 overloaded' });
    await handle(dl(waiting, false));
    expect(await status(waiting.id)).toMatchObject({ status: 'running', lead: { modelOutage: { failures: 1, error: 'the Messages API could not answer: 529 overloaded' } } });
    expect((await pg.db.pool.query('select count(*)::int as n from dead_letters')).rows[0].n).toBe(5);
  });
});
