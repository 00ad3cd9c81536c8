#!/usr/bin/env node
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { MAIL_MOMENTS, recordAs, replay, stateAt, type MailMoment, type RecordedEvent } from '@baton/domain';
import { toTaskView, viewDiff, type ChatSummaryView, type TaskView } from '@baton/api';
import type { VerifyResult } from '@baton/agents';
import { answer, decide, describeEvent, describeTask } from './people.ts';
import { listTasks, type ListOptions } from './list.ts';
import { WORKSPACE_EXCLUDES, workspaceFromPath } from './workspace.ts';
import { safeConsole, terminalSafe } from './terminal.ts';
import { describeChat, describeConversation, describeDeliveries, describeDelivery, describeReconnect, describeTaskWebhookSecret, describeTeam, describeWebhook, entryProblems, listing } from './views.ts';
import { ApiError, BatonClient, ReplyStreamLost, type ApiEvent } from '@baton/client';
// `up`, `bench`, `chaos` and `cpuprofile` load what they need (the services' packages, the
// database, the sandboxes) when they run: every other command is an API call and starts fast.

safeConsole();
const program = new Command('baton').description('Baton: durable, human-in-the-loop runtime for multi-agent tasks');
program.addHelpText('after', '\nEnvironment:\n  BATON_URL      the gateway the commands talk to (default http://127.0.0.1:8080)\n  BATON_API_KEY  the API key, when the gateway has keys (its BATON_API_KEYS)');
/** A commander option parser for a positive number, naming the option when it is not one. */
const positiveNumber = (flag: string) => (v: string): number => {
  const n = Number(v);
  if (!/^\d+(\.\d+)?$/.test(v.trim()) || !(n > 0)) throw new InvalidArgumentError(`${flag} must be a positive number, got '${v}'`);
  return n;
};
/** A commander option parser for a whole number of 1 or more (tokens, seconds), naming the option when it is not one. */
const wholeNumber = (flag: string) => (v: string): number => {
  if (!/^[1-9]\d*$/.test(v.trim())) throw new InvalidArgumentError(`${flag} must be a whole number of 1 or more, got '${v}'`);
  return Number(v);
};
/** A commander option parser for --after: a position in the log (0: from the start). */
const logPosition = (v: string): number => {
  if (!/^\d{1,15}$/.test(v.trim())) throw new InvalidArgumentError(`--after must be a position in the log (0 or more, at most 15 digits), got '${v}'`);
  return Number(v);
};
/** A commander option parser for --at: a version of the task stream. */
const streamVersion = (v: string): number => {
  if (!/^[1-9]\d{0,14}$/.test(v.trim())) throw new InvalidArgumentError(`--at must be a version of the task stream (1 or more, at most 15 digits), got '${v}'`);
  return Number(v);
};
const client = () => new BatonClient(process.env.BATON_URL ?? 'http://127.0.0.1:8080', process.env.BATON_API_KEY);

