import Anthropic from '@anthropic-ai/sdk';
import { ContentBlock, StopReason, type Usage } from '@baton/domain';
import { z } from 'zod';
import { ModelRejectedError, ModelUnavailableError, type ModelClient, type ModelMessage, type ModelRequest, type ModelResponse, type StreamingModel, type ToolSpec } from './model.ts';
import { OfflineModel } from './offline.ts';
import { costUsd } from './prices.ts';

export interface AnthropicModelOptions {
  /** Default: ANTHROPIC_API_KEY (the SDK sends it as `authorization: Bearer …`). */
  apiKey?: string;
  /** Default: ANTHROPIC_BASE_URL, else Anthropic's API (tests point it at a local fake). */
  baseURL?: string;
  /** Retries on 408/409/429/5xx/529 and connection errors, with the SDK's exponential backoff (default 4). */
  maxRetries?: number;
  /**
   * Per request (default 10 minutes; a slow turn is normal, a hung socket is not): until the
   * answer's headers (the SDK's own timer), then as long as its body goes quiet (`quietBodyFetch`:
   * the SDK's timer stops at the headers, and a body that stalled then hung for undici's 5 minutes).
   */
  timeoutMs?: number;
  /** Server-side web search: how many searches one turn may make (default 5). */
  webSearchMaxUses?: number;
}

/** The most tokens of one kind one model call may report. */
export const MAX_CALL_TOKENS = 100_000_000;

/** The response fields Baton keeps, parsed (model output is input from outside). */
const ResponseSchema = z.object({
  model: z.string().min(1),
  // A tool call's id names its result: two calls of one id cannot both be answered.
  content: z.array(ContentBlock).refine((blocks) => {
    const ids = blocks.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
    return new Set(ids).size === ids.length;
  }, 'two tool calls have the same id'),
  stop_reason: z.string().nullable(),
  // One call's tokens: far under 100 million (a context window is at most a few million); more is
  // not usage but a broken answer, which would otherwise spend a budget (or pass 2^53) at once.
  usage: z.object({
    input_tokens: z.number().int().nonnegative().max(MAX_CALL_TOKENS),
    output_tokens: z.number().int().nonnegative().max(MAX_CALL_TOKENS),
    cache_read_input_tokens: z.number().int().nonnegative().max(MAX_CALL_TOKENS).nullish(),
    cache_creation_input_tokens: z.number().int().nonnegative().max(MAX_CALL_TOKENS).nullish(),
  }),
});

/** The name under which an agent's config asks for Anthropic's server-side web search. */
export const WEB_SEARCH_TOOL = 'web_search';

/**
 * Claude through @anthropic-ai/sdk (Messages API with tools). The conversation is rebuilt from
 * the log by the caller; this class only translates, calls and parses. Usage (input, output,
 * cache read and cache write tokens) and its cost (prices.ts) are returned with every turn.
 * Server tool blocks (web search calls and results) are kept verbatim, so a replayed
 * conversation sends them back unchanged.
 */
export class AnthropicModel implements ModelClient, StreamingModel {
  readonly name = 'anthropic';
  private readonly client: Anthropic;
  private readonly webSearchMaxUses: number;

  constructor(opts: AnthropicModelOptions = {}) {
    const timeoutMs = opts.timeoutMs ?? 600_000;
    this.client = new Anthropic({
      ...(opts.apiKey !== undefined ? { apiKey: opts.apiKey } : {}),
      ...(opts.baseURL !== undefined ? { baseURL: opts.baseURL } : {}),
      maxRetries: opts.maxRetries ?? 4,
      timeout: timeoutMs,
      fetch: quietBodyFetch(timeoutMs),
    });
    this.webSearchMaxUses = opts.webSearchMaxUses ?? 5;
  }

  async complete(req: ModelRequest): Promise<ModelResponse> {
    const raw = await this.client.messages.create(this.params(req), req.signal ? { signal: req.signal } : {}).catch(asModelError);
    return toResponse(raw);
  }

