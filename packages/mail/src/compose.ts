import { cutText, excerpt, oneLine, planAcceptance, type PendingRequest, type TaskState } from '@baton/domain';
import { escapeHtml, renderMarkdown } from './markdown.ts';
import { humanTime } from './time.ts';

/**
 * What each mail says, as pure functions of the task (docs/email.md): a request waiting for a
 * person (approval, question, budget), the end of a run (the report, or why it failed or was
 * cancelled), and an agent's outbox mail. Each has a subject, a plain-text part and an HTML part
 * (markdown rendered with markdown-it, everything else escaped).
 */
export interface MailContent {
  subject: string;
  text: string;
  html: string;
}

/** One-click links of a request mail (absent: not offered for this kind of request). */
export interface RequestLinks {
  approve?: string;
  reject?: string;
  answer?: string;
  console: string;
  /** When the signed links stop working. */
  expiresAt: string;
}

const MAX_INPUT_CHARS = 20_000;
const taskLine = (task: TaskState): string => oneLine(task.prompt, 80);
const clip = (s: string, max: number): string => {
  const kept = cutText(s, max);
  return kept.length < s.length ? `${kept}\n… (${s.length - kept.length} more characters; see the console)` : s;
};

// Sized for a thumb (44 px high); long words and code wrap — a long token had made the mail pan sideways on a phone.
const button = (href: string, label: string, colour: string): string =>
  `<a href="${escapeHtml(href)}" style="display:inline-block;padding:12px 20px;margin:0 8px 8px 0;border-radius:6px;background:${colour};color:#fff;text-decoration:none;font-weight:600;line-height:20px">${escapeHtml(label)}</a>`;
const BODY_STYLE = 'font-family:system-ui,-apple-system,Segoe UI,sans-serif;line-height:1.45;color:#1b1f24;max-width:720px;margin:0 auto;padding:16px;overflow-wrap:anywhere;word-break:break-word';
const head = (title: string): string => `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title></head>`;
const layout = (title: string, inner: string): string =>
  `${head(title)}<body style="${BODY_STYLE}">${inner}<hr style="border:none;border-top:1px solid #ddd;margin-top:24px"><p style="color:#666;font-size:12px">Sent by Baton.</p></body></html>`;
const pre = (s: string): string => `<pre style="background:#f4f5f7;padding:12px;border-radius:6px;white-space:pre-wrap;word-break:break-word;overflow-wrap:anywhere">${escapeHtml(defanged(s))}</pre>`;

/**
 * Text a mail client may turn into links itself (a plain-text part, a block of JSON) with only
 * http(s) and mailto left linkable, as in the HTML: another scheme's `://`, `search-ms:`-like
 * schemes that open local programs, and a Windows share (`\\host\share`, which hands the
 * reader's credentials to the host) are written so no client links them (`smb[:]//host`,
 * `[\\]host\share`).
 */