program
  .command('up')
  .description('create/migrate the database and run all four services, restarting any that exits (Ctrl-C stops them)')
  .option('--port <port>', 'gateway port', process.env.PORT ?? '8080')
  .action(async (opts: { port: string }) => {
    const env: NodeJS.ProcessEnv & { DATABASE_URL: string; NATS_URL: string } = {
      ...process.env,
      DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/baton',
      NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      // Local development: webhooks to localhost are expected. Production (compose) leaves this off.
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: process.env.WEBHOOK_ALLOW_PRIVATE_NETWORKS ?? 'true',
      PORT: opts.port,
      // Mailed links point at this gateway unless told otherwise (docs/email.md).
      PUBLIC_URL: process.env.PUBLIC_URL ?? `http://127.0.0.1:${opts.port}`,
    };
    const say = (m: string) => void process.stdout.write(`\x1b[1;34m[baton]\x1b[0m ${terminalSafe(m)}\n`);
    // Local development with mail on and no secret: one made for this run (the gateway and the
    // notifier share it); links mailed by an earlier run then stop working. Compose requires one.
    if (env.SMTP_URL && !env.MAIL_LINK_SECRET) {
      env.MAIL_LINK_SECRET = randomBytes(32).toString('hex');
      say('MAIL_LINK_SECRET is not set: mailed links are signed with a secret made for this run (set it to keep links working across restarts)');
    }
    const { launch, prepareDatabase, redact } = await import('./launcher.ts');
    say(`Postgres ${redact(env.DATABASE_URL)} · NATS ${env.NATS_URL} · model: ${env.ANTHROPIC_API_KEY ? 'Claude (key set)' : 'offline'}`);
    await prepareDatabase(env.DATABASE_URL, say);
    let stopping = false;
    // Supervised: a service that exits on its own is restarted with a capped, doubling delay
    // (logged with its code or signal); only a configuration error (exit 78) stops everything.
    const running = launch({
      env,
      restart: true,
      onExit: ({ name, code, restartInMs }) => {
        if (restartInMs !== null || stopping) return;
        stopping = true;
        say(`${name} exited (code ${code}) and cannot be restarted; stopping the others`);
        void running.stop('SIGTERM').then(() => process.exit(1));
      },
    });
    say(`starting services; the API will be at http://${env.HOST ?? '127.0.0.1'}:${opts.port} (docs at /docs). Ctrl-C to stop.`);
    const opsBase = Number(env.OPS_PORT ?? 9464);
    if (env.OPS_PORT !== '0') say(`metrics: the gateway's /metrics; the orchestrator's, runner's and notifier's (with /healthz, /readyz) on ports ${opsBase}, ${opsBase + 1}, ${opsBase + 2}${env.OTEL_EXPORTER_OTLP_ENDPOINT ? ` · traces to ${env.OTEL_EXPORTER_OTLP_ENDPOINT}` : ''}`);
    const stop = (sig: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      say(`${sig}: stopping services…`);
      void running.stop('SIGTERM').then(() => {
        say('all services stopped');
        process.exit(0);
      });
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });

/** A comma-separated option as its items (blank ones dropped). */
const list = (v: string): string[] => v.split(',').map((x) => x.trim()).filter(Boolean);

program
  .command('submit <prompt...>')
  .description('submit a task and print it')
  .option('--team <team>', "the team (`baton teams`); default: the gateway's default team")
  .option('--no-approval', 'do not ask for plan approval')
  .option('--timeout <seconds>', 'approval timeout in seconds', wholeNumber('--timeout'), 600)
  .option('--budget-usd <n>', 'stop and ask a person once the task has spent this many US dollars', positiveNumber('--budget-usd'))
  .option('--budget-tokens <n>', 'stop and ask a person once the task has used this many tokens', wholeNumber('--budget-tokens'))
  .option('--example <name>', 'start from a configured example project (GET /v1/examples)')
  .option('--workspace <path>', `start from this codebase: a directory (in a git work tree the files git would commit; ${WORKSPACE_EXCLUDES.join(', ')} left out) or a .tar.gz`)
  .option('--webhook <url>', "the task's own webhook: its events POSTed there, signed (docs/webhooks.md)")
  .option('--webhook-events <types>', 'with --webhook: only these event types, comma-separated (e.g. task.completed,task.failed)', list)
  .option('--mail <addresses>', 'mail these people, comma-separated: when a request waits for them and when the task ends (docs/email.md)', list)
  .option('--mail-on <moments>', `with --mail: only these moments, comma-separated (${MAIL_MOMENTS.join(', ')})`, list)
  .option('--watch', 'then follow it live')
  .action(async (prompt: string[], opts: { team?: string; approval: boolean; timeout: number; watch?: boolean; budgetUsd?: number; budgetTokens?: number; example?: string; workspace?: string; webhook?: string; webhookEvents?: string[]; mail?: string[]; mailOn?: string[] }) => {
    if (opts.webhookEvents && !opts.webhook) throw new InvalidArgumentError('--webhook-events goes with --webhook <url>');
    if (opts.mailOn && !opts.mail) throw new InvalidArgumentError('--mail-on goes with --mail <addresses>');
    const budget = opts.budgetUsd !== undefined || opts.budgetTokens !== undefined ? { ...(opts.budgetUsd !== undefined ? { usd: opts.budgetUsd } : {}), ...(opts.budgetTokens !== undefined ? { tokens: opts.budgetTokens } : {}) } : undefined;
    if (opts.example !== undefined && opts.workspace !== undefined) throw new Error('give --example or --workspace, not both: a task starts from one codebase');
    const workspace = opts.workspace !== undefined ? await workspaceFromPath(opts.workspace) : opts.example !== undefined ? { example: opts.example } : undefined;
    // Under an Idempotency-Key of its own (the client's): a connection cut after it went is sent again as this task, not a second one.
    // The gateway checks the URL, the event types, the addresses and the moments, and names what is wrong.
    const webhook = opts.webhook ? { url: opts.webhook, ...(opts.webhookEvents ? { events: opts.webhookEvents } : {}) } : undefined;
    const notify = opts.mail ? { email: { to: opts.mail, ...(opts.mailOn ? { on: opts.mailOn as MailMoment[] } : {}) } } : undefined;
    const t = await client().submit({ prompt: prompt.join(' '), ...(opts.team ? { team: opts.team } : {}), requirePlanApproval: opts.approval, approvalTimeoutSeconds: opts.timeout, ...(budget ? { budget } : {}), ...(workspace ? { workspace } : {}), ...(webhook ? { webhook } : {}), ...(notify ? { notify } : {}) });
    console.log(describeTask(t));
    if (opts.watch) await watch(t.id);
  });

program
  .command('status <taskId>')
  .description('print a task: status, agents, open requests (with the command that decides each), result')
  .action(async (taskId: string) => console.log(describeTask(await client().request<TaskView>('GET', `/v1/tasks/${taskId}`))));

program
  .command('list')
  .description('list your tasks, newest first; --follow then prints each change as it happens (Ctrl-C stops)')
  .option('--status <status>', 'only tasks with this status (pending, running, awaiting_input, completed, failed, cancelled)')
  .option('--team <team>', "only this team's tasks")
  .option('--search <text>', 'only tasks whose prompt contains this text (ignoring case; its first 200 characters, as listed)', (v: string) => {
    if (v.trim() === '') throw new InvalidArgumentError('--search needs some text to look for');
    return v;
  })
  .option('--stuck', 'only tasks stuck: no transition for a while, nobody working on them, no person holding them')
  .option('--forks-of <taskId>', "only this task's forks (each with the version it was copied at)")
  .option('--limit <n>', 'at most this many (1..200)', positiveNumber('--limit'), 50)
  .option('--follow', 'then print each change of your tasks (of --team, if given) as it happens; with --status, changes into it and out of it')
  .action(async (opts: ListOptions) => listTasks(client(), opts, { log: (l) => console.log(l), error: (l) => console.error(l) }));

program
  .command('watch <taskId>')
  .description('follow a task live over SSE; requests are printed in full as they open')
  .action(async (taskId: string) => watch(taskId));

program
  .command('approve <taskId> [requestId]')
  .description('approve an approval request (the only open one if no id is given), or raise a budget request\'s limit')
  .option('--input <json>', 'approve with this edited tool input')
  .option('--usd <n>', 'a budget request: the new limit in US dollars', positiveNumber('--usd'))
  .option('--tokens <n>', 'a budget request: the new limit in tokens', wholeNumber('--tokens'))
  .action(async (taskId: string, requestId: string | undefined, opts: { input?: string; usd?: number; tokens?: number }) => {
    const budget = opts.usd !== undefined || opts.tokens !== undefined ? { ...(opts.usd !== undefined ? { usd: opts.usd } : {}), ...(opts.tokens !== undefined ? { tokens: opts.tokens } : {}) } : undefined;
    console.log(describeTask(await decide(client(), taskId, { approve: true, ...(opts.input !== undefined ? { input: opts.input } : {}), ...(budget ? { budget } : {}), ...(requestId ? { requestId } : {}) })));
  });

program
  .command('reject <taskId> [requestId]')
  .description('reject an approval request (the agent sees the reason and can re-plan), or stop a run at its budget')
  .option('--reason <text>', 'why')
  .action(async (taskId: string, requestId: string | undefined, opts: { reason?: string }) => {
    console.log(describeTask(await decide(client(), taskId, { approve: false, ...(opts.reason ? { reason: opts.reason } : {}), ...(requestId ? { requestId } : {}) })));
  });

program
  .command('answer <taskId> <answers...>')
  .description('answer a question (the only open one unless --request names it); one argument per answer')
  .option('--request <requestId>', 'the clarification request to answer')
  .action(async (taskId: string, answers: string[], opts: { request?: string }) => {
    console.log(describeTask(await answer(client(), taskId, answers, opts.request)));
  });

program
  .command('cancel <taskId>')
  .description('cancel a task: open requests close, running subagents stop')
  .option('--reason <text>', 'why')
  .action(async (taskId: string, opts: { reason?: string }) => {
    console.log(describeTask(await client().request<TaskView>('POST', `/v1/tasks/${taskId}/cancel`, opts.reason ? { reason: opts.reason } : {})));
  });

program
  .command('fork <taskId>')
  .description('start a new task whose history is a copy of this one up to --at <version>')
  .requiredOption('--at <version>', 'version of the task stream to fork at', streamVersion)
  .action(async (taskId: string, opts: { at: number }) => {
    console.log(describeTask(await client().fork(taskId, opts.at)));
  });

program
  .command('artifacts <taskId>')
  .description("list a task's files: path, bytes, the agent that stored it, digest (--at N: as they were after version N of its stream)")
  .option('--at <version>', 'as the files were after this version of the task stream', streamVersion)
  .action(async (taskId: string, opts: { at?: number }) => {
    const files = await client().artifacts(taskId, opts);
    if (files.length === 0) console.log(opts.at !== undefined ? `no files at version ${opts.at} of the task stream` : 'no files yet');
    for (const a of files) console.log(`${a.path}  ${a.bytes} B  ${a.agentId ?? '-'}  ${a.sha256.slice(0, 12)}`);
  });

program
  .command('artifact <taskId> <path>')
  .description("print one of a task's files, byte for byte (--at N: its content after version N of the task stream)")
  .option('--at <version>', 'the content the file had after this version of the task stream', streamVersion)
  .action(async (taskId: string, file: string, opts: { at?: number }) => {
    process.stdout.write(Buffer.from(await (await client().artifactResponse(taskId, file, opts)).arrayBuffer()));
  });

program
  .command('diff <taskId>')
  .description("print the task's change against its input workspace as a unified diff (--at N: as it stood after version N of the task stream)")
  .option('--at <version>', 'the change as it stood after this version of the task stream', streamVersion)
  .action(async (taskId: string, opts: { at?: number }) => {
    process.stdout.write(await client().diff(taskId, opts));
  });

program
  .command('archive <taskId>')
  .description("save the task's files as a .tar.gz: its input workspace with the agents' files over it (--at N: as they stood after version N of the task stream); submit it again with --workspace")
  .option('--at <version>', 'the files as they stood after this version of the task stream', streamVersion)
  .option('--out <file>', "where to write it ('-': standard output); default: the name the gateway gives it, in this directory")
  .option('--force', 'replace the file if it exists')
  .action(async (taskId: string, opts: { at?: number; out?: string; force?: boolean }) => {
    const { name, content } = await client().archive(taskId, opts);
    if (opts.out === '-') return void process.stdout.write(content);
    const file = opts.out ?? name;
    await writeFile(file, content, { flag: opts.force ? 'w' : 'wx' }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') throw new Error(`${file} exists: choose another with --out, or replace it with --force`);
      if (err.code === 'EISDIR') throw new Error(`${file} is a directory: --out names the file to write (e.g. ${path.join(file, name)})`);
      throw err;
    });
    console.log(`wrote ${file} (${content.length} bytes); unpack it with: mkdir ${taskId.slice(0, 8)} && tar -xzf ${file} -C ${taskId.slice(0, 8)}`);
  });

