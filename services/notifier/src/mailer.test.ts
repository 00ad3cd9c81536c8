import { smtpCatcher } from '@baton/testing';
import { describe, expect, test } from 'vitest';
import { type OutgoingMail, SendError, smtpMailer } from './mailer.ts';

// The mailer against a real SMTP server in this process (no Postgres, no NATS): when the
// message counts as handed over, which decides whether a failed attempt may be sent again.
const mail: OutgoingMail = { from: 'a@example.com', to: ['b@example.com'], subject: 's', text: 'the text', html: '<p>h</p>', messageId: '<m@x>', attachments: [], headers: {} };

describe('smtpMailer', () => {
  test('a server stuck at RCPT TO: nothing was handed over — beforeData never ran, and the failure may be tried again', async () => {
    const smtp = await smtpCatcher();
    const release = smtp.holdRecipients();
    let marked = 0;
    const err = await smtpMailer(smtp.url, 300)
      .send(mail, { beforeData: async () => void marked++ })
      .catch((e: unknown) => e);
    release();
    await smtp.close();
    expect(err).toBeInstanceOf(SendError);
    expect(err).toMatchObject({ outcomeUnknown: false, permanent: false });
    expect(marked).toBe(0); // before: the message was read (and marked handed over) before MAIL FROM
    expect(smtp.received).toBe(0);
  });

  test('a server stuck after the whole message: outcome unknown, beforeData ran once, before the message reached the server', async () => {
    const smtp = await smtpCatcher();
    const release = smtp.hold();
    let receivedWhenMarked = -1;
    const err = await smtpMailer(smtp.url, 300)
      .send(mail, { beforeData: async () => void (receivedWhenMarked = smtp.received) })
      .catch((e: unknown) => e);
    release();
    await smtp.close();
    expect(err).toMatchObject({ name: 'SendError', outcomeUnknown: true });
    expect(receivedWhenMarked).toBe(0);
  });

  test('beforeData refusing: nothing is sent and its error is what send throws', async () => {
    const smtp = await smtpCatcher();
    const refusal = new Error('lease lost');
    const err = await smtpMailer(smtp.url, 2000)
      .send(mail, { beforeData: () => Promise.reject(refusal) })
      .catch((e: unknown) => e);
    await smtp.close();
    expect(err).toBe(refusal);
    expect(smtp.received).toBe(0);
  });

  test('a server that requires AUTH: the URL\'s user and password log in; wrong ones are refused (535, for good)', async () => {
    const smtp = await smtpCatcher({ auth: { user: 'baton', pass: 'p@ss word' } });
    const url = new URL(smtp.url);
    url.username = 'baton';
    url.password = encodeURIComponent('p@ss word');
    const sent = await smtpMailer(url.href, 2000).send(mail);
    expect(sent).toMatchObject({ accepted: ['b@example.com'], rejected: [], code: 250 });
    expect(smtp.mails.map((m) => m.text.trim())).toEqual(['the text']);
    url.password = 'wrong';
    const err = await smtpMailer(url.href, 2000).send(mail).catch((e: unknown) => e);
    await smtp.close();
    expect(err).toMatchObject({ name: 'SendError', code: 535, permanent: true });
  });
});
