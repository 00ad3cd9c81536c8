import { createTransport } from 'nodemailer';

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

/** What the SMTP server said: the recipients it took and refused, its last reply. */
export interface SendResult {
  accepted: string[];
  rejected: string[];
  code: number | null;
  response: string;
}

/**
 * The SMTP server did not take the mail. `permanent`: it refused it (5xx), so another attempt
 * would be refused too; otherwise (4xx, could not connect, timed out) it may be tried again.
 */
export class SendError extends Error {
  readonly code: number | null;
  readonly permanent: boolean;
  constructor(message: string, code: number | null, permanent: boolean, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.permanent = permanent;
  }
}

export interface Mailer {
  send(mail: OutgoingMail): Promise<SendResult>;
  close(): void;
}

/** SMTP through nodemailer, from SMTP_URL; STARTTLS when the server offers it, TLS from the start with smtps://. */
export function smtpMailer(url: string, timeoutMs: number): Mailer {
  // The URL's own settings, plus timeouts; attachments are given as bytes, never read from a path or URL.
  const transport = createTransport({ url, connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs, disableFileAccess: true, disableUrlAccess: true });
  return {
    async send(m) {
      try {
        const info = await transport.sendMail({ from: m.from, to: m.to, subject: m.subject, text: m.text, html: m.html, messageId: m.messageId, attachments: m.attachments, headers: m.headers });
        const rejected = (info.rejected ?? []).map(String);
        const accepted = (info.accepted ?? []).map(String);
        const code = Number(/^(\d{3})/.exec(info.response ?? '')?.[1] ?? NaN);
        return { accepted, rejected, code: Number.isFinite(code) ? code : null, response: info.response ?? '' };
      } catch (err) {
        const e = err as Error & { responseCode?: number; response?: string };
        const code = typeof e.responseCode === 'number' ? e.responseCode : null;
        throw new SendError(e.response ?? e.message, code, code !== null && code >= 500, { cause: err });
      }
    },
    close: () => transport.close(),
  };
}