async function watch(taskId: string): Promise<void> {
  // The task as it stands now: a request in the history it shows as not open is printed without a command to paste.
  const now = await client().request<TaskView>('GET', `/v1/tasks/${taskId}`);
  const open = new Set(now.pendingRequests.map((r) => r.requestId));
  await client().follow(taskId, (e) => console.log(describeEvent(e, (requestId) => e.version <= now.version && !open.has(requestId))), {
    onState: (s, r) => void (s === 'reconnecting' && console.error(describeReconnect(r))),
  });
}

program
  .command('events <taskId>')
  .description('print every event of a task (--type: only those types; --no-steps: transitions only; --after, --limit: a page)')
  .option('--json', 'one JSON object per line')
  .option('--type <types>', 'only events of these types, comma-separated (e.g. ApprovalRequested,ApprovalGranted)')
  .option('--no-steps', "leave out the agents' steps (model turns, tool results): transitions only")
  .option('--after <position>', 'only events after this position (the # a previous listing printed)', logPosition)
  .option('--limit <n>', 'at most this many events (the first)', wholeNumber('--limit'))
  .action(async (taskId: string, opts: { json?: boolean; type?: string; steps: boolean; after?: number; limit?: number }) => {
    // One more than asked for: whether there are more, and where the next page starts.
    const query = { ...(opts.type === undefined ? {} : { types: opts.type.split(',') }), ...(opts.steps ? {} : { steps: false }), ...(opts.after === undefined ? {} : { after: opts.after }), ...(opts.limit === undefined ? {} : { limit: opts.limit + 1 }) };
    const events = await client().allEvents(taskId, query);
    const shown = opts.limit === undefined ? events : events.slice(0, opts.limit);
    for (const e of shown) {
      console.log(opts.json ? JSON.stringify(e) : `#${e.position}  ${e.streamId}@${e.version}  ${e.recordedAt}  ${e.type}  ${JSON.stringify(e.data)}`);
    }
    if (shown.length < events.length) console.error(`(more: --after ${shown.at(-1)?.position ?? opts.after ?? 0} for the next page)`);
  });

