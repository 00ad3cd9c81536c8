import { cutText, DomainError, exists, isFinal, oneLine, own, RequestAlreadyDecidedError, type Command, type DecidedRequest, type PendingRequest, type TaskState } from '@baton/domain';
import { escapeHtml, humanTime, renderMarkdown, signLinkToken, verifyLinkToken, type LinkAction, type LinkClaims } from '@baton/mail';
import { readArtifactVersion } from '@baton/storage';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { keyIndex } from '../api-keys.ts';
import type { GatewayDeps } from '../deps.ts';
import { DOMAIN_STATUS, HttpError } from '../errors.ts';
import { runTaskCommand } from './commands.ts';
import { contentDisposition } from './tasks.ts';

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
// The answers by position (blank where a choice was ticked instead); `pick-<i>`: the choice ticked for question i.
const AnswerForm = z.looseObject({ token: Token, answer: z.array(z.string().max(20_000, 'must be at most 20000 characters')).max(50).default([]) });
const FORM_LIMIT = 256 * 1024;

class Page extends Error {
  readonly status: number;
  readonly title: string;
  readonly html: string;
  /** The task's prompt, for the page's title (a person with several tabs of these tells them apart). */
  readonly task: string | undefined;
  constructor(status: number, title: string, html: string, task?: string) {
    super(title);
    this.status = status;
    this.title = title;
    this.html = html;
    this.task = task;
  }
}

const sendPage = (reply: FastifyReply, p: { status: number; title: string; html: string; task?: string | undefined }): FastifyReply =>
  reply
    .status(p.status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer"><title>${escapeHtml(p.title)}${p.task ? ` · ${escapeHtml(oneLine(p.task, 60))}` : ''} — Baton</title><style>${PAGE_CSS}</style></head>` +
        `<body><main><h1>${escapeHtml(p.title)}</h1>${p.html}</main></body></html>`,
    );

/**
 * A phone is where most of these links are opened: long words and code wrap (a long token had
 * made the page pan sideways), fields are 16 px (iOS zooms into smaller ones), every control is
 * at least 44 px high, the choices of a question are shown, not hidden in a datalist.
 */
const PAGE_CSS = [
  'body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;line-height:1.45;color:#1b1f24;max-width:720px;margin:0 auto;padding:16px;overflow-wrap:anywhere}',
  'h1{font-size:1.4em}h2{font-size:1.1em}',
  'pre{background:#f4f5f7;padding:12px;border-radius:6px;white-space:pre-wrap;overflow-wrap:anywhere}',
  'input[type=text],textarea{font:inherit;font-size:16px;width:100%;box-sizing:border-box;padding:10px;min-height:44px;border:1px solid #8c959f;border-radius:6px}',
  'button{font:inherit;font-weight:600;min-height:44px;padding:10px 20px;border:0;border-radius:6px;color:#fff;cursor:pointer;margin:4px 8px 4px 0}',
  'fieldset{border:1px solid #d0d7de;border-radius:6px;margin:0 0 16px;padding:8px 12px}legend{font-weight:600;padding:0 4px}',
  '.choice{display:flex;align-items:center;gap:10px;min-height:44px}.choice input{width:22px;height:22px;margin:0}',
  '.links a{display:inline-block;min-height:44px;line-height:44px;margin-right:16px}',
  '.problem{color:#cf222e;font-weight:600}',
  'details{margin:12px 0}summary{min-height:44px;line-height:44px;cursor:pointer}',
].join('');

// Links and forms are relative to the page (/mail/…): behind a proxy that serves the gateway
// under a path (PUBLIC_URL=https://host/baton) they stay under it.
const consoleLink = (taskId: string): string => `<p class="links"><a href="../#/tasks/${escapeHtml(taskId)}">Open the task in the console</a> <small>(needs your team's API key)</small></p>`;
const para = (s: string): string => `<p>${escapeHtml(s)}</p>`;
const pre = (s: string): string => `<pre>${escapeHtml(s)}</pre>`;
const button = (label: string, colour: string): string => `<button type="submit" style="background:${colour}">${escapeHtml(label)}</button>`;
const hidden = (token: string): string => `<input type="hidden" name="token" value="${escapeHtml(token)}">`;

