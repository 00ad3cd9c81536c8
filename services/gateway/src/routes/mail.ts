import { cutText, DomainError, exists, isFinal, own, RequestAlreadyDecidedError, type Command, type PendingRequest, type TaskState } from '@baton/domain';
import { escapeHtml, renderMarkdown, verifyLinkToken, type LinkAction, type LinkClaims } from '@baton/mail';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { GatewayDeps } from '../deps.ts';
import { DOMAIN_STATUS, HttpError } from '../errors.ts';
import { runTaskCommand } from './commands.ts';

/**
 * The pages behind mailed links (docs/email.md). A link's GET only shows what it would do — mail
 * scanners fetch links — and a form; the form's POST decides, through the API's own path
 * (`runTaskCommand`: DecideApproval / AnswerClarification, decided by `mail:<address>`). Every
 * outcome is a page: a tampered, expired or foreign link, a request decided already, a task that
 * ended — each says so and changes nothing.
 */

const Token = z.string().min(1, 'is missing').max(4000);
const TokenQuery = z.object({ token: Token });
const DecideForm = z.object({ token: Token, reason: z.string().max(4000, 'must be at most 4000 characters').optional() });
const AnswerForm = z.object({ token: Token, answer: z.array(z.string().trim().min(1, 'must not be empty').max(20_000, 'must be at most 20000 characters')).min(1, 'is missing').max(50) });
const FORM_LIMIT = 256 * 1024;

class Page extends Error {
  readonly status: number;
  readonly title: string;
  readonly html: string;
  constructor(status: number, title: string, html: string) {
    super(title);
    this.status = status;
    this.title = title;
    this.html = html;
  }
}

