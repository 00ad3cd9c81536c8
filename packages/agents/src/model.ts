import { NamedError, type ContentBlock, type StopReason, type Usage } from '@baton/domain';

/** A tool as the model sees it (Anthropic Messages API shape). */
export interface ToolSpec {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export type ModelMessage =
  | { role: 'user'; content: string | UserBlock[] }
  | { role: 'assistant'; content: ContentBlock[] };

export type UserBlock = { type: 'text'; text: string } | { type: 'tool_result'; tool_use_id: string; content: string; is_error?: boolean };

export interface ModelRequest {
  /** The agent's type (e.g. `research-lead`), so the offline model can play its role. */
  agentType: string;
  model: string;
  system: string;
  messages: ModelMessage[];
  tools: ToolSpec[];
  maxTokens: number;
  signal?: AbortSignal;
}

export interface ModelResponse {
  content: ContentBlock[];
  stopReason: StopReason;
  usage: Usage;
  model: string;
  /** True for the offline model: everything it writes is labelled as offline. */
  offline: boolean;
}

/** The one interface the orchestrator and the runner call models through. */
export interface ModelClient {
  readonly name: string;
  /**
   * How long an agent keeps asking while this model's API cannot answer (ModelUnavailableError),
   * counted from the first failed call since its last turn, before it ends `model_unavailable`
   * (ANTHROPIC_OUTAGE_LIMIT_MS); absent: for as long as it takes.
   */
  readonly outageLimitMs?: number;
  /**
   * The model that answers a request for `requested` (absent: that one): the offline model answers
   * for Claude when no key is set. What metrics and spans name a call by, so a run's series agree.
   */
  servedModel?(requested: string): string;
  complete(req: ModelRequest): Promise<ModelResponse>;
}

/**
 * A model that streams its reply's text as it is written (chat mode). `stream` calls `onText`
 * with each piece of text as it arrives and resolves with the whole reply, as `complete` would;
 * it rejects on failure or abort — a caller never gets a partial reply as a result.
 */
export interface StreamingModel {
  readonly name: string;
  stream(req: ModelRequest, onText: (delta: string) => void): Promise<ModelResponse>;
}

/**
 * The model API refused the request in a way asking again cannot mend (400, 401, 403, 404, 413,
 * 422), or answered what cannot be read: the agent fails at once with `model_error` and these
 * words, instead of the request being paid for again on every retry.
 */
export class ModelRejectedError extends NamedError {
  readonly code = 'model_error';
  /** The API's status when it refused the request (null: its answer could not be read). */
  readonly status: number | null;
  constructor(message: string, options?: ErrorOptions & { status?: number }) {
    super(message, options);
    this.status = options?.status ?? null;
  }
}

/**
 * The model API could not answer now (429, 5xx, 529, a cut connection, an answer that stalled),
 * after the client's own retries: worth asking again later. The agent loop records it
 * (ModelUnavailable) and the host asks again later — a runner hands the attempt back (it was not
 * lost to the agent's work) and its job is retried — until the outage has lasted the client's
 * `outageLimitMs`.
 */
export class ModelUnavailableError extends Error {
  readonly code: string = 'model_unavailable';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}