program
  .command('deliveries [taskId]')
  .description("every attempt to deliver the task's webhooks and mail: when, what, where, how it went (a failed webhook message or notification mail with the command that sends it again); --given-up: what the notifiers gave up on across your tasks")
  .option('--given-up', 'across every task of yours: each webhook message or mail whose last attempt was given up, newest first, with the command that sends it again')
  .action(async (taskId: string | undefined, opts: { givenUp?: boolean }) => {
    if (opts.givenUp) {
      if (taskId) throw new InvalidArgumentError('give a task id or --given-up, not both');
      const items = await client().givenUpDeliveries();
      console.log(items.length === 0 ? 'nothing given up' : items.map((d) => `task ${d.taskId}\n  ${describeDelivery(d.taskId, d).replace(/\n/g, '\n  ')}`).join('\n'));
      return;
    }
    if (!taskId) throw new InvalidArgumentError('give a task id (or --given-up: across your tasks)');
    const items = await client().deliveries(taskId);
    console.log(items.length === 0 ? 'no deliveries' : describeDeliveries(taskId, items).join('\n'));
  });

program
  .command('redeliver <taskId> <deliveryId>')
  .description("send a delivery's webhook message, or its notification mail, again now (a new attempt, listed by `baton deliveries`)")
  .action(async (taskId: string, deliveryId: string) => {
    const r = await client().redeliver(taskId, deliveryId);
    console.log(`queued: delivery ${r.deliveryId} is sent again by a notifier (redelivery request #${r.redeliveryId}); \`baton deliveries ${taskId}\` shows the attempt`);
  });

