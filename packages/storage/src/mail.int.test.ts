import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { claimMail, MailClaimLostError, mailSends, markHandingOver, settleMail } from './mail.ts';

const key = () => ({ taskId: randomUUID(), key: 'completed', recipient: 'ann@example.com', messageId: '<m@baton>' });

describe('the mail ledger', () => {
  test('of two claims at once exactly one wins; the other is told another holder has it', async ({ pg: { db } }) => {
    const k = key();
    const results = await Promise.all([claimMail(db.pool, { ...k, holder: 'a', leaseMs: 60_000 }), claimMail(db.pool, { ...k, holder: 'b', leaseMs: 60_000 })]);
    expect(results.filter((r) => r.claimed)).toEqual([{ claimed: true, attempt: 1 }]);
    expect(results.find((r) => !r.claimed)).toMatchObject({ claimed: false, state: 'busy', retryInMs: expect.any(Number) });
    const winner = results[0]?.claimed ? 'a' : 'b';
    expect(await settleMail(db.pool, { ...k, holder: winner === 'a' ? 'b' : 'a', state: 'sent', error: null })).toBe(false); // only the holder settles
    expect(await settleMail(db.pool, { ...k, holder: winner, state: 'sent', error: null })).toBe(true);
    expect(await claimMail(db.pool, { ...k, holder: 'c', leaseMs: 60_000 })).toEqual({ claimed: false, state: 'sent', marked: false, lastError: null });
  });

  test('a definite failure (retry) is claimed again, counting attempts; given up (failed) it is not', async ({ pg: { db } }) => {
    const k = key();
    expect(await claimMail(db.pool, { ...k, holder: 'a', leaseMs: 60_000 })).toEqual({ claimed: true, attempt: 1 });
    await settleMail(db.pool, { ...k, holder: 'a', state: 'retry', error: '451 try later' });
    expect(await claimMail(db.pool, { ...k, holder: 'b', leaseMs: 60_000 })).toEqual({ claimed: true, attempt: 2 });
    await settleMail(db.pool, { ...k, holder: 'b', state: 'failed', error: '550 no such user' });
    expect(await claimMail(db.pool, { ...k, holder: 'c', leaseMs: 60_000 })).toEqual({ claimed: false, state: 'failed', marked: false, lastError: expect.any(String) });
    expect(await mailSends(db.pool, k.taskId)).toEqual([{ key: 'completed', recipient: 'ann@example.com', state: 'failed', attempts: 2, lastError: '550 no such user' }]);
  });

  test('a holder gone after handing the message over: once its lease ends the mail is marked unknown (once) and never claimed again', async ({ pg: { db } }) => {
    const k = key();
    expect(await claimMail(db.pool, { ...k, holder: 'a', leaseMs: 1 })).toEqual({ claimed: true, attempt: 1 });
    await markHandingOver(db.pool, { ...k, holder: 'a' });
    await db.pool.query(`select pg_sleep(0.01)`); // the 1 ms lease is over (Postgres's clock)
    expect(await claimMail(db.pool, { ...k, holder: 'b', leaseMs: 60_000 })).toEqual({ claimed: false, state: 'unknown', marked: true, attempt: 1 });
    expect(await claimMail(db.pool, { ...k, holder: 'c', leaseMs: 60_000 })).toEqual({ claimed: false, state: 'unknown', marked: false, lastError: expect.any(String) });
    // The first holder was only slow: its outcome replaces unknown.
    expect(await settleMail(db.pool, { ...k, holder: 'a', state: 'sent', error: null })).toBe(true);
    expect((await mailSends(db.pool, k.taskId))[0]?.state).toBe('sent');
  });

  test('a holder gone before handing the message over sent nothing: once its lease ends the next claims it and sends; the first, if only slow, may not hand it over', async ({ pg: { db } }) => {
    const k = key();
    expect(await claimMail(db.pool, { ...k, holder: 'a', leaseMs: 1 })).toEqual({ claimed: true, attempt: 1 });
    await db.pool.query(`select pg_sleep(0.01)`);
    expect(await claimMail(db.pool, { ...k, holder: 'b', leaseMs: 60_000 })).toEqual({ claimed: true, attempt: 2 });
    await expect(markHandingOver(db.pool, { ...k, holder: 'a' })).rejects.toBeInstanceOf(MailClaimLostError);
    await markHandingOver(db.pool, { ...k, holder: 'b' });
    expect(await settleMail(db.pool, { ...k, holder: 'b', state: 'sent', error: null })).toBe(true);
    expect(await mailSends(db.pool, k.taskId)).toEqual([{ key: 'completed', recipient: 'ann@example.com', state: 'sent', attempts: 2, lastError: null }]);
  });
});