  /**
   * The same call, streamed (the SDK's `messages.stream`: Messages API server-sent events): each
   * text delta goes to `onText` as it arrives; the reply is the stream's final message, parsed
   * like `complete`'s. A failed, aborted or cut-short stream rejects — its partial text is never
   * a result.
   */
  async stream(req: ModelRequest, onText: (delta: string) => void): Promise<ModelResponse> {
    const stream = this.client.messages.stream(this.params(req), req.signal ? { signal: req.signal } : {});
    stream.on('text', (delta) => onText(delta));
    const final = await stream.finalMessage().catch(asModelError);
    // The SDK hands back what it had when a response ends early without an error: not a reply.
    if (final.stop_reason === null) throw new Error('the Messages API stream ended before the message did (no stop reason): the reply is incomplete');
    return toResponse(final);
  }

  private params(req: ModelRequest): Anthropic.MessageCreateParamsNonStreaming {
    return {
      model: req.model,
      max_tokens: req.maxTokens,
      system: req.system,
      messages: req.messages.map(toParam),
      ...(req.tools.length ? { tools: req.tools.map((t) => this.toTool(t)) } : {}),
    } as Anthropic.MessageCreateParamsNonStreaming;
  }

  private toTool(t: ToolSpec): unknown {
    if (t.name === WEB_SEARCH_TOOL) return { type: 'web_search_20250305', name: WEB_SEARCH_TOOL, max_uses: this.webSearchMaxUses };
    return { name: t.name, description: t.description, input_schema: t.input_schema };
  }
}

/** An answer whose body went quiet for the model's timeout (`quietBodyFetch`). */
export class ModelStalledError extends ModelUnavailableError {
  override readonly code = 'model_timeout';
  constructor(timeoutMs: number) {
    super(`the model's answer stopped arriving: nothing for ${timeoutMs} ms after it began (ANTHROPIC_TIMEOUT_MS)`);
    this.name = new.target.name;
  }
}

/** Statuses a request would get again however often it was sent: not retried. */
const FINAL_STATUSES = new Set([400, 401, 403, 404, 413, 422]);

/**
 * A failed call in Baton's terms, thrown: the stall (wherever the SDK wrapped it: a body read
 * that failed, as the error or its cause); a refusal asking again cannot mend (ModelRejectedError);
 * anything else the API or the connection did (ModelUnavailableError, retried by the caller); an
 * abort of ours as it came.
 */
function asModelError(err: unknown): never {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) if (e instanceof ModelStalledError) throw e;
  if (err instanceof Anthropic.APIError && typeof err.status === 'number' && FINAL_STATUSES.has(err.status)) {
    const body = (err.error as { error?: { type?: string; message?: string } } | undefined)?.error;
    const said = body?.message ?? err.message.replace(/^\d{3}\s+/, '');
    throw new ModelRejectedError(`the Messages API refused the request: ${err.status}${body?.type ? ` ${body.type}` : ''}: ${said}`, { cause: err, status: err.status });
  }
  // Anything else the API or the connection did (429, 5xx, 529, a reset) after the SDK's retries; not an abort of ours.
  if (err instanceof Anthropic.APIError && !(err instanceof Anthropic.APIUserAbortError)) throw new ModelUnavailableError(`the Messages API could not answer: ${err.message}`, { cause: err });
  // An answer cut off as it came (its JSON ends early; the connection closed mid-body): asked again, not blamed on the runner.
  if (err instanceof SyntaxError || (err instanceof TypeError && err.message === 'terminated')) throw new ModelUnavailableError(`the model's answer was cut off before its end: ${err.message}`, { cause: err });
  throw err;
}

/**
 * `fetch` whose response body fails with ModelStalledError when no byte of it comes for
 * `timeoutMs` (from the headers on; each chunk starts the wait again, so a long stream that keeps
 * coming is never cut). An abort of the caller's signal still aborts it. Exported for tests.
 */
