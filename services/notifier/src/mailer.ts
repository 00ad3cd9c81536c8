import { Readable } from 'node:stream';
import { createTransport } from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer';

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

/** SMTP through nodemailer, from SMTP_URL; STARTTLS when the server offers it, TLS from the start with smtps://. */
export function smtpMailer(url: string, timeoutMs: number): Mailer {
  // The URL's own settings, plus timeouts; attachments are given as bytes, never read from a path or URL.
  const transport = createTransport({ url, connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs, disableFileAccess: true, disableUrlAccess: true });
  return {
    async send(m, o = {}) {
      // The message is built first and given as a stream SMTP reads only after DATA: once it has
      // been read to its end, the server holds all of it, and a missing answer is not a refusal.
      const message = await new Promise<Buffer>((resolve, reject) =>
        new MailComposer({ from: m.from, to: m.to, subject: m.subject, text: m.text, html: m.html, messageId: m.messageId, attachments: m.attachments, headers: m.headers, disableFileAccess: true, disableUrlAccess: true })
          .compile()
          .build((err, built) => (err ? reject(err) : resolve(built))),
      );
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
      try {
        const info = await transport.sendMail({ envelope: { from: m.from, to: m.to }, raw });
        const rejected = (info.rejected ?? []).map(String);
        const accepted = (info.accepted ?? []).map(String);
        const code = Number(/^(\d{3})/.exec(info.response ?? '')?.[1] ?? NaN);
        const replies = new Map((info.rejectedErrors ?? []).map((e) => [String((e as Error & { recipient?: unknown }).recipient ?? ''), (e as Error & { response?: string }).response ?? e.message]));
        const refusals = rejected.map((a) => (replies.get(a) ? `${a} (${replies.get(a)})` : a));
        return { accepted, rejected, refusals, code: Number.isFinite(code) ? code : null, response: info.response ?? '' };
      } catch (err) {
        if (refused) throw refused;
        const e = err as Error & { responseCode?: number; response?: string };
        const code = typeof e.responseCode === 'number' ? e.responseCode : null;
        if (code === null && handedOver) throw new SendError(`no answer after the whole message was sent (${e.message})`, null, false, { cause: err, outcomeUnknown: true });
        throw new SendError(e.response ?? e.message, code, code !== null && code >= 500, { cause: err });
      }
    },
    close: () => transport.close(),
  };
}
