import { fakeMessagesApi, waitFor, type FakeMessagesApi } from '@baton/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicModel, ModelStalledError } from './anthropic.ts';
import { chatRequest, RoutingChatModel } from './chat.ts';
import { OfflineChatModel } from './offline-chat.ts';
import { builtinTeams } from './teams.ts';

/** AnthropicModel.stream through the real @anthropic-ai/sdk against a local fake that streams Messages API events. */
let api: FakeMessagesApi;
beforeEach(async () => {
  api = await fakeMessagesApi();
});
afterEach(async () => {
  await api.close();
});

const research = builtinTeams.research!;
const turns = [
  { role: 'user' as const, text: 'What is NATS?' },
  { role: 'assistant' as const, text: 'A messaging system.' },
  { role: 'user' as const, text: 'And JetStream?' },
];

describe('AnthropicModel.stream (Messages API server-sent events)', () => {
  it('hands each text delta over as it arrives and resolves with the whole reply, its usage and cost', async () => {
    const model = new AnthropicModel({ apiKey: 'sk-test', baseURL: api.baseURL, maxRetries: 0 });
    api.queue({ deltas: ['Jet', 'Stream is ', 'NATS persistence.'], usage: { input_tokens: 1000, output_tokens: 200, cache_read_input_tokens: 100 } });
    const deltas: string[] = [];
    const res = await model.stream(chatRequest(research, turns, { maxTokens: 512 }), (d) => deltas.push(d));
    expect(deltas).toEqual(['Jet', 'Stream is ', 'NATS persistence.']);
    expect(res).toMatchObject({ content: [{ type: 'text', text: 'JetStream is NATS persistence.' }], stopReason: 'end_turn', model: 'claude-sonnet-4-5-20250929', offline: false });
    expect(res.usage).toEqual({ inputTokens: 1000, outputTokens: 200, cacheReadTokens: 100, cacheWriteTokens: 0, costUsd: (1000 * 3 + 200 * 15 + 100 * 0.3) / 1e6 });
    const sent = api.served[0]!;
    expect(sent.headers.authorization).toBe('Bearer sk-test');
    expect(sent.body).toMatchObject({
      stream: true,
      model: research.lead.model, // the team lead's model
      max_tokens: 512,
      messages: [
        { role: 'user', content: 'What is NATS?' },
        { role: 'assistant', content: [{ type: 'text', text: 'A messaging system.' }] },
        { role: 'user', content: 'And JetStream?' },
      ],
    });
    expect(sent.body.system).toMatch(/chat assistant for the 'research' team/);
    expect(sent.body.tools).toBeUndefined();
  });

  it('a stream that goes quiet for the timeout fails saying so; the connection is cut', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL: api.baseURL, maxRetries: 0, timeoutMs: 300 });
    api.queue({ deltas: ['one ', 'two ', 'three'], holdAt: 2 });
    const deltas: string[] = [];
    await expect(model.stream(chatRequest(research, turns, { maxTokens: 64 }), (d) => deltas.push(d))).rejects.toThrow(ModelStalledError);
    expect(deltas).toEqual(['one ', 'two ']);
    api.release();
    await waitFor(() => api.served[0]?.closedByClient, { what: 'the fake to see the connection closed' });
  });

  it('a caller that goes away mid-stream (abort): the request is cut, the call rejects, no partial reply is returned', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL: api.baseURL, maxRetries: 0 });
    api.queue({ deltas: ['one ', 'two ', 'three ', 'four'], holdAt: 2 });
    const abort = new AbortController();
    const deltas: string[] = [];
    const pending = model.stream(chatRequest(research, turns, { maxTokens: 64, signal: abort.signal }), (d) => deltas.push(d));
    await waitFor(() => api.holding && deltas.length === 2, { what: 'two deltas, then the stream held' });
    abort.abort();
    await expect(pending).rejects.toThrow(/abort/i);
    api.release();
    await waitFor(() => api.served[0]?.closedByClient, { what: 'the fake to see the connection closed' });
    expect(deltas).toEqual(['one ', 'two ']);
    expect(api.served[0]?.finished).toBe(false);
  });

  it('a stream that breaks, or ends before the message does, rejects: its text so far is never a reply', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL: api.baseURL, maxRetries: 0 });
    api.queue({ deltas: ['a ', 'b ', 'c'], dropAfter: 2 });
    await expect(model.stream(chatRequest(research, turns, { maxTokens: 64 }), () => {})).rejects.toThrow();
    api.queue({ deltas: ['a ', 'b ', 'c'], endAfter: 2 });
    await expect(model.stream(chatRequest(research, turns, { maxTokens: 64 }), () => {})).rejects.toThrow(/ended/);
  });

  it('an error status before the stream starts rejects (after the SDK\'s retries)', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL: api.baseURL, maxRetries: 1 });
    api.queue({ deltas: [], status: 529 });
    api.queue({ deltas: ['fine'] });
    const res = await model.stream(chatRequest(research, turns, { maxTokens: 64 }), () => {});
    expect(res.content).toEqual([{ type: 'text', text: 'fine' }]);
    expect(api.served.map((s) => s.headers['x-stainless-retry-count'])).toEqual(['0', '1']);
  });

  it('RoutingChatModel: Claude with a key; a team whose lead model is offline… always gets the offline chat model', async () => {
    const claude = new AnthropicModel({ apiKey: 'k', baseURL: api.baseURL, maxRetries: 0 });
    const routed = new RoutingChatModel(claude, new OfflineChatModel());
    api.queue({ deltas: ['from Claude'] });
    expect((await routed.stream(chatRequest(research, turns, { maxTokens: 64 }), () => {})).offline).toBe(false);
    const bench = builtinTeams.bench!;
    expect(bench.lead.model).toMatch(/^offline/);
    expect((await routed.stream(chatRequest(bench, turns, { maxTokens: 64 }), () => {})).offline).toBe(true);
    expect(api.served).toHaveLength(1);
  });
});
