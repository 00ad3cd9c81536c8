import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signLinkToken, verifyLinkToken, type LinkClaims } from './token.ts';

const SECRET = 'a-test-secret-that-is-long-enough-0123456789';
const now = new Date('2026-01-01T00:00:00Z');
const claims: LinkClaims = { t: 'acme', k: '00000000-0000-4000-8000-000000000001', r: 'apr-lead-tu1', d: 'approve', a: 'ann@example.com', e: now.getTime() / 1000 + 60 };

describe('mail link tokens', () => {
  it('round-trip: the claims come back from a token signed with the secret', () => {
    const token = signLinkToken(SECRET, claims);
    expect(token).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(verifyLinkToken(SECRET, token, now)).toEqual({ ok: true, claims });
  });
  it('a tampered payload or signature, another secret, or garbage is refused', () => {
    const token = signLinkToken(SECRET, claims);
    const [v, payload, sig] = token.split('.') as [string, string, string];
    const other = Buffer.from(JSON.stringify({ ...claims, d: 'reject' })).toString('base64url');
    expect(verifyLinkToken(SECRET, `${v}.${other}.${sig}`, now)).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifyLinkToken(SECRET, `${v}.${payload}.${sig.slice(0, -2)}AA`, now)).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifyLinkToken(`${SECRET}x`, token, now)).toEqual({ ok: false, reason: 'bad_signature' });
    expect(verifyLinkToken(SECRET, 'v2.a.b', now)).toEqual({ ok: false, reason: 'malformed' });
    expect(verifyLinkToken(SECRET, 'nonsense', now)).toEqual({ ok: false, reason: 'malformed' });
  });
  it('expires at its time', () => {
    const token = signLinkToken(SECRET, claims);
    expect(verifyLinkToken(SECRET, token, new Date(claims.e * 1000 - 1)).ok).toBe(true);
    expect(verifyLinkToken(SECRET, token, new Date(claims.e * 1000))).toEqual({ ok: false, reason: 'expired', claims }); // its claims still named: the page links the task
  });
  it('a well-signed payload that is not a token’s shape is malformed', () => {
    const payload = Buffer.from(JSON.stringify({ ...claims, d: 'delete' })).toString('base64url');
    const sig = createHmac('sha256', SECRET).update(`v1.${payload}`).digest('base64url');
    expect(verifyLinkToken(SECRET, `v1.${payload}.${sig}`, now)).toEqual({ ok: false, reason: 'malformed' });
  });
});
