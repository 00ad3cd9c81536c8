import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { finishRedelivery, listDeliveries, recordDelivery, recordNextAttempt, requestRedelivery, targetSettled, type DeliveryAttempt } from './deliveries.ts';

describe('webhook deliveries', () => {
  test('recorded attempts are listed per task, in order', async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    const failed: DeliveryAttempt = { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://example.com/h', attempt: 1, statusCode: 503, ok: false, error: 'HTTP 503', durationMs: 12 };
    await recordDelivery(db.pool, failed);
    await recordDelivery(db.pool, { ...failed, attempt: 2, statusCode: 200, ok: true, error: null, durationMs: 7 });
    await recordDelivery(db.pool, { ...failed, taskId: randomUUID() });
    await recordDelivery(db.pool, { ...failed, attempt: 3, statusCode: 410, error: 'HTTP 410', durationMs: 3, givenUp: true });
    const list = await listDeliveries(db.pool, taskId);
    const { taskId: _, ...first } = failed;
    expect(list).toEqual([
      { ...first, id: expect.any(String), channel: 'webhook', endpointId: null, redelivery: false, givenUp: false, attemptedAt: expect.any(Date) },
      { ...first, id: expect.any(String), channel: 'webhook', endpointId: null, redelivery: false, givenUp: false, attempt: 2, statusCode: 200, ok: true, error: null, durationMs: 7, attemptedAt: expect.any(Date) },
      { ...first, id: expect.any(String), channel: 'webhook', endpointId: null, redelivery: false, givenUp: true, attempt: 3, statusCode: 410, error: 'HTTP 410', durationMs: 3, attemptedAt: expect.any(Date) },
    ]);
    expect(await listDeliveries(db.pool, randomUUID())).toEqual([]);
    // When an attempt began (it is recorded once it has ended): an 8 s answer shows 8 s before it was recorded.
    const slow = randomUUID();
    const clock = async (): Promise<number> => (await db.pool.query<{ now: Date }>('select now()')).rows[0]!.now.getTime();
    const before = await clock();
    await recordDelivery(db.pool, { ...failed, taskId: slow, durationMs: 8029 });
    const after = await clock();
    const [row] = await listDeliveries(db.pool, slow);
    // Recorded between the two clock readings, 8,029 ms before (whatever the machine's load makes of the gap).
    expect(row!.attemptedAt.getTime() + 8029).toBeGreaterThanOrEqual(before - 1);
    expect(row!.attemptedAt.getTime() + 8029).toBeLessThanOrEqual(after + 1);
  });

  test('listed by id as a number: the 10th attempt after the 9th, not after the 1st', async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    for (let attempt = 1; attempt <= 12; attempt++) {
      await recordDelivery(db.pool, { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://example.com/h', attempt, statusCode: 503, ok: false, error: 'HTTP 503', durationMs: 1 });
    }
    expect((await listDeliveries(db.pool, taskId)).map((d) => d.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  test('attempts recorded at once for one message and target (an automatic retry, redeliveries) get a number each, in the order recorded', async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    const attempt = { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://example.com/h', statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 1 };
    const numbers = (await Promise.all(Array.from({ length: 8 }, () => recordNextAttempt(db.pool, attempt)))).map((r) => r.attempt);
    expect([...numbers].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // Another target of the same message counts on its own.
    expect((await recordNextAttempt(db.pool, { ...attempt, endpointId: randomUUID() })).attempt).toBe(1);
    expect((await listDeliveries(db.pool, taskId)).map((d) => d.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 1]); // listed as recorded: numbered in that order
  });

  test("a target has settled a message once delivered, or once its URL as it is now said 410 Gone — an endpoint moved elsewhere since is tried there", async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    const endpointId = randomUUID();
    const gone = { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://old.example.com/h', statusCode: 410, ok: false, error: 'HTTP 410', durationMs: 1, endpointId, givenUp: true };
    expect(await targetSettled(db.pool, taskId, gone.webhookId, endpointId, gone.url)).toBe(false);
    await recordNextAttempt(db.pool, gone);
    expect(await targetSettled(db.pool, taskId, gone.webhookId, endpointId, gone.url)).toBe(true);
    expect(await targetSettled(db.pool, taskId, gone.webhookId, endpointId, 'https://new.example.com/h')).toBe(false);
    expect(await targetSettled(db.pool, taskId, gone.webhookId, null, gone.url)).toBe(false); // another target
    await recordNextAttempt(db.pool, { ...gone, url: 'https://new.example.com/h', statusCode: 204, ok: true, error: null, givenUp: false });
    expect(await targetSettled(db.pool, taskId, gone.webhookId, endpointId, 'https://elsewhere.example.com/h')).toBe(true); // delivered is delivered
  });

  test('asking again while a redelivery of the delivery is queued is the same request (a double-click sends once); once it is done, a new one', async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    await recordNextAttempt(db.pool, { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://example.com/h', statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 1 });
    const [first] = await listDeliveries(db.pool, taskId);
    const ask = () => requestRedelivery(db.pool, { taskId, deliveryId: first!.id, requestedBy: 'ops' });
    const ids = await Promise.all([ask(), ask(), ask(), ask()]);
    expect(new Set(ids).size).toBe(1);
    expect((await db.pool.query('select count(*)::int as n from webhook_redeliveries where task_id = $1', [taskId])).rows[0].n).toBe(1);
    await finishRedelivery(db.pool, ids[0]!);
    expect(await ask()).not.toBe(ids[0]);
  });

  test('the automatic attempts allowed (giveUpAt) are counted among the automatic ones: a redelivery in between uses none up; the given-up target is settled', async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    const failed = { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://example.com/h', statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 1, giveUpAt: 3 };
    expect(await recordNextAttempt(db.pool, failed)).toEqual({ attempt: 1, givenUp: false });
    const [first] = await listDeliveries(db.pool, taskId);
    expect(await recordNextAttempt(db.pool, { ...failed, redeliveryId: await requestRedelivery(db.pool, { taskId, deliveryId: first!.id, requestedBy: 'ops' }) })).toEqual({ attempt: 2, givenUp: false });
    expect(await recordNextAttempt(db.pool, failed)).toEqual({ attempt: 3, givenUp: false });
    expect(await targetSettled(db.pool, taskId, failed.webhookId, null, failed.url)).toBe(false);
    expect(await recordNextAttempt(db.pool, failed)).toEqual({ attempt: 4, givenUp: true }); // the third automatic one
    expect(await targetSettled(db.pool, taskId, failed.webhookId, null, failed.url)).toBe(true);
  });

  test("a person's redelivery that fails after the notifiers gave the message up is given up too; one before, or one that succeeds, is not", async ({ pg: { db } }) => {
    const taskId = randomUUID();
    const eventId = randomUUID();
    const failed = { taskId, eventId, webhookId: `msg_${eventId}`, type: 'task.completed', url: 'https://example.com/h', statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 1 };
    await recordNextAttempt(db.pool, failed);
    const [first] = await listDeliveries(db.pool, taskId);
    const asked = () => requestRedelivery(db.pool, { taskId, deliveryId: first!.id, requestedBy: 'ops' });
    await recordNextAttempt(db.pool, { ...failed, redeliveryId: await asked() }); // the automatic course still runs
    await recordNextAttempt(db.pool, { ...failed, givenUp: true }); // the last automatic attempt
    await recordNextAttempt(db.pool, { ...failed, redeliveryId: await asked() });
    await recordNextAttempt(db.pool, { ...failed, redeliveryId: await asked(), statusCode: 204, ok: true, error: null });
    expect((await listDeliveries(db.pool, taskId)).map((d) => [d.attempt, d.redelivery, d.ok, d.givenUp])).toEqual([
      [1, false, false, false],
      [2, true, false, false],
      [3, false, false, true],
      [4, true, false, true],
      [5, true, true, false],
    ]);
  });
});