/** `--overlap <seconds>` of a secret's rotation or a first key. */
const overlapOption = (v: string): number => {
  if (!/^\d+$/.test(v.trim())) throw new InvalidArgumentError(`--overlap must be a whole number of seconds, got '${v}'`);
  return Number(v);
};
const webhooks = program.command('webhooks').description("the tenant's webhook endpoints: list (the default), add, show, update, remove, rotate-secret; task-secret: the key of its tasks' own webhooks");
webhooks
  .command('list', { isDefault: true })
  .description('the endpoints, without their secrets')
  .action(async () => {
    console.log(listing(await client().webhooks(), describeWebhook, 'no webhook endpoints'));
  });
webhooks
  .command('add <url>')
  .description('subscribe an endpoint to the webhooks of every task of the tenant; prints its signing secret, this once')
  .option('--events <types>', 'comma-separated event types (default: task.completed,task.failed,task.cancelled,task.awaiting_input)')
  .action(async (url: string, opts: { events?: string }) => {
    const events = opts.events?.split(',').map((e) => e.trim()).filter(Boolean);
    const w = await client().addWebhook(url, events);
    console.log(describeWebhook(w));
    console.log(`secret: ${w.secret}  (shown this once: keep it where the receiver verifies signatures)`);
  });
webhooks
  .command('show <webhookId>')
  .description('one endpoint, without its secrets')
  .action(async (id: string) => {
    console.log(describeWebhook(await client().webhook(id)));
  });
webhooks
  .command('update <webhookId>')
  .description("change an endpoint's URL or event types; its id and signing secrets stay (receivers keep verifying)")
  .option('--url <url>', 'where it is sent from now on')
  .option('--events <types>', 'comma-separated event types, replacing the ones it has')
  .action(async (id: string, opts: { url?: string; events?: string }) => {
    if (opts.url === undefined && opts.events === undefined) throw new InvalidArgumentError('give --url, --events or both');
    const events = opts.events?.split(',').map((e) => e.trim()).filter(Boolean);
    console.log(describeWebhook(await client().updateWebhook(id, { ...(opts.url !== undefined ? { url: opts.url } : {}), ...(events ? { events } : {}) })));
  });
webhooks
  .command('remove <webhookId>')
  .description('delete an endpoint (no more deliveries to it)')
  .action(async (id: string) => {
    await client().removeWebhook(id);
    console.log(`removed ${id}`);
  });
webhooks
  .command('rotate-secret <webhookId>')
  .description('a new signing secret, printed this once; the previous one keeps signing too for --overlap seconds')
  .option('--overlap <seconds>', 'how long the previous secret keeps signing too (0..604800; default a day)', overlapOption)
  .option('--drop-previous', "rotate although the last rotation's previous secret still signs: it stops at once")
  .action(async (id: string, opts: { overlap?: number; dropPrevious?: boolean }) => {
    const w = await client().rotateWebhookSecret(id, opts.overlap, { dropPrevious: opts.dropPrevious === true });
    console.log(describeWebhook(w));
    console.log(`secret: ${w.secret}  (shown this once)`);
  });

const taskSecret = webhooks
  .command('task-secret')
  .description("the tenant's own key for its tasks' own webhooks (`webhook` of a task): show (the default), create, rotate");
taskSecret
  .command('show', { isDefault: true })
  .description('when it was made and rotated, and what signs beside it until when (never the key)')
  .action(async () => {
    const k = await client().taskWebhookSecret();
    console.log(k ? describeTaskWebhookSecret(k) : "none: this tenant's tasks' own webhooks are signed with the deployment's WEBHOOK_SECRET (`baton webhooks task-secret create` makes a key of its own)");
  });
taskSecret
  .command('create')
  .description("a key of the tenant's own, printed this once; the deployment's secret keeps signing beside it for --overlap seconds")
  .option('--overlap <seconds>', "how long the deployment's secret keeps signing too (0..604800; default a day)", overlapOption)
  .action(async (opts: { overlap?: number }) => {
    const k = await client().createTaskWebhookSecret(opts.overlap);
    console.log(describeTaskWebhookSecret(k));
    console.log(`secret: ${k.secret}  (shown this once: keep it where the receivers of your tasks' webhooks verify signatures)`);
  });
