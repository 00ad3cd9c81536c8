import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/**
 * Signed one-click links (docs/email.md). A token is `v1.<payload>.<signature>`: the payload is
 * base64url JSON naming the tenant, the task, the request, the decision the link makes, the
 * recipient it was mailed to and when it expires; the signature is base64url HMAC-SHA256 of
 * `v1.<payload>` under MAIL_LINK_SECRET. Nothing is stored: a token is good for one decision of
 * one request, and a request is decided once, so a used link finds it decided. A `file` link
 * gives one version of one artifact of the task (a report mail's files, for people without an
 * API key).
 */
export const LinkAction = z.enum(['approve', 'reject', 'answer', 'file']);
export type LinkAction = z.infer<typeof LinkAction>;

export const LinkClaims = z.strictObject({
  /** The task's tenant. */
  t: z.string().min(1).max(64),
  /** The task. */
  k: z.uuid(),
  /** The request; for a `file` link, the artifact's path. */
  r: z.string().min(1).max(1024),
  /** A `file` link: the version of the artifact it gives (its SHA-256), as the mail listed it. */
  h: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  /** What following it decides. */
  d: LinkAction,
  /** The address it was mailed to (the decision is recorded as `mail:<address>`). */
  a: z.string().min(1).max(254),
  /** Expiry, epoch seconds. */
  e: z.number().int().positive(),
});
export type LinkClaims = z.infer<typeof LinkClaims>;

export type TokenCheck = { ok: true; claims: LinkClaims } | { ok: false; reason: 'malformed' | 'bad_signature' } | { ok: false; reason: 'expired'; claims: LinkClaims };

/** The least a secret may be: 32 characters. */
export const MIN_LINK_SECRET_LENGTH = 32;

const PREFIX = 'v1';
const mac = (secret: string, signed: string): Buffer => createHmac('sha256', secret).update(signed).digest();

export function signLinkToken(secret: string, claims: LinkClaims): string {
  const payload = Buffer.from(JSON.stringify(LinkClaims.parse(claims))).toString('base64url');
  return `${PREFIX}.${payload}.${mac(secret, `${PREFIX}.${payload}`).toString('base64url')}`;
}

/** Check a token's signature (in constant time), shape and expiry. */
export function verifyLinkToken(secret: string, token: string, now: Date): TokenCheck {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX || !/^[A-Za-z0-9_-]+$/.test(parts[1] ?? '') || !/^[A-Za-z0-9_-]+$/.test(parts[2] ?? '')) return { ok: false, reason: 'malformed' };
  const [, payload, signature] = parts as [string, string, string];
  // Compared as the text it is signed as: base64url decodes leniently (the last character's
  // unused bits), so comparing decoded bytes took four spellings of one signature.
  const expected = Buffer.from(mac(secret, `${PREFIX}.${payload}`).toString('base64url'));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'bad_signature' };
  let claims: LinkClaims;
  try {
    claims = LinkClaims.parse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  if (claims.e * 1000 <= now.getTime()) return { ok: false, reason: 'expired', claims };
  return { ok: true, claims };
}