const sendPage = (reply: FastifyReply, p: { status: number; title: string; html: string }): FastifyReply =>
  reply
    .status(p.status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    .send(
      `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer"><title>${escapeHtml(p.title)} — Baton</title></head>` +
        `<body style="font-family:system-ui,-apple-system,Segoe UI,sans-serif;line-height:1.45;color:#1b1f24;max-width:720px;margin:0 auto;padding:16px"><h1 style="font-size:1.4em">${escapeHtml(p.title)}</h1>${p.html}</body></html>`,
    );

// Links and forms are relative to the page (/mail/…): behind a proxy that serves the gateway
// under a path (PUBLIC_URL=https://host/baton) they stay under it.
const consoleLink = (taskId: string): string => `<p><a href="../#/tasks/${escapeHtml(taskId)}">Open the task in the console</a></p>`;
const para = (s: string): string => `<p>${escapeHtml(s)}</p>`;
const pre = (s: string): string => `<pre style="background:#f4f5f7;padding:12px;border-radius:6px;white-space:pre-wrap;word-break:break-word">${escapeHtml(s)}</pre>`;
const button = (label: string, colour: string): string => `<button type="submit" style="padding:10px 18px;border:0;border-radius:6px;background:${colour};color:#fff;font-weight:600;font-size:1em;cursor:pointer">${escapeHtml(label)}</button>`;
const hidden = (token: string): string => `<input type="hidden" name="token" value="${escapeHtml(token)}">`;

export const mailRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  // Forms post application/x-www-form-urlencoded (in this scope only: the API stays JSON).
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_req, body, done) => {
    const params = new URLSearchParams(body as string);
    const form: Record<string, string | string[]> = {};
    for (const key of new Set(params.keys())) form[key] = key === 'answer' ? params.getAll(key) : (params.get(key) ?? '');
    done(null, form);
  });
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof Page) return sendPage(reply, err);
    // The gateway's own refusals (text rules: a NUL in a reason) are HttpErrors; the framework's carry statusCode.
    const status = err instanceof HttpError ? err.status : ((err as { statusCode?: number }).statusCode ?? 500);
    if (status >= 500) d.log.error({ err }, 'mail page failed');
    return sendPage(reply, { status, title: status >= 500 ? 'Something went wrong' : 'This request could not be read', html: para(status >= 500 ? 'Nothing was decided. Try again, or use the console.' : (err as Error).message) });
  });

  const parse = <T>(schema: z.ZodType<T>, value: unknown, where: string): T => {
    const r = schema.safeParse(value ?? {});
    if (r.success) return r.data;
    throw new Page(400, 'This request could not be read', `<ul>${r.error.issues.map((i) => `<li>${escapeHtml(`${where}.${i.path.join('.')}: ${i.message}`)}</li>`).join('')}</ul>`);
  };

  /** The link's claims, the task it names (of its tenant) and the open request — or the page that says why not. */
  const open = async (token: string, actions: readonly LinkAction[]): Promise<{ claims: LinkClaims; loaded: Awaited<ReturnType<GatewayDeps['load']>>; request: PendingRequest }> => {
    if (!d.mailLinkSecret) throw new Page(503, 'Mail links are off on this server', para('This gateway has no MAIL_LINK_SECRET, so it cannot check mailed links. Decide in the console instead.'));
    const check = verifyLinkToken(d.mailLinkSecret, token, d.now());
    if (!check.ok) {
      if (check.reason === 'expired') throw new Page(410, 'This link has expired', para('Mailed links work for a limited time. Nothing was decided; open the task in the console to decide.'));
      throw new Page(400, 'This link is not valid', para('It was changed, cut short, or not made by this server. Nothing was decided.'));
    }
    const { claims } = check;
    if (!actions.includes(claims.d)) throw new Page(400, 'This link is not valid here', para('It was made for another page. Nothing was decided.'));
    const loaded = await d.load(claims.k);
    // A task of another tenant (or none) is never shown: the link's tenant must be the task's.
    if (!exists(loaded.state) || loaded.state.tenantId !== claims.t) throw new Page(404, 'No such task', para('This link names a task this server does not have for its tenant. Nothing was decided.'));
    const state = loaded.state;
    const decided = own(state.decidedRequests, claims.r);
    if (decided) throw new Page(409, 'Already decided', `${para(`${new RequestAlreadyDecidedError(claims.r, decided).message}. Nothing was changed.`)}${consoleLink(state.id)}`);
    if (isFinal(state)) throw new Page(409, `The task is ${state.status}`, `${para('Nothing is waiting for a decision any more. Nothing was changed.')}${consoleLink(state.id)}`);
    const request = own(state.pendingRequests, claims.r);
    if (!request) throw new Page(404, 'No such request', `${para('The task has no such request. Nothing was changed.')}${consoleLink(state.id)}`);
    return { claims, loaded, request };
  };

  /** Record the decision through the API's path; a refusal (decided meanwhile, task ended) is a page. */
  const decide = async (claims: LinkClaims, loaded: Awaited<ReturnType<GatewayDeps['load']>>, command: Command): Promise<TaskState> => {
    try {
      return (await runTaskCommand(d, claims.k, loaded, () => command, `mail:${claims.a}`)).state;
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      throw new Page(DOMAIN_STATUS[err.code], err.code === 'request_already_decided' ? 'Already decided' : 'Not decided', `${para(`${err.message}. Nothing was changed.`)}${consoleLink(claims.k)}`);
    }
  };

  const summary = (state: TaskState, request: PendingRequest): string => {
    const who = request.agentId === state.lead?.agentId ? 'The lead' : `Agent ${request.agentId}`;
    const head = para(`Task: ${cutText(state.prompt, 500)}`);
    if (request.kind === 'approval') return `${head}${para(`${who} asks to call ${request.toolName}.`)}<h2 style="font-size:1.1em">The plan</h2>${renderMarkdown(request.plan)}<h2 style="font-size:1.1em">The input</h2>${pre(JSON.stringify(request.input, null, 2))}`;
    if (request.kind === 'clarification') return `${head}${para(`${who} asks:`)}`;
    return head;
  };

  app.get('/mail/decide', async (req, reply) => {
    const { token } = parse(TokenQuery, req.query, 'query');
    const { claims, loaded, request } = await open(token, ['approve', 'reject']);
    if (request.kind !== 'approval') throw new Page(409, 'Decide in the console', `${para('This request is not an approval.')}${consoleLink(claims.k)}`);
    const form =
      claims.d === 'approve'
        ? `<form method="post" action="decide">${hidden(token)}${button('Approve', '#1a7f37')}</form>`
        : `<form method="post" action="decide">${hidden(token)}<p><label>Why (the agent is told, and re-plans with it)<br><textarea name="reason" rows="3" maxlength="4000" style="width:100%"></textarea></label></p>${button('Reject', '#cf222e')}</form>`;
    return sendPage(reply, { status: 200, title: claims.d === 'approve' ? 'Approve this request?' : 'Reject this request?', html: `${summary(loaded.state, request)}${form}${consoleLink(claims.k)}` });
  });

  app.post('/mail/decide', async (req, reply) => {
    const form = parse(DecideForm, req.body, 'body');
    const { claims, loaded } = await open(form.token, ['approve', 'reject']);
    const reason = form.reason?.trim() ? form.reason.trim() : undefined;
    const command: Command = { type: 'DecideApproval', requestId: claims.r, decision: claims.d === 'approve' ? 'approve' : 'reject', reason: claims.d === 'reject' ? (reason ?? `rejected by mail (${claims.a})`) : undefined, decidedBy: `mail:${claims.a}` };
    const state = await decide(claims, loaded, command);
    const done = claims.d === 'approve' ? 'Approved' : 'Rejected';
    return sendPage(reply, { status: 200, title: done, html: `${para(`${done} as ${claims.a}. The run goes on (task ${state.status}).`)}${consoleLink(claims.k)}` });
  });

  app.get('/mail/answer', async (req, reply) => {
    const { token } = parse(TokenQuery, req.query, 'query');
    const { claims, loaded, request } = await open(token, ['answer']);
    if (request.kind !== 'clarification') throw new Page(409, 'Decide in the console', `${para('This request is not a question.')}${consoleLink(claims.k)}`);
    const options = request.options?.length ? `<datalist id="options">${request.options.map((o) => `<option value="${escapeHtml(o)}"></option>`).join('')}</datalist>` : '';
    const fields = request.questions
      .map((q) => `<p><label>${escapeHtml(q)}<br><input name="answer" required maxlength="20000" style="width:100%"${options ? ' list="options"' : ''}></label></p>`)
      .join('');
    const context = request.context ? para(request.context) : '';
    return sendPage(reply, { status: 200, title: 'Answer the question', html: `${summary(loaded.state, request)}${context}<form method="post" action="answer">${hidden(token)}${fields}${options}${button('Send the answer', '#0969da')}</form>${consoleLink(claims.k)}` });
  });

  app.post('/mail/answer', async (req, reply) => {
    const form = parse(AnswerForm, req.body, 'body');
    const { claims, loaded } = await open(form.token, ['answer']);
    const state = await decide(claims, loaded, { type: 'AnswerClarification', requestId: claims.r, answers: form.answer, answeredBy: `mail:${claims.a}` });
    return sendPage(reply, { status: 200, title: 'Answered', html: `${para(`Thank you: the answer was recorded as ${claims.a}; the agent goes on (task ${state.status}).`)}${consoleLink(claims.k)}` });
  });
};
