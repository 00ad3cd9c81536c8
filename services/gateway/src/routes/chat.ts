import { chatRequest, ModelRejectedError, OfflineChatModel, type StreamingModel, type TeamDefinition } from '@baton/agents';
import { chatTitle, toChatMessageView, toChatView, toTaskView, type ChatMessageView, type ChatStreamEvent } from '@baton/api';
import { CHAT_MESSAGE_MAX_CHARS, REPLY_REFUSED, chatExists, cutText, chatTaskPrompt, chatTurns, cleanText, digestJson, own, textOf, uuidV5, type ChatMessage, type ChatState, type NewChatEvent } from '@baton/domain';
import { listChats, loadChat, recordChat, type LoadedChat } from '@baton/event-store';
import type { ZodTypeProvider } from '@fastify/type-provider-zod';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { GatewayDeps } from '../deps.ts';
import { HttpError, notFound, SECURITY_HEADERS } from '../errors.ts';
import { queryInt, SubmitTaskBody, succeedsWith } from './schemas.ts';
import { checkSubmission, submitTask, teamNamed, type TaskSubmission } from './submit.ts';

/**
 * Chat mode (docs/chat.md): `POST /v1/chat` streams a reply (SSE) for a conversation kept in
 * Postgres (`chat_events`); `GET /v1/chats[/:id]`; `POST /v1/chats/:id/task` turns the
 * conversation into a task through the one submit path.
 */

const TeamName = z.string().min(1).max(100);
export const ChatIdParams = z.object({ id: z.uuid('must be a chat id (UUID)') });
export const PostChatBody = z.strictObject({
  chatId: z.uuid('must be a chat id (UUID)').optional().describe('The conversation to continue; absent: a new one'),
  message: z.string().trim().min(1, 'must not be empty').max(CHAT_MESSAGE_MAX_CHARS, `must be at most ${CHAT_MESSAGE_MAX_CHARS} characters`),
  team: TeamName.optional().describe("A new conversation's team (default: the gateway's default team, GET /v1/teams' `default`); a conversation keeps its team"),
});
export const ListChatsQuery = z.strictObject({ limit: queryInt(1, 200).default(50), cursor: z.string().max(200).optional().describe("the previous page's nextCursor: older conversations") });
/** POST /v1/tasks' body minus the prompt (made from the conversation) and the workspace; the team defaults to the chat's. */
export const ChatTaskFields = SubmitTaskBody.omit({ prompt: true, workspace: true, team: true }).extend({ team: TeamName.optional() });
export const ChatTaskBody = ChatTaskFields.nullish();

/** How much of a long conversation a reply's model call reads (the newest turns; ~50k tokens). */
export const CHAT_CONTEXT_CHARS = 200_000;
export const DEFAULT_CHAT_MAX_TOKENS = 2048;

const sseFrame = (e: ChatStreamEvent): string => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
const lastMessage = (s: ChatState): ChatMessageView => toChatMessageView(s.messages[s.messages.length - 1] as ChatMessage);
/** A model failure as the stream and the log say it (the provider's message, bounded); a refusal asking again cannot mend is told apart (its message is left out of the next turns). */
const failureOf = (err: unknown): { code: string; message: string } => ({ code: refusedForItsContent(err) ? REPLY_REFUSED : 'model_error', message: cutText(err instanceof Error ? err.message : String(err), 500) });
/**
 * The model API refused the request for what it holds (400, 413, 422: too long, malformed): not
 * for the deployment's own doing (a 401 or 403 — a bad key — or an answer it could not read),
 * after which the person's message must stay in the conversation.
 */
const refusedForItsContent = (err: unknown): boolean => err instanceof ModelRejectedError && err.status !== null && [400, 413, 422].includes(err.status);