export const mailRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const keysNow = keyIndex(d.apiKeys);
  // The pages' forms post from the pages themselves: a form another site's page sends is refused, as on the API (the token stays the credential).
  app.addHook('onRequest', async (req) => {
    if (req.method === 'POST' && req.headers['sec-fetch-site'] === 'cross-site') throw new Page(403, 'Send this from the page the link opened', para("A form sent from another site's page is refused. Open the link from the mail again. Nothing was decided."));
  });
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

  /** The link's claims and the task it names (of its tenant) — or the page that says why not. */
  const task = async (token: string, actions: readonly LinkAction[]): Promise<{ claims: LinkClaims; loaded: Awaited<ReturnType<GatewayDeps['load']>> }> => {
    if (!d.mailLinkSecret) throw new Page(503, 'Mail links are off on this server', para('This gateway has no MAIL_LINK_SECRET, so it cannot check mailed links. Decide in the console instead.'));
    const check = verifyLinkToken(d.mailLinkSecret, token, d.now());
    if (!check.ok) {
      if (check.reason === 'expired') throw new Page(410, 'This link has expired', `${para(`Mailed links work for a limited time (this one until ${humanTime(new Date(check.claims.e * 1000).toISOString())}). Nothing was done.`)}${consoleLink(check.claims.k)}`);
      throw new Page(400, 'This link is not valid', para('It was changed, cut short, or not made by this server. Nothing was decided.'));
    }
    const { claims } = check;
    if (!actions.includes(claims.d)) throw new Page(400, 'This link is not valid here', para('It was made for another page. Nothing was decided.'));
    // A tenant whose every API key was taken away (offboarded, a leak answered by revoking them all): its mailed links go with them.
    if (d.apiKeys.required && !keysNow().tenants.has(claims.t)) throw new Page(403, 'This link no longer works', para("Its team has no access to this server any more (it has no API key). Nothing was done."));
    const loaded = await d.load(claims.k);
    // A task of another tenant (or none) is never shown: the link's tenant must be the task's.
    if (!exists(loaded.state) || loaded.state.tenantId !== claims.t) throw new Page(404, 'No such task', para('This link names a task this server does not have for its tenant. Nothing was decided.'));
    return { claims, loaded };
  };

  /** The links of each kind of request a mail page decides (a budget needs an amount: the console). */
  const ACTIONS = { approval: ['approve', 'reject'], clarification: ['answer'] } as const satisfies Record<string, readonly LinkAction[]>;

  /** The link's claims, the task it names (of its tenant) and the open request of that kind — or the page that says why not. */
  const open = async <K extends keyof typeof ACTIONS>(token: string, kind: K): Promise<{ claims: LinkClaims; loaded: Awaited<ReturnType<GatewayDeps['load']>>; request: Extract<PendingRequest, { kind: K }> }> => {
    const { claims, loaded } = await task(token, ACTIONS[kind]);
    const state = loaded.state;
    const decided = own(state.decidedRequests, claims.r);
    if (decided) throw alreadyDecided(claims, state, decided);
    if (isFinal(state)) throw new Page(409, `The task is ${state.status}`, `${para('Nothing is waiting for a decision any more. Nothing was changed.')}${consoleLink(state.id)}`, state.prompt);
    const request = own(state.pendingRequests, claims.r);
    if (!request) throw new Page(404, 'No such request', `${para('The task has no such request. Nothing was changed.')}${consoleLink(state.id)}`, state.prompt);
    // A page decides only its own kind, the form as its page (a decide link naming a question, never mailed so, is refused).
    if (request.kind !== kind) throw new Page(409, 'Decide in the console', `${para(`This request is not ${kind === 'approval' ? 'an approval' : 'a question'}.`)}${consoleLink(claims.k)}`, state.prompt);
    return { claims, loaded, request: request as Extract<PendingRequest, { kind: K }> };
  };

  /**
   * A request decided already: by this link's own address as it would have decided (a page
   * reloaded after its answer was lost, a form sent twice) it is done, said so plainly; by
   * anyone or anything else, who and when.
   */
  const alreadyDecided = (claims: LinkClaims, state: TaskState, decided: DecidedRequest): Page => {
    const mine = decided.by === `mail:${claims.a}`;
    const what = claims.d === 'answer' ? 'answered' : claims.d === 'approve' ? 'approved' : 'rejected';
    if (mine && (claims.d === 'answer' || decided.decision.startsWith(what))) return new Page(200, `Done: ${what}`, `${para(`You ${what} this at ${humanTime(decided.at)}; it is recorded. Nothing more to do.`)}${consoleLink(state.id)}`, state.prompt);
    return new Page(409, 'Already decided', `${para(`${new RequestAlreadyDecidedError(claims.r, { ...decided, at: humanTime(decided.at) }).message}. Nothing was changed.`)}${consoleLink(state.id)}`, state.prompt);
  };

  /** Record the decision through the API's path; a refusal (decided meanwhile, task ended) is a page. */
  const decide = async (claims: LinkClaims, loaded: Awaited<ReturnType<GatewayDeps['load']>>, command: Command): Promise<TaskState> => {
    try {
      return (await runTaskCommand(d, claims.k, loaded, () => command, `mail:${claims.a}`)).state;
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      const decided = err.code === 'request_already_decided' ? own((await d.load(claims.k)).state.decidedRequests, claims.r) : undefined;
      if (decided) throw alreadyDecided(claims, loaded.state, decided);
      throw new Page(DOMAIN_STATUS[err.code], 'Not decided', `${para(`${err.message}. Nothing was changed.`)}${consoleLink(claims.k)}`, loaded.state.prompt);
    }
  };

  const summary = (state: TaskState, request: PendingRequest): string => {
    const who = request.agentId === state.lead?.agentId ? 'The lead' : `Agent ${request.agentId}`;
    const head = para(`Task: ${cutText(state.prompt, 500)}`);
    // The plan says what the call does (an email's whole body, rendered); its exact input is folded away: on a phone it made the page nine screens long, Approve at the end.
    if (request.kind === 'approval') return `${head}${para(`${who} asks to call ${request.toolName}.`)}<h2>The plan</h2>${renderMarkdown(request.plan)}<details><summary>The exact input (JSON)</summary>${pre(JSON.stringify(request.input, null, 2))}</details>${para(`Nobody deciding by ${humanTime(request.deadline)}: it is ${request.onTimeout === 'approve' ? 'approved' : 'rejected'}.`)}`;
    if (request.kind === 'clarification') return `${head}${para(`${who} asks${request.deadline ? ` (nobody answering by ${humanTime(request.deadline)}, it goes on with its best judgement)` : ''}:`)}`;
    return head;
  };

  app.get('/mail/decide', async (req, reply) => {
    const { token } = parse(TokenQuery, req.query, 'query');
    const { claims, loaded, request } = await open(token, 'approval');
    // The other decision is a tap away (the mail had both links; a person who read on changes their mind here).
    const other = `decide?token=${signLinkToken(d.mailLinkSecret as string, { ...claims, d: claims.d === 'approve' ? 'reject' : 'approve' })}`;
    const form =
      claims.d === 'approve'
        ? `<form method="post" action="decide">${hidden(token)}${button('Approve', '#1a7f37')}</form><p class="links"><a href="${escapeHtml(other)}">Reject instead…</a></p>`
        : `<form method="post" action="decide">${hidden(token)}<p><label for="reason">Why (the agent is told, and re-plans with it)</label><textarea id="reason" name="reason" rows="4" maxlength="4000"></textarea></p>${button('Reject', '#cf222e')}</form><p class="links"><a href="${escapeHtml(other)}">Approve instead…</a></p>`;
    return sendPage(reply, { status: 200, title: claims.d === 'approve' ? 'Approve this request?' : 'Reject this request?', task: loaded.state.prompt, html: `${summary(loaded.state, request)}${form}${consoleLink(claims.k)}` });
  });

  app.post('/mail/decide', async (req, reply) => {
    const form = parse(DecideForm, req.body, 'body');
    const { claims, loaded } = await open(form.token, 'approval');
    const reason = form.reason?.trim() ? form.reason.trim() : undefined;
    const command: Command = { type: 'DecideApproval', requestId: claims.r, decision: claims.d === 'approve' ? 'approve' : 'reject', reason: claims.d === 'reject' ? (reason ?? `rejected by mail (${claims.a})`) : undefined, decidedBy: `mail:${claims.a}` };
    const state = await decide(claims, loaded, command);
    const done = claims.d === 'approve' ? 'Approved' : 'Rejected';
    return sendPage(reply, { status: 200, title: done, task: state.prompt, html: `${para(`${done} as ${claims.a}. The run goes on (task ${state.status}).`)}${consoleLink(claims.k)}` });
  });

  /**
   * The question's form: each question a field of its own; a question with choices shows them as
   * choices to tick (they had been hidden in a datalist, seen only once the field was tapped),
   * with the field for an answer of one's own. `given`: what was sent, kept when it is refused.
   */
  const answerForm = (token: string, request: Extract<PendingRequest, { kind: 'clarification' }>, given?: { text: string[]; picked: (string | undefined)[]; problems: string[] }): string => {
    const options = request.options ?? [];
    const problems = given?.problems.length ? `<div role="alert">${given.problems.map((m) => `<p class="problem">${escapeHtml(m)}</p>`).join('')}</div>` : '';
    const fields = request.questions
      .map((q, i) => {
        const picked = given?.picked[i];
        const text = given?.text[i] ?? '';
        const field = (label: string): string => `<p><label for="answer-${i}">${escapeHtml(label)}</label><input type="text" id="answer-${i}" name="answer" maxlength="20000" autocomplete="off" value="${escapeHtml(text)}"></p>`;
        if (options.length === 0) return `<fieldset><legend>${escapeHtml(q)}</legend>${field('Your answer')}</fieldset>`;
        const choices = options.map((o, j) => `<label class="choice"><input type="radio" name="pick-${i}" value="${escapeHtml(o)}"${picked === o ? ' checked' : ''} id="pick-${i}-${j}"> ${escapeHtml(o)}</label>`).join('');
        return `<fieldset><legend>${escapeHtml(q)}</legend>${choices}${field('Or in your own words')}</fieldset>`;
      })
      .join('');
    return `${problems}<form method="post" action="answer">${hidden(token)}${fields}${button('Send the answer', '#0969da')}</form>`;
  };

  app.get('/mail/answer', async (req, reply) => {
    const { token } = parse(TokenQuery, req.query, 'query');
    const { claims, loaded, request } = await open(token, 'clarification');
    const context = request.context ? para(request.context) : '';
    return sendPage(reply, { status: 200, title: 'Answer the question', task: loaded.state.prompt, html: `${summary(loaded.state, request)}${context}${answerForm(token, request)}${consoleLink(claims.k)}` });
  });

  app.post('/mail/answer', async (req, reply) => {
    const form = parse(AnswerForm, req.body, 'body');
    const { claims, loaded, request } = await open(form.token, 'clarification');
    // Each question's answer: the words written, else the choice ticked. One left blank: the form again, with what was given.
    // A choice is one of those offered (a crafted form's other value is refused, not taken as an answer); fields past the questions are not read.
    const offered = new Set(request.options ?? []);
    const pickOf = (i: number): string | undefined => (typeof form[`pick-${i}`] === 'string' ? (form[`pick-${i}`] as string) : undefined);
    const picked = request.questions.map((_, i) => {
      const p = pickOf(i);
      return p !== undefined && offered.has(p) ? p : undefined;
    });
    const text = request.questions.map((_, i) => form.answer[i] ?? '');
    const answers = request.questions.map((_, i) => text[i]?.trim() || picked[i] || '');
    const problems = [
      ...request.questions.flatMap((_, i) => (pickOf(i) !== undefined && picked[i] === undefined ? [`Question ${i + 1}: that choice is not one of those offered.`] : [])),
      ...answers.flatMap((a, i) => (a === '' ? [request.questions.length === 1 ? 'Write an answer, or tick a choice.' : `Question ${i + 1} has no answer: write one${request.options?.length ? ', or tick a choice' : ''}.`] : [])),
    ];
    if (problems.length > 0) return sendPage(reply, { status: 400, title: 'Answer the question', task: loaded.state.prompt, html: `${summary(loaded.state, request)}${answerForm(form.token, request, { text, picked, problems })}${consoleLink(claims.k)}` });
    const state = await decide(claims, loaded, { type: 'AnswerClarification', requestId: claims.r, answers, answeredBy: `mail:${claims.a}` });
    return sendPage(reply, { status: 200, title: 'Answered', task: state.prompt, html: `${para(`Thank you: the answer was recorded as ${claims.a}; the agent goes on (task ${state.status}).`)}${consoleLink(claims.k)}` });
  });

  /**
   * A file of a finished task, from the link its mail listed (no API key: a mail's reader has
   * none): the version the mail named, under the same headers as the API's artifact download.
   */
  app.get('/mail/file', async (req, reply) => {
    const { token } = parse(TokenQuery, req.query, 'query');
    const { claims, loaded } = await task(token, ['file']);
    const listed = loaded.state.artifacts.find((a) => a.path === claims.r);
    // The version named must be one the log stored under that path (versions are kept by hash alone).
    const sha = claims.h ?? listed?.sha256;
    const stored = sha !== undefined && loaded.events.some((e) => e.type === 'ArtifactStored' && e.data.path === claims.r && e.data.sha256 === sha);
    const content = stored ? await d.bulk(() => readArtifactVersion(d.pool, claims.k, sha)) : null;
    if (!content) throw new Page(404, 'No such file', `${para(`The task has no file '${claims.r}' in the version this mail listed.`)}${consoleLink(claims.k)}`, loaded.state.prompt);
    return reply
      // The path's media type (a version of one path has the path's type).
      .header('content-type', listed?.mediaType ?? 'application/octet-stream')
      // Not kept by the browser: the link stops working when it expires, a cached copy would not (a shared computer).
      .header('cache-control', 'no-store')
      .header('referrer-policy', 'no-referrer')
      .header('content-disposition', contentDisposition('inline', claims.r.split('/').pop() ?? claims.r))
      .header('content-security-policy', "default-src 'none'; sandbox")
      .send(content);
  });
};
