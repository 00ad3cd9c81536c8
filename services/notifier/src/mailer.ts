import { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer';
import { parseConnectionUrl } from 'nodemailer/lib/shared';
import SMTPConnection from 'nodemailer/lib/smtp-connection';

/** A mail as the notifier hands it to SMTP. */
export interface OutgoingMail {
  from: string;
  to: string[];
  subject: string;
  text: string;
  html: string;
  /** Stable for a (task, moment, recipient): the same on every attempt. */
  messageId: string;
  attachments: { filename: string; content: Buffer; contentType: string }[];
  headers: Record<string, string>;
}

/** What the SMTP server said: the recipients it took and refused (each refusal with its reply), its last reply. */
export interface SendResult {
  accepted: string[];
  rejected: string[];
  /** `address (reply)` per refused recipient, e.g. `b@example.com (450 greylisted)`. */
  refusals: string[];
  code: number | null;
  response: string;
}

/**
 * The SMTP server did not take the mail, or did not say. `permanent`: it refused it (5xx), so
 * another attempt would be refused too; `outcomeUnknown`: the whole message was handed over and
 * no answer came (timed out, the connection dropped) — it may have gone out, and sending it again
 * may make two. Otherwise (4xx, could not connect, no answer before the message) it may be tried again.
 */
export class SendError extends Error {
  readonly code: number | null;
  readonly permanent: boolean;
  readonly outcomeUnknown: boolean;
  constructor(message: string, code: number | null, permanent: boolean, options?: ErrorOptions & { outcomeUnknown?: boolean }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.permanent = permanent;
    this.outcomeUnknown = options?.outcomeUnknown ?? false;
  }
}

export interface Mailer {
  /**
   * Send one mail. `beforeData` runs once the server has said go ahead after DATA, before the
   * message's first byte; if it throws, nothing is sent and `send` throws that error.
   */
  send(mail: OutgoingMail, o?: { beforeData?: () => Promise<void> }): Promise<SendResult>;
  close(): void;
}

/**
 * SMTP through nodemailer's SMTP connection, from SMTP_URL (its user and password log in when the
 * server offers AUTH); STARTTLS when the server offers it, TLS from the start with smtps://. One
 * connection per mail. The connection, not nodemailer's transport: the transport starts reading
 * the message before MAIL FROM, so "handed over" could not be told from "stuck at RCPT"; the
 * connection reads it only once the server has answered DATA.
 */
export function smtpMailer(url: string, timeoutMs: number): Mailer {
  // The URL's own settings, plus timeouts.
  const { auth, ...server } = parseConnectionUrl(url);
  const options: SMTPConnection.Options = { ...server, connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs };
  const open = new Set<SMTPConnection>();
  return {
    async send(m, o = {}) {
      // Attachments are given as bytes, never read from a path or URL.
      const composed = new MailComposer({ from: m.from, to: m.to, subject: m.subject, text: m.text, html: m.html, messageId: m.messageId, attachments: m.attachments, headers: m.headers, disableFileAccess: true, disableUrlAccess: true }).compile();
      const message = await new Promise<Buffer>((resolve, reject) => composed.build((err, built) => (err ? reject(err) : resolve(built))));
      // The addresses alone (`Baton <baton@example.com>` → baton@example.com), as the transport took them.
      const envelope = composed.getEnvelope();
      // Read only after the server said go ahead to DATA: `beforeData` runs then; once the stream
      // has been read to its end the server holds all of it, and a missing answer is not a refusal.
      let handedOver = false;
      let refused: unknown = null;
      let started = false;
      const raw = new Readable({
        read() {
          if (started) return;
          started = true;
          (o.beforeData ?? (async () => {}))().then(
            () => {
              this.push(message);
              this.push(null);
            },
            (err: unknown) => {
              refused = err;
              this.destroy(err as Error);
            },
          );
        },
      }).once('end', () => (handedOver = true));
      const connection = new SMTPConnection(options);
      open.add(connection);
      try {
        const info = await new Promise<SMTPConnection.SentMessageInfo>((resolve, reject) => {
          connection.on('error', reject);
          connection.on('end', () => reject(new Error('the server closed the connection')));
          connection.connect((err) => {
            if (err) return reject(err);
            const send = () => connection.send(envelope, raw, (err, sent) => (err ? reject(err) : resolve(sent)));
            if (auth && connection.allowsAuth) connection.login(auth, (err) => (err ? reject(err) : send()));
            else send();
          });
        });
        connection.quit();
        const rejected = info.rejected.map(String);
        const accepted = info.accepted.map(String);
        const code = Number(/^(\d{3})/.exec(info.response)?.[1] ?? NaN);
        const replies = new Map((info.rejectedErrors ?? []).map((e) => [String((e as Error & { recipient?: unknown }).recipient ?? ''), e.response ?? e.message]));
        const refusals = rejected.map((a) => (replies.get(a) ? `${a} (${replies.get(a)})` : a));
        return { accepted, rejected, refusals, code: Number.isFinite(code) ? code : null, response: info.response };
      } catch (err) {
        connection.close();
        if (refused) throw refused;
        const e = err as Error & { responseCode?: number; response?: string };
        const code = typeof e.responseCode === 'number' ? e.responseCode : null;
        if (code === null && handedOver) throw new SendError(`no answer after the whole message was sent (${e.message})`, null, false, { cause: err, outcomeUnknown: true });
        throw new SendError(e.response ?? e.message, code, code !== null && code >= 500, { cause: err });
      } finally {
        open.delete(connection);
      }
    },
    close: () => {
      for (const c of open) c.close();
    },
  };
}
