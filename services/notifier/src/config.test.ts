import { describe, expect, it } from 'vitest';
import { backoffOf, loadNotifierConfig } from './config.ts';
import { retrySchedule } from './schedule.ts';

describe('notifier mail configuration', () => {
  it('no SMTP_URL: mail off, no secret needed; PUBLIC_URL loses its trailing slash', () => {
    const c = loadNotifierConfig({ PUBLIC_URL: 'https://baton.example/' });
    expect(c.SMTP_URL).toBeUndefined();
    expect(c.PUBLIC_URL).toBe('https://baton.example');
  });
  it('SMTP_URL without MAIL_LINK_SECRET refuses to start, naming it; a short secret or a non-SMTP URL too', () => {
    expect(() => loadNotifierConfig({ SMTP_URL: 'smtp://mail:1025' })).toThrow(/MAIL_LINK_SECRET: required when SMTP_URL is set/);
    expect(() => loadNotifierConfig({ SMTP_URL: 'smtp://mail:1025', MAIL_LINK_SECRET: 'short' })).toThrow(/MAIL_LINK_SECRET: must be at least 32 characters/);
    expect(() => loadNotifierConfig({ SMTP_URL: 'http://mail', MAIL_LINK_SECRET: 'x'.repeat(32) })).toThrow(/SMTP_URL: must be smtp/);
    expect(loadNotifierConfig({ SMTP_URL: 'smtp://mail:1025', MAIL_LINK_SECRET: 'x'.repeat(32) }).MAIL_TIMEOUT_MS).toBe(30_000);
  });
});

describe('notifier retry configuration', () => {
  it('by default the attempts are spread over three days; WEBHOOK_RETRY_HORIZON_MS changes it; WEBHOOK_BACKOFF_MS overrides it', () => {
    const c = loadNotifierConfig({});
    expect(c.WEBHOOK_RETRY_HORIZON_MS).toBe(3 * 86_400_000);
    expect(backoffOf(c)).toEqual(retrySchedule(3 * 86_400_000, 12));
    expect(backoffOf(loadNotifierConfig({ WEBHOOK_RETRY_HORIZON_MS: '3600000', WEBHOOK_MAX_ATTEMPTS: '5' }))).toEqual(retrySchedule(3_600_000, 5));
    expect(backoffOf(loadNotifierConfig({ WEBHOOK_BACKOFF_MS: '100,200' }))).toEqual([100, 200]);
    expect(() => loadNotifierConfig({ WEBHOOK_RETRY_HORIZON_MS: 'soon' })).toThrow(/WEBHOOK_RETRY_HORIZON_MS/);
  });
});
