import { describe, expect, it } from 'vitest';
import { sign, verify, webhookTypesFor } from './webhook.ts';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('Standard Webhooks signatures', () => {
  it('matches the reference vector of the Standard Webhooks spec', () => {
    // From the standard-webhooks reference libraries' tests.
    const body = '{"test": 2432232314}';
    expect(sign(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });
  it('verifies, and rejects tampering, stale timestamps and wrong secrets', () => {
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    const headers = { id: 'msg_1', timestamp: String(ts), signature: sign(secret, 'msg_1', ts, 'body') };
    expect(verify(secret, headers, 'body', 300, now)).toBe(true);
    expect(verify(secret, headers, 'body!', 300, now)).toBe(false);
    expect(verify(secret, headers, 'body', 300, now + 10 * 60_000)).toBe(false);
    expect(verify('whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', headers, 'body', 300, now)).toBe(false);
    expect(verify(secret, { ...headers, signature: `v1,bogus ${headers.signature}` }, 'body', 300, now)).toBe(true); // rotation: several signatures
  });
  it('maps events to webhook types', () => {
    expect(webhookTypesFor('TaskCompleted')).toEqual(['event.TaskCompleted', 'task.completed']);
    expect(webhookTypesFor('ClarificationRequested')).toContain('task.awaiting_input');
    expect(webhookTypesFor('BudgetExceeded')).toContain('task.awaiting_input');
    expect(webhookTypesFor('ModelTurnRecorded')).toEqual(['event.ModelTurnRecorded']);
  });
});