export const chatRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const model: StreamingModel = d.chatModel ?? new OfflineChatModel();
  const maxTokens = d.chatMaxTokens ?? DEFAULT_CHAT_MAX_TOKENS;
  const replies = (labels: { outcome: 'recorded' | 'failed' | 'unrecorded' }): void => d.metrics.chatReplies.inc(labels);
  /** Replies being written (and when each is done): at shutdown each is abandoned and recorded as failed, so closing waits for no model. */
  const inFlight = new Map<AbortController, Promise<void>>();
  d.metrics.onScrape(() => d.metrics.chatStreams.set(inFlight.size));
  app.addHook('preClose', async () => {
    for (const c of inFlight.keys()) c.abort(new Error('the gateway is shutting down'));
    // Their responses end before the server closes (an open one would hold it until keep-alive times out).
    await Promise.allSettled(inFlight.values());
  });

  /** A chat the caller's tenant may see; another tenant's chat is a plain 404. */
  const loadVisibleChat = async (req: FastifyRequest, chatId: string): Promise<LoadedChat> => {
    const loaded = await loadChat(d.pool, chatId);
    if (!chatExists(loaded.state) || loaded.state.tenantId !== req.tenant) throw notFound(`chat ${chatId}`);
    return loaded;
  };

  r.post('/v1/chat', { schema: { body: PostChatBody, tags: ['chat'], summary: 'Send a message and stream the reply (SSE: chat, delta…, then message or error); no chatId starts a conversation' } }, async (req, reply) => {
    const { chatId: given, message, team: askedTeam } = req.body;
    const loaded = given ? await loadVisibleChat(req, given) : null;
    if (loaded && askedTeam !== undefined && askedTeam !== loaded.state.team) {
      const msg = `this chat is with team '${loaded.state.team}' (a conversation keeps its team)`;
      throw new HttpError(400, 'validation_error', `body.team: ${msg}`, [{ field: 'body.team', message: msg }]);
    }
    const teamName = loaded?.state.team ?? teamNamed(d, askedTeam, 'body.team');
    const team = own(d.teams, teamName);
    if (!team) throw new HttpError(409, 'team_unavailable', `this chat's team '${teamName}' is no longer configured`);
    const chatId = given ?? d.newId();
    // The person's message is recorded before the model is called.
    const { state } = await recordChat(
      d.pool,
      chatId,
      (s, newId): NewChatEvent[] => [
        ...(chatExists(s) ? [] : [{ id: newId(), type: 'ChatStarted' as const, data: { tenantId: req.tenant, team: teamName, startedBy: req.actor } }]),
        { id: newId(), type: 'UserMessageRecorded', data: { text: message, author: req.actor } },
      ],
      { newId: d.newId, ...(loaded ? { loaded } : {}) },
    );
    const userMessage = lastMessage(state);
    reply.hijack();
    streamReply(req, reply, state, team, userMessage, loaded === null);
  });

  /**
   * The reply, streamed: `chat` (the recorded message), a `delta` per piece of text, then the
   * recorded reply (`message`) or the failure (`error`). A client that goes away does not stop
   * it: the model call runs to its end and the whole reply is recorded (never a part of it), for
   * `GET /v1/chats/:id` and the next message to see.
   */
  function streamReply(req: FastifyRequest, reply: FastifyReply, state: ChatState, team: TeamDefinition, userMessage: ChatMessageView, created: boolean): void {
    const res = reply.raw;
    const chatId = state.id;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no', 'x-chat-id': chatId, ...SECURITY_HEADERS });
    const send = (e: ChatStreamEvent): void => {
      if (!res.destroyed && !res.writableEnded) res.write(sseFrame(e));
    };
    send({ event: 'chat', data: { chatId, team: team.id, created, message: userMessage } });
    const heartbeat = setInterval(() => {
      if (!res.destroyed && !res.writableEnded) res.write(': heartbeat\n\n');
    }, d.sseHeartbeatMs);
    const abort = new AbortController();
    const started = performance.now();
    const record = (make: () => NewChatEvent) => recordChat(d.pool, chatId, () => [make()], { newId: d.newId });

    const run = async (): Promise<void> => {
      let response;
      try {
        const request = chatRequest(team, chatTurns(state, CHAT_CONTEXT_CHARS), { maxTokens, signal: abort.signal });
        response = await model.stream(request, (text) => send({ event: 'delta', data: { text } }));
      } catch (err) {
        const error = abort.signal.aborted ? { code: 'shutdown', message: 'the gateway shut down during the reply; send the message again' } : failureOf(err);
        if (!abort.signal.aborted) d.log.warn({ err, chatId }, 'chat reply failed');
        const failed = await record(() => ({ id: d.newId(), type: 'AssistantReplyFailed', data: { inReplyTo: userMessage.id, error, durationMs: Math.round(performance.now() - started) } }));
        replies({ outcome: 'failed' });
        return send({ event: 'error', data: { error, message: lastMessage(failed.state) } });
      }
      // Model output is text the system produces: cleaned (the text rule), never refused.
      const text = cleanText(textOf(response.content)).value;
      const { usage, stopReason, offline } = response;
      const done = await record(() => ({ id: d.newId(), type: 'AssistantReplyRecorded', data: { inReplyTo: userMessage.id, text, model: response.model, offline, usage, stopReason, durationMs: Math.round(performance.now() - started) } }));
      replies({ outcome: 'recorded' });
      send({ event: 'message', data: lastMessage(done.state) });
    };
    const finished = run()
      .catch((err: unknown) => {
        // Recording failed (Postgres away): nothing of the reply is kept.
        d.log.error({ err, chatId }, 'chat reply could not be recorded');
        replies({ outcome: 'unrecorded' });
        send({ event: 'error', data: { error: { code: 'unavailable', message: 'the reply could not be recorded; nothing of it was kept — send the message again' }, message: null } });
      })
      .finally(() => {
        clearInterval(heartbeat);
        inFlight.delete(abort);
        if (!res.writableEnded) res.end();
      });
    inFlight.set(abort, finished);
  }

  r.get('/v1/chats', { schema: { querystring: ListChatsQuery, tags: ['chat'], summary: "The tenant's conversations, the most recently active first" } }, async (req) => {
    const page = await listChats(d.pool, req.tenant, req.query.limit, req.query.cursor);
    return { items: page.items.map((c) => ({ id: c.id, team: c.team, title: chatTitle(c.firstMessage), createdAt: c.createdAt.toISOString(), updatedAt: c.updatedAt.toISOString(), version: c.version, messages: c.messages, tasks: c.tasks })), nextCursor: page.nextCursor };
  });

  r.get('/v1/chats/:id', { schema: { params: ChatIdParams, tags: ['chat'], summary: 'A conversation: its messages (role, text, model, offline, usage, times) and the tasks started from it' } }, async (req) => {
    return toChatView((await loadVisibleChat(req, req.params.id)).state);
  });

  r.post('/v1/chats/:id/task', { schema: { params: ChatIdParams, body: ChatTaskBody, response: succeedsWith(201, 'The task (asked again at the same message with the same settings: the same task)'), tags: ['chat'], summary: 'Turn the conversation into a task: the last user message is the request, the conversation its context' } }, async (req, reply) => {
    const chatId = req.params.id;
    const { state } = await loadVisibleChat(req, chatId);
    const fields = req.body ?? ChatTaskFields.parse({});
    const built = chatTaskPrompt(chatId, state);
    if (!built) throw new HttpError(409, 'chat_empty', 'the conversation has no message to make a task of');
    if (fields.team === undefined && !own(d.teams, state.team)) {
      throw new HttpError(409, 'team_unavailable', `this chat's team '${state.team}' is no longer configured: name the task's team (body.team; GET /v1/teams lists them)`);
    }
    const submission: TaskSubmission = { ...fields, team: fields.team ?? state.team, prompt: built.prompt, metadata: { ...fields.metadata, chatId } };
    checkSubmission(d, req.tenant, submission);
    // One task per request (the last message the person wrote): asked again — a double click, a
    // retry, or once the reply to it has landed (which changes the prompt, not the request) — it is
    // the same task. A task started from this request already is found on the chat.
    const requestAt = state.messages.findIndex((m) => m.id === built.requestMessageId);
    const earlier = state.tasks.find((t) => state.messages.findIndex((m) => m.id === t.afterMessageId) >= requestAt);
    const taskId = earlier?.taskId ?? uuidV5(`chat:${chatId}:task:${built.requestMessageId}`);
    const { prompt: _prompt, ...settings } = submission;
    let requestHash = digestJson(settings);
    // A task started before one task per request was keyed with its prompt in its hash: the same
    // settings with the prompt it was given are still the same request.
    if (earlier) {
      const first = (await d.load(taskId)).events[0];
      if (first?.type === 'TaskSubmitted' && first.data.requestHash !== null && first.data.requestHash === digestJson({ ...settings, prompt: first.data.prompt })) requestHash = first.data.requestHash;
    }
    let submitted;
    try {
      submitted = await submitTask(d, req, submission, { taskId, repeatable: true, requestHash, eventMetadata: { chatId } });
    } catch (err) {
      if (err instanceof HttpError && err.code === 'idempotency_key_reused') {
        throw new HttpError(409, 'chat_task_exists', `a task was already started from this request (the conversation's last message from a person), with other settings (task ${taskId}); send another message to start another`, { taskId });
      }
      throw err;
    }
    // Recorded on the chat once (a repeated request finds it there).
    await recordChat(d.pool, chatId, (s): NewChatEvent[] =>
      s.tasks.some((t) => t.taskId === taskId)
        ? []
        : [{ id: uuidV5(`${taskId}:chat`), type: 'ChatTaskStarted', data: { taskId, team: submission.team, afterMessageId: built.afterMessageId, leftOut: built.leftOut, startedBy: req.actor } }],
    );
    if (submitted.replayed) void reply.header('idempotent-replayed', 'true');
    return reply.status(201).send(toTaskView(submitted.state));
  });
};