taskSecret
  .command('rotate')
  .description('a new key, printed this once; the previous one keeps signing too for --overlap seconds')
  .option('--overlap <seconds>', 'how long the previous key keeps signing too (0..604800; default a day)', overlapOption)
  .option('--drop-previous', "rotate although the last rotation's previous key still signs: it stops at once")
  .action(async (opts: { overlap?: number; dropPrevious?: boolean }) => {
    const k = await client().rotateTaskWebhookSecret(opts.overlap, { dropPrevious: opts.dropPrevious === true });
    console.log(describeTaskWebhookSecret(k));
    console.log(`secret: ${k.secret}  (shown this once)`);
  });

program
  .command('chat <message...>')
  .description('talk with the team\'s model (chat mode, docs/chat.md): the reply streams as it is written; --chat continues a conversation')
  .option('--chat <chatId>', 'continue this conversation (`baton chats` lists them)')
  .option('--team <team>', 'the team whose model answers (a new conversation)')
  .action(async (message: string[], opts: { chat?: string; team?: string }) => {
    let chatId = opts.chat;
    let failed: string | null = null;
    let written = false;
    try {
      await client().chat({ message: message.join(' '), ...(opts.chat ? { chatId: opts.chat } : {}), ...(opts.team ? { team: opts.team } : {}) }, (e) => {
        if (e.event === 'chat') chatId = e.data.chatId;
        else if (e.event === 'delta') {
          written = true;
          process.stdout.write(terminalSafe(e.data.text));
        } else if (e.event === 'message') {
          process.stdout.write('\n');
          if (e.data.stopReason === 'max_tokens') console.error('(the reply was cut at its length limit: CHAT_MAX_TOKENS)');
        } else {
          if (written) process.stdout.write('\n'); // the text so far is not the reply: the error on a line of its own
          failed = `${e.data.error.code}: ${e.data.error.message}`;
        }
      });
    } catch (err) {
      // Cut before the reply's end: what came is not the reply (the recorded one may differ, or come later).
      if (written) process.stdout.write('\n');
      if (err instanceof ReplyStreamLost && err.chatId) throw new Error(`${err.message} (\`baton chats ${err.chatId}\`)`, { cause: err });
      throw err;
    }
    if (failed) throw new Error(`the reply failed (recorded as such in chat ${chatId}): ${failed}`);
    console.error(`(chat ${chatId}: continue with --chat ${chatId}; turn it into a task with \`baton chat-task ${chatId}\`)`);
  });

program
  .command('chats [chatId]')
  .description('your conversations, the most recently active first; with a chat id, that conversation: its messages and the tasks started from it')
  .option('--limit <n>', 'list at most this many (the newest)', wholeNumber('--limit'), 50)
  .action(async (chatId: string | undefined, opts: { limit: number }) => {
    if (chatId) return console.log(describeConversation(await client().chatView(chatId)));
    const listed: ChatSummaryView[] = [];
    let more = false;
    for await (const c of client().chats({ pageSize: Math.min(opts.limit + 1, 200) })) {
      if (listed.length === opts.limit) {
        more = true;
        break;
      }
      listed.push(c);
    }
    console.log(listing(listed, describeChat, 'no conversations'));
    if (more) console.error(`(the ${opts.limit} most recently active; --limit N for more)`);
  });

program
  .command('chat-task <chatId>')
  .description("turn a conversation into a task (action mode): its prompt is the last message and the conversation before it")
  .option('--team <team>', "the task's team (default: the conversation's)")
  .option('--no-approval', 'do not ask for plan approval')
  .option('--watch', 'then follow it live')
  .action(async (chatId: string, opts: { team?: string; approval: boolean; watch?: boolean }) => {
    const t = await client().chatToTask(chatId, { ...(opts.team ? { team: opts.team } : {}), requirePlanApproval: opts.approval });
    console.log(describeTask(t));
    if (opts.watch) await watch(t.id);
  });

program
  .command('teams')
  .description('the configured teams: each lead, whom it delegates to, and the agents with their models and tools')
  .option('--check [dir]', "check a teams directory here, with no Baton running, as the services would load it at start-up (default: BATON_TEAMS_DIR, else the shipped teams): its teams, or every problem (exit 1)")
  .action(async (opts: { check?: string | true }) => {
    if (opts.check === undefined) {
      const { items, default: fallback } = await client().teamList();
      for (const t of items) console.log(describeTeam(t, fallback));
      return;
    }
    // Loaded here only: @baton/agents loads the shipped teams and the model SDK on import.
    const { DEFAULT_TEAMS_DIR, loadTeams, toTeamInfoView } = await import('@baton/agents');
    const dir = path.resolve((opts.check === true ? process.env.BATON_TEAMS_DIR : opts.check) || DEFAULT_TEAMS_DIR); // empty: unset, as for the services
    const teams = Object.values(loadTeams(dir)); // a TeamConfigError lists every problem
    for (const t of teams) console.log(describeTeam(toTeamInfoView(t)));
    console.log(`ok: ${teams.length} team${teams.length === 1 ? '' : 's'} in ${dir}`);
  });