export function quietBodyFetch(timeoutMs: number, base: typeof fetch = fetch): typeof fetch {
  return async (input, init = {}) => {
    const ctl = new AbortController();
    const outer = init.signal;
    const follow = (): void => ctl.abort(outer?.reason);
    if (outer?.aborted) follow();
    else outer?.addEventListener('abort', follow, { once: true });
    const res = await base(input, { ...init, signal: ctl.signal }).catch((err: unknown) => {
      outer?.removeEventListener('abort', follow);
      throw err;
    });
    const source = res.body;
    if (!source) {
      outer?.removeEventListener('abort', follow);
      return res;
    }
    const reader = source.getReader();
    let timer: NodeJS.Timeout | undefined;
    const settle = (): void => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', follow);
    };
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const stalled = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            const err = new ModelStalledError(timeoutMs);
            ctl.abort(err);
            reject(err);
          }, timeoutMs);
        });
        try {
          const { done, value } = await Promise.race([reader.read(), stalled]);
          clearTimeout(timer);
          if (done) {
            settle();
            controller.close();
          } else controller.enqueue(value);
        } catch (err) {
          settle();
          controller.error(err);
        }
      },
      cancel(reason) {
        settle();
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** A Messages API response as Baton keeps it: parsed (model output is input from outside), with usage and cost. */
function toResponse(raw: unknown): ModelResponse {
  const parsed = ResponseSchema.safeParse(raw);
  if (!parsed.success) throw new ModelRejectedError(`the model's answer could not be read: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'answer'}: ${i.message}`).join('; ')}`);
  const res = parsed.data;
  const usage: Usage = {
    inputTokens: res.usage.input_tokens,
    outputTokens: res.usage.output_tokens,
    cacheReadTokens: res.usage.cache_read_input_tokens ?? 0,
    cacheWriteTokens: res.usage.cache_creation_input_tokens ?? 0,
    costUsd: 0,
  };
  usage.costUsd = costUsd(res.model, usage);
  return { content: res.content, stopReason: stopReasonOf(res.stop_reason), usage, model: res.model, offline: false };
}

function toParam(m: ModelMessage): unknown {
  if (m.role === 'assistant') return { role: 'assistant', content: m.content };
  return { role: 'user', content: m.content };
}

/** The API's stop reasons, in Baton's vocabulary (a reason we do not know ends the turn). */
export function stopReasonOf(r: string | null): StopReason {
  if (r === 'model_context_window_exceeded') return 'max_tokens';
  const parsed = StopReason.safeParse(r);
  return parsed.success ? parsed.data : 'end_turn';
}

/**
 * The model client services use: Claude when a key is configured, the offline model otherwise;
 * an agent whose configured model is `offline…` (the benchmark team) always gets the offline one.
 */
export class RoutingModel implements ModelClient {
  readonly name: string;
  readonly outageLimitMs?: number;
  private readonly claude: ModelClient | null;
  private readonly offline: ModelClient;
  constructor(claude: ModelClient | null, offline: ModelClient, o: { outageLimitMs?: number } = {}) {
    this.claude = claude;
    this.offline = offline;
    this.name = claude ? `${claude.name}+${offline.name}` : offline.name;
    if (o.outageLimitMs !== undefined) this.outageLimitMs = o.outageLimitMs;
  }

  servedModel(requested: string): string {
    return this.routeFor(requested).servedModel?.(requested) ?? requested;
  }

  complete(req: ModelRequest): Promise<ModelResponse> {
    return this.routeFor(req.model).complete(req);
  }

  private routeFor(model: string): ModelClient {
    return this.claude && !model.startsWith('offline') ? this.claude : this.offline;
  }
}

/** The services' model, from their (already validated) configuration. */
export function modelFromConfig(c: { ANTHROPIC_API_KEY?: string | undefined; ANTHROPIC_BASE_URL?: string | undefined; ANTHROPIC_MAX_RETRIES: number; ANTHROPIC_TIMEOUT_MS: number; ANTHROPIC_OUTAGE_LIMIT_MS: number; OFFLINE_MODEL_LATENCY_MS: number }): ModelClient {
  const offline = new OfflineModel({ latencyMs: c.OFFLINE_MODEL_LATENCY_MS });
  if (!c.ANTHROPIC_API_KEY) return new RoutingModel(null, offline);
  const claude = new AnthropicModel({
    apiKey: c.ANTHROPIC_API_KEY,
    ...(c.ANTHROPIC_BASE_URL ? { baseURL: c.ANTHROPIC_BASE_URL } : {}),
    maxRetries: c.ANTHROPIC_MAX_RETRIES,
    timeoutMs: c.ANTHROPIC_TIMEOUT_MS,
  });
  return new RoutingModel(claude, offline, { outageLimitMs: c.ANTHROPIC_OUTAGE_LIMIT_MS });
}
