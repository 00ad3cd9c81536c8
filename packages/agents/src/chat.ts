import type { ChatTurn } from '@baton/domain';
import { AnthropicModel } from './anthropic.ts';
import type { ModelRequest, ModelResponse, StreamingModel } from './model.ts';
import { OfflineChatModel } from './offline-chat.ts';
import type { TeamDefinition } from './teams.ts';

/** The agent type chat requests carry (no team defines it: chat is not an agent of the loop). */
export const CHAT_AGENT_TYPE = 'chat';

/** What the chat model is told: whose assistant it is, and what a conversation can become. */
export function chatSystemPrompt(team: TeamDefinition): string {
  return [
    `You are Baton's chat assistant for the '${team.id}' team (${team.description}).`,
    'Answer the person directly and concisely. You have no tools in this conversation and cannot run anything.',
    `When the person wants real work done, say that they can turn this conversation into a task: the ${team.id} team then plans, delegates and works on their last request, with this conversation as its context.`,
  ].join('\n');
}

/** A chat reply's model request: the team lead's model, the conversation as alternating turns, no tools. */
export function chatRequest(team: TeamDefinition, turns: readonly ChatTurn[], opts: { maxTokens: number; signal?: AbortSignal }): ModelRequest {
  return {
    agentType: CHAT_AGENT_TYPE,
    model: team.lead.model,
    system: chatSystemPrompt(team),
    messages: turns.map((t) => (t.role === 'user' ? { role: 'user', content: t.text } : { role: 'assistant', content: [{ type: 'text', text: t.text }] })),
    tools: [],
    maxTokens: opts.maxTokens,
    ...(opts.signal ? { signal: opts.signal } : {}),
  };
}

/**
 * The chat model services use: Claude when a key is configured, the offline chat model otherwise
 * (and always for a team whose lead's model is `offline…`).
 */
export class RoutingChatModel implements StreamingModel {
  readonly name: string;
  private readonly claude: StreamingModel | null;
  private readonly offline: StreamingModel;
  constructor(claude: StreamingModel | null, offline: StreamingModel) {
    this.claude = claude;
    this.offline = offline;
    this.name = claude ? `${claude.name}+${offline.name}` : offline.name;
  }

  stream(req: ModelRequest, onText: (delta: string) => void): Promise<ModelResponse> {
    return this.claude && !req.model.startsWith('offline') ? this.claude.stream(req, onText) : this.offline.stream(req, onText);
  }
}

/** The gateway's chat model, from its (already validated) configuration. */
export function chatModelFromConfig(c: { ANTHROPIC_API_KEY?: string | undefined; ANTHROPIC_BASE_URL?: string | undefined; ANTHROPIC_MAX_RETRIES: number; ANTHROPIC_TIMEOUT_MS: number; OFFLINE_CHAT_WORD_DELAY_MS: number }): StreamingModel {
  const offline = new OfflineChatModel({ wordDelayMs: c.OFFLINE_CHAT_WORD_DELAY_MS });
  if (!c.ANTHROPIC_API_KEY) return new RoutingChatModel(null, offline);
  const claude = new AnthropicModel({
    apiKey: c.ANTHROPIC_API_KEY,
    ...(c.ANTHROPIC_BASE_URL ? { baseURL: c.ANTHROPIC_BASE_URL } : {}),
    maxRetries: c.ANTHROPIC_MAX_RETRIES,
    timeoutMs: c.ANTHROPIC_TIMEOUT_MS,
  });
  return new RoutingChatModel(claude, offline);
}