program
  .command('verify <taskId>')
  .description('re-run the current code\'s decisions against the task\'s recorded run (model outputs and tool results as inputs, nothing executed): the first divergence, or identical')
  .option('--config <which>', "the team configuration to check with: pinned (the run's own, the default: a divergence is the code's) or current (the one loaded now: a configuration change shows too)", (v: string) => {
    if (v !== 'pinned' && v !== 'current') throw new InvalidArgumentError(`--config must be pinned or current, got '${v}'`);
    return v;
  })
  .action(async (taskId: string, opts: { config?: 'pinned' | 'current' }) => {
    const r = await client().request<VerifyResult & { config: { version: string; pinnedVersion: string | null; note?: string } }>('POST', `/v1/tasks/${taskId}/verify${opts.config ? `?config=${opts.config}` : ''}`);
    const own = r.config.version === r.config.pinnedVersion;
    const config = opts.config === 'current' ? `with the current team configuration (${r.config.version}${own ? ", the run's own too" : `; the run's: ${r.config.pinnedVersion ?? 'none'}`})` : own ? `with the run's own team configuration (${r.config.version})` : `with the current team configuration (${r.config.version}; the run's: ${r.config.pinnedVersion ?? 'none'})`;
    if (r.identical) {
      console.log(`identical${r.ended ? '' : ' so far (the run has not ended)'}: ${r.checked} decision${r.checked === 1 ? '' : 's'} checked over ${r.events} event${r.events === 1 ? '' : 's'}, ${config}`);
      if (r.config.note) console.log(`  note: ${r.config.note}`);
      return;
    }
    console.log(config);
    if (r.config.note) console.log(`  note: ${r.config.note}`);
    console.log(`diverges at #${r.at.position} (${r.at.streamId} v${r.at.version}, ${r.at.type}) after ${r.checked - 1} identical decision${r.checked - 1 === 1 ? '' : 's'}`);
    console.log(`  recorded: ${r.recorded}`);
    for (const d of r.decided) console.log(`  now:      ${d}`);
    if (r.difference) console.log(`  where:    ${r.difference}`);
    process.exitCode = 3;
  });

program
  .command('replay <taskId>')
  .description('fold a task event by event, printing the state after each (or the state at --at N)')
  .option('--at <version>', 'print the task as it was after this version of its stream', streamVersion)
  .option('--diff', 'print what each event changed in the task (as the API shows it); with --at N, what version N changed')
  .action(async (taskId: string, opts: { at?: number; diff?: boolean }) => {
    const events = (await client().allEvents(taskId)).map(toRecorded);
    if (opts.at !== undefined) {
      const s = stateAt(events, opts.at);
      if (!s) throw new Error(`the task stream has no version ${opts.at}`);
      if (!opts.diff) {
        console.log(JSON.stringify(toTaskView(s), null, 2));
        return;
      }
      // What reaching version N changed: the task at N-1 (nothing before version 1) against the task at N.
      const before = opts.at > 1 ? toTaskView(stateAt(events, opts.at - 1)!) : {};
      console.log(`v${opts.at - 1} → v${opts.at}`);
      for (const c of viewDiff(before, toTaskView(s), new Set(['updatedAt']))) console.log(`    ${c.path}: ${short(c.before)} → ${short(c.after)}`);
      return;
    }
    if (opts.diff) {
      let before: unknown = {};
      for (const { event, state } of replay(events)) {
        const after = toTaskView(state);
        console.log(`#${event.position} ${event.streamId}@${event.version} ${event.type}`);
        for (const c of viewDiff(before, after, new Set(['updatedAt']))) console.log(`    ${c.path}: ${short(c.before)} → ${short(c.after)}`);
        before = after;
      }
      return;
    }
    for (const { event, state } of replay(events)) {
      const agents = Object.values(state.agents).map((a) => `${a.id}:${a.status}`).join(',') || '-';
      const requests = Object.keys(state.pendingRequests).join(',') || '-';
      console.log(`#${event.position} ${event.streamId}@${event.version} ${event.type.padEnd(22)} → ${state.status.padEnd(14)} v${state.version} lead:${state.lead?.phase ?? '-'}/${state.lead?.turns ?? 0} agents:${agents} open:${requests}`);
    }
  });

program
  .command('bench')
  .description('run the benchmark workloads (docs/benchmarks.md: M1–M5 and more) against the services as processes')
  .option('--m1-runs <n>', 'sequential runs for M1', '200')
  .option('--m2-runs <n>', 'sequential approve → resume samples for M2', '200')
  .option('--m3-runs <n>', 'runs started at once for M3', '200')
  .option('--m4-runs <n>', 'runs parked at once for M4/M4b', '1000')
  .option('--m4-idle <seconds>', 'idle window for M4', '15')
  .option('--rounds <n>', 'rounds of each metric', '2')
  .option('--only <metrics>', 'comma-separated subset, e.g. M1,M5')
  .option('--out <file>', 'JSON results', '.bench/results.json')
  .option('--hops', 'trace the services and break M2 down by hop (tracing adds its own cost to every figure)')
  .action(async (opts: { m1Runs: string; m2Runs: string; m3Runs: string; m4Runs: string; m4Idle: string; rounds: string; only?: string; out: string; hops?: boolean }) => {
    const { runBench } = await import('./bench.ts');
    await runBench({
      databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      m1Runs: Number(opts.m1Runs),
      m2Runs: Number(opts.m2Runs),
      m3Runs: Number(opts.m3Runs),
      m4Runs: Number(opts.m4Runs),
      m4IdleSeconds: Number(opts.m4Idle),
      rounds: Number(opts.rounds),
      out: opts.out,
      hops: opts.hops === true,
      ...(opts.only ? { only: opts.only.split(',').map((m) => m.trim().toUpperCase()) } : {}),
    });
    process.exit(0);
  });

program
  .command('cpuprofile')
  .description('summarise V8 CPU profiles (BENCH_SERVICE_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=DIR" baton bench): self time by area and by function')
  .argument('<files...>', '.cpuprofile files')
  .option('--per-step <n>', 'divide times by this many steps (e.g. M1 runs × 10)')
  .option('--top <n>', 'rows per list', '15')
  .option('--skip-ms <ms>', 'leave out the first ms of each profile (start-up, warm-up)', '0')
  .action(async (files: string[], opts: { perStep?: string; top: string; skipMs: string }) => {
    const { printProfiles } = await import('./cpuprofile.ts');
    await printProfiles(files, { top: Number(opts.top), skipMs: Number(opts.skipMs), ...(opts.perStep ? { perStep: Number(opts.perStep) } : {}) });
  });

program
  .command('chaos')
  .description('crash test: tasks through approvals and clarifications while the orchestrator and runner are SIGKILLed and restarted; then check the log, the webhooks and the mail')
  .option('--tasks <n>', 'tasks to run', '50')
  .option('--kills <n>', 'SIGKILLs (orchestrator or runner, at random)', '10')
  .option('--seed <n>', 'random seed (printed; repeat a run with it)', String(Date.now() % 1_000_000))
  .option('--timeout <seconds>', 'give up after', '600')
  .option('--verbose', 'print service logs')
  .option('--faults <list>', 'more faults among the kills: bus-wipes=N,nats-restarts=N,postgres-restarts=N,notifier-kills=N,gateway-kills=N (NATS and Postgres faults run on private servers this run starts)', '')
  .action(async (opts: { tasks: string; kills: string; seed: string; timeout: string; verbose?: boolean; faults: string }) => {
    const { parseFaults, runChaos } = await import('./chaos.ts');
    const report = await runChaos({
      databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      tasks: Number(opts.tasks),
      kills: Number(opts.kills),
      seed: Number(opts.seed),
      timeoutMs: Number(opts.timeout) * 1000,
      log: (l) => console.log(l),
      ...(opts.verbose ? { serviceLog: (l: string) => console.log(l) } : {}),
      faults: parseFaults(opts.faults),
    });
    console.log(JSON.stringify(report, null, 2));
    process.exit(report.violations.length === 0 && report.completed === report.tasks ? 0 : 1);
  });

/** A value on one line, cut at 120 characters (absent: ∅). */
function short(v: unknown): string {
  if (v === undefined) return '∅';
  const t = typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v) ?? String(v);
  return t.length > 120 ? `${t.slice(0, 119)}…` : t;
}

function toRecorded(e: ApiEvent): RecordedEvent {
  return recordAs(e as Parameters<typeof recordAs>[0], { taskId: e.taskId, streamId: e.streamId, version: e.version, position: BigInt(e.position), recordedAt: new Date(e.recordedAt) });
}

program.parseAsync(process.argv).catch((err: Error) => {
  // The server's own words (and its status and code), or which gateway could not be reached.
  console.error(`baton: ${err.message}${err instanceof ApiError ? ` (${err.summary})` : ''}`);
  // A refused workspace names each entry in its details (the message holds the first few): all of them, one a line.
  if (err instanceof ApiError) for (const line of entryProblems(err.body)) console.error(`  ${line}`);
  // Refused for the key: say where the CLI takes one from.
  if (err instanceof ApiError && err.status === 401) console.error(process.env.BATON_API_KEY ? 'baton: the key in BATON_API_KEY was refused: is it one of the gateway\'s (BATON_API_KEYS)?' : 'baton: this gateway needs an API key: set BATON_API_KEY');
  process.exit(1);
});
