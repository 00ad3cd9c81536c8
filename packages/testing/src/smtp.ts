import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** A mail as the test SMTP server received it, parsed with mailparser. */
export interface CaughtMail {
  /** The envelope: who it was sent for (RCPT TO). */
  envelopeTo: string[];
  from: string;
  to: string[];
  subject: string;
  text: string;
  html: string;
  messageId: string;
  headers: Map<string, unknown>;
  attachments: { filename: string; contentType: string; content: Buffer }[];
}

export interface SmtpCatcher {
  /** smtp://127.0.0.1:<port> */
  url: string;
  /** Every mail accepted, in order. */
  mails: CaughtMail[];
  /** Every DATA received (accepted or refused), in order. */
  received: number;
  /** Refuse the next `n` mails with this reply (e.g. 451 try again later, 550 no such user). */
  refuseNext(n: number, code: number, message: string): void;
  /** Hold every mail's final reply until the returned function is called (a slow server). */
  hold(): () => void;
  /** Hold every RCPT TO's reply until the returned function is called (a server stuck before DATA). */
  holdRecipients(): () => void;
  /** Refuse this recipient at RCPT TO with this reply, the others taken (e.g. 550 no such user). */
  refuseRecipient(address: string, code: number, message: string): void;
  close(): Promise<void>;
}

/** A gate set where `set` keeps it, and the function that opens it (and clears it). */
function held(set: (gate: Promise<void> | null) => void): () => void {
  let release: () => void = () => {};
  set(new Promise<void>((r) => (release = r)));
  return () => {
    set(null);
    release();
  };
}

/**
 * A real SMTP server in the test process (smtp-server; no STARTTLS; AUTH only when `auth` is
 * given, then required), which parses what it accepts with mailparser. For tests of the
 * notifier's mail, in process or with the services as processes.
 */
export async function smtpCatcher(o: { auth?: { user: string; pass: string } } = {}): Promise<SmtpCatcher> {
  let refusals: { left: number; code: number; message: string } | null = null;
  let gate: Promise<void> | null = null;
  let rcptGate: Promise<void> | null = null;
  const refusedRecipients = new Map<string, { code: number; message: string }>();
  const catcher: SmtpCatcher = {
    url: '',
    mails: [],
    received: 0,
    refuseNext(n, code, message) {
      refusals = { left: n, code, message };
    },
    hold: () => held((g) => (gate = g)),
    holdRecipients: () => held((g) => (rcptGate = g)),
    refuseRecipient(address, code, message) {
      refusedRecipients.set(address, { code, message });
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  const server = new SMTPServer({
    authOptional: !o.auth,
    allowInsecureAuth: true,
    disabledCommands: o.auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    logger: false,
    size: 50 * 1024 * 1024,
    onAuth(auth, _session, callback) {
      const ok = o.auth !== undefined && auth.username === o.auth.user && auth.password === o.auth.pass;
      callback(ok ? null : Object.assign(new Error('535 authentication failed'), { responseCode: 535 }), ok ? { user: auth.username } : undefined);
    },
    onRcptTo(address, _session, callback) {
      const refusal = refusedRecipients.get(address.address);
      const answer = () => callback(refusal ? Object.assign(new Error(refusal.message), { responseCode: refusal.code }) : undefined);
      if (rcptGate) void rcptGate.then(answer);
      else answer();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        void (async () => {
          catcher.received++;
          if (gate) await gate;
          if (refusals && refusals.left > 0) {
            refusals.left--;
            return callback(Object.assign(new Error(refusals.message), { responseCode: refusals.code }));
          }
          const parsed = await simpleParser(Buffer.concat(chunks));
          const addresses = (v: unknown): string[] => {
            const list = Array.isArray(v) ? v : v ? [v] : [];
            return list.flatMap((a: { value?: { address?: string }[] }) => (a.value ?? []).map((x) => x.address ?? ''));
          };
          catcher.mails.push({
            envelopeTo: session.envelope.rcptTo.map((r) => r.address),
            from: addresses(parsed.from)[0] ?? '',
            to: addresses(parsed.to),
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
            html: typeof parsed.html === 'string' ? parsed.html : '',
            messageId: parsed.messageId ?? '',
            headers: parsed.headers as Map<string, unknown>,
            attachments: parsed.attachments.map((a) => ({ filename: a.filename ?? '', contentType: a.contentType, content: a.content })),
          });
          callback();
        })().catch((err: unknown) => callback(err as Error));
      });
    },
  });
  // A client that goes away mid-conversation (a notifier killed) resets its connection: that
  // connection's error, not the server's — unheard, smtp-server would throw it and end the process.
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  catcher.url = `smtp://127.0.0.1:${(server.server.address() as { port: number }).port}`;
  return catcher;
}