export function defanged(text: string): string {
  return text
    .replace(/\b([a-z][a-z0-9+.-]{0,31}):(?=\/\/)/gi, (m, scheme: string) => (/^(https?|mailto)$/i.test(scheme) ? m : `${scheme}[:]`))
    .replace(/\b(search-ms|ms-[a-z0-9-]+|javascript|vbscript):(?!\/\/)|\b(file):(?=\/)|\b(data):(?=[a-z]+\/[a-z0-9.+-]+[;,])/gi, (m) => `${m.slice(0, -1)}[:]`)
    .replace(/(^|[\s(<"'])\\\\(?=[^\s\\])/g, '$1[\\\\]');
}

/** A request the same agent made before for the same tool, and the rejection that closed it. */
export interface EarlierRejection {
  requestId: string;
  /** The person's reason, or that nobody decided before the deadline. */
  reason: string;
}

/**
 * The approvals the request's agent asked before this one for the same tool that were rejected
 * (by a person or the deadline) before it was asked and since the last one granted, oldest
 * first: a revised plan's history, for its mail to say.
 */
export function earlierRejections(events: readonly { type: string; data: unknown }[], req: PendingRequest): EarlierRejection[] {
  if (req.kind !== 'approval') return [];
  const asked = new Set<string>();
  let out: EarlierRejection[] = [];
  for (const e of events) {
    const d = e.data as { requestId?: unknown; agentId?: unknown; toolName?: unknown; reason?: unknown; action?: unknown };
    if (typeof d.requestId !== 'string') continue;
    if (d.requestId === req.requestId) break; // what happened once it was asked is not its history (a sibling of its turn rejected later)
    if (e.type === 'ApprovalRequested' && d.agentId === req.agentId && d.toolName === req.toolName) asked.add(d.requestId);
    else if (asked.has(d.requestId) && e.type === 'ApprovalRejected') out.push({ requestId: d.requestId, reason: typeof d.reason === 'string' ? d.reason : '' });
    else if (asked.has(d.requestId) && e.type === 'ApprovalTimedOut' && d.action !== 'approve') out.push({ requestId: d.requestId, reason: 'nobody decided before the deadline' });
    // One granted since: what was rejected before it was revised and done with (the next request is a new one, not a revision).
    else if (asked.has(d.requestId) && (e.type === 'ApprovalGranted' || e.type === 'ApprovalTimedOut')) out = [];
  }
  return out;
}

/**
 * A request that waits for a person: what it is about, and the links that decide it. `rejected`:
 * the same agent's earlier requests for the tool that were rejected (`earlierRejections`) — the
 * mail of a revised plan says it is one, and why the last was rejected.
 */
export function requestMail(task: TaskState, req: PendingRequest, links: RequestLinks, rejected: readonly EarlierRejection[] = []): MailContent {
  const who = `${req.agentId === task.lead?.agentId ? 'The lead' : `Agent ${req.agentId}`}`;
  const lines: string[] = [];
  const html: string[] = [];
  let subject: string;
  const header = `Task ${task.id}: ${oneLine(task.prompt, 500)}`;
  if (req.kind === 'approval') {
    // What is approved, as the console's banner names it: a delegation names the agent it goes to (mails of one run differ).
    const target = typeof (req.input as { agent?: unknown }).agent === 'string' ? ` → ${(req.input as { agent: string }).agent}` : '';
    // A revised request (the last was rejected) says so first: its mail had read as the one already turned down.
    const last = rejected.at(-1);
    subject = `[Baton] ${last ? 'Revised, approval needed' : 'Approval needed'}: ${req.toolName}${target} — ${taskLine(task)}`;
    const input = clip(JSON.stringify(req.input, null, 2), MAX_INPUT_CHARS);
    const revised = last ? `This is a revised request: ${rejected.length === 1 ? 'the previous one was' : `the previous ${rejected.length} were`} rejected${last.reason ? ` (the last: ${oneLine(last.reason, 500)})` : ''}.` : null;
    lines.push(`${who} waits for your approval to call ${req.toolName}.`, ...(revised ? [revised] : []), '', header, '', 'The plan:', req.plan, '', 'The input:', input);
    html.push(`<p>${escapeHtml(who)} waits for your approval to call <b>${escapeHtml(req.toolName)}</b>.</p>`, ...(revised ? [`<p><b>${escapeHtml(revised)}</b></p>`] : []), `<p style="color:#555">${escapeHtml(header)}</p>`, '<h3>The plan</h3>', renderMarkdown(req.plan), '<h3>The input</h3>', pre(input));
    lines.push('', `Approve: ${links.approve ?? ''}`, `Reject: ${links.reject ?? ''}`);
    html.push(`<p>${links.approve ? button(links.approve, 'Approve', '#1a7f37') : ''}${links.reject ? button(links.reject, 'Reject', '#cf222e') : ''}${button(links.console, 'Open in console', '#57606a')}</p>`);
    const deadline = `Nobody deciding by ${humanTime(req.deadline)}: it is ${req.onTimeout === 'approve' ? 'approved' : 'rejected'}. The links work until ${humanTime(links.expiresAt)}; each asks you to confirm. The console needs your team's API key.`;
    lines.push(`Open in console: ${links.console}`, '', deadline);
    html.push(`<p style="color:#555;font-size:13px">${escapeHtml(deadline)}</p>`);
  } else if (req.kind === 'clarification') {
    // The task too: two tasks (or two agents of one) asking alike made mails of one subject.
    subject = `[Baton] A question for you: ${oneLine(req.questions[0] ?? '', 80)} — ${taskLine(task)}${req.agentId === task.lead?.agentId ? '' : ` (${req.agentId})`}`;
    lines.push(`${who} asks:`, '', ...req.questions.map((q, i) => `${i + 1}. ${q}`), ...(req.options?.length ? ['', `Options: ${req.options.join(' | ')}`] : []), ...(req.context ? ['', `Context: ${req.context}`] : []), '', header, '', `Answer: ${links.answer ?? ''}`, `Open in console: ${links.console}`);
    html.push(`<p>${escapeHtml(who)} asks:</p><ol>${req.questions.map((q) => `<li>${escapeHtml(q)}</li>`).join('')}</ol>`);
    if (req.options?.length) html.push(`<p>Options: ${req.options.map(escapeHtml).join(' · ')}</p>`);
    if (req.context) html.push(`<p style="color:#555">${escapeHtml(req.context)}</p>`);
    html.push(`<p style="color:#555">${escapeHtml(header)}</p>`, `<p>${links.answer ? button(links.answer, 'Answer', '#0969da') : ''}${button(links.console, 'Open in console', '#57606a')}</p>`);
    const until = `${req.deadline ? `Nobody answering by ${humanTime(req.deadline)}: the agent goes on with its best judgement. ` : ''}The link works until ${humanTime(links.expiresAt)}. The console needs your team's API key.`;
    lines.push('', until);
    html.push(`<p style="color:#555;font-size:13px">${escapeHtml(until)}</p>`);
  } else {
    subject = `[Baton] Budget reached — ${taskLine(task)}`;
    const spent = `spent $${req.spent.usd.toFixed(4)} and ${req.spent.tokens} tokens; limit ${req.limit.usd !== null ? `$${req.limit.usd}` : 'no $ limit'}, ${req.limit.tokens !== null ? `${req.limit.tokens} tokens` : 'no token limit'}`;
    lines.push('The task reached its budget; every agent has stopped until you raise it or stop the run.', '', header, '', spent, '', `Decide in the console (it needs your team's API key): ${links.console}`, `Nobody deciding by ${humanTime(req.deadline)}: the run stops.`);
    html.push(`<p>The task reached its budget; every agent has stopped until you raise it or stop the run.</p><p style="color:#555">${escapeHtml(header)}</p><p>${escapeHtml(spent)}</p><p>${button(links.console, 'Open in console', '#57606a')}</p><p style="color:#555;font-size:13px">Nobody deciding by ${escapeHtml(humanTime(req.deadline))}: the run stops. The console needs your team's API key.</p>`);
  }
  return { subject, text: defanged(lines.join('\n')), html: layout(subject, html.join('\n')) };
}

/** The most of a report a completion mail shows (its text and its HTML each): ~100 KB. */
export const MAX_INLINE_REPORT_CHARS = 100_000;

/** An artifact of a finished task as the report mail lists it. */
export interface ListedArtifact {
  path: string;
  bytes: number;
  url: string;
  attached: boolean;
}

/** The end of a run: the report (completed) or why it ended (failed, cancelled). */
export function endMail(task: TaskState, o: { report: string | null; artifacts: ListedArtifact[]; console: string }): MailContent {
  const status = task.status;
  // An engineering task completes once its lead has finished; its change may still not be acceptable.
  const concerns = status === 'completed' && task.plan ? planAcceptance(task.plan).concerns : [];
  const title = status === 'completed' ? (concerns.length > 0 ? 'Done, not accepted' : 'Done') : status === 'failed' ? 'Failed' : 'Cancelled';
  const subject = `[Baton] ${title}: ${taskLine(task)}`;
  const lines = [`Task ${task.id} ${status}.`, '', oneLine(task.prompt, 500)];
  const html = [`<p>Task <code>${escapeHtml(task.id)}</code> <b>${escapeHtml(status)}</b>.</p>`, `<p style="color:#555">${escapeHtml(oneLine(task.prompt, 500))}</p>`];
  if (task.error) {
    lines.push('', `${task.error.code}: ${task.error.message}`);
    html.push(`<p><b>${escapeHtml(task.error.code)}</b>: ${escapeHtml(task.error.message)}</p>`);
  }
  if (status === 'cancelled' && task.cancellation) {
    const c = task.cancellation;
    lines.push('', `Cancelled by ${c.requestedBy} at ${humanTime(c.at)}: ${c.reason}`);
    html.push(`<p>Cancelled by ${escapeHtml(c.requestedBy)} at ${escapeHtml(humanTime(c.at))}: ${escapeHtml(c.reason)}</p>`);
  }
  if (concerns.length > 0) {
    lines.push('', 'The change is not accepted:', ...concerns.map((c) => `- ${c.message}`));
    html.push(`<p><b>The change is not accepted:</b></p><ul>${concerns.map((c) => `<li>${escapeHtml(c.message)}</li>`).join('')}</ul>`);
  }
  if (task.result?.summary) {
    // As much of the lead's summary as of a report: a 200,000-character one made a 1.6 MB mail.
    const summary = clip(task.result.summary, MAX_INLINE_REPORT_CHARS);
    lines.push('', summary);
    html.push(`<p>${escapeHtml(summary)}</p>`);
  }
  if (o.report !== null) {
    // The report is in the mail as text and as HTML (and attached when small enough): a long
    // one only begins here, so the mail stays one a server takes (a 3 MB report made a 12 MB mail).
    const shown = excerpt(o.report, MAX_INLINE_REPORT_CHARS);
    const rest = shown.length < o.report.length ? `[The report goes on: ${o.report.length.toLocaleString('en-US')} characters in all; the whole of it is under Files below.]` : null;
    lines.push('', '---', '', shown, ...(rest ? ['', rest] : []), '', '---');
    html.push('<hr>', renderMarkdown(shown), ...(rest ? [`<p><i>${escapeHtml(rest)}</i></p>`] : []), '<hr>');
  }
  if (o.artifacts.length > 0) {
    const item = (a: ListedArtifact): string => `${a.path} (${a.bytes} bytes${a.attached ? ', attached' : ''}): ${a.url}`;
    lines.push('', 'Files:', ...o.artifacts.map((a) => `- ${item(a)}`));
    html.push(`<h3>Files</h3><ul>${o.artifacts.map((a) => `<li><a href="${escapeHtml(a.url)}">${escapeHtml(a.path)}</a> (${a.bytes} bytes${a.attached ? ', attached' : ''})</li>`).join('')}</ul>`);
  }
  lines.push('', `Open in console: ${o.console}`);
  html.push(`<p>${button(o.console, 'Open in console', '#57606a')}</p>`);
  return { subject, text: defanged(lines.join('\n')), html: layout(subject, html.join('\n')) };
}

/** An agent's outbox mail: its markdown body as text and as HTML, with where it came from. */
export function outboxMail(task: Pick<TaskState, 'id'>, o: { subject: string; body: string; agentId: string }): MailContent {
  const footer = `Sent by Baton's ${o.agentId} for task ${task.id}.`;
  return {
    subject: o.subject,
    text: defanged(`${o.body}\n\n-- \n${footer}`),
    html: `${head(o.subject)}<body style="${BODY_STYLE}">${renderMarkdown(o.body)}<hr style="border:none;border-top:1px solid #ddd;margin-top:24px"><p style="color:#666;font-size:12px">${escapeHtml(footer)}</p></body></html>`,
  };
}
