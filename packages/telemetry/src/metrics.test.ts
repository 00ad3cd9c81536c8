import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGatewayMetrics, exportMetric, metrics, onScrape, renderMetrics, SCRAPE_REFRESH_TIMEOUT_MS } from './metrics.ts';

describe("the gateway's series", () => {
  it('chat replies by outcome exist at 0 before the first reply (a failure rate reads 0, not "No data")', async () => {
    const text = await createGatewayMetrics().render();
    for (const outcome of ['recorded', 'failed', 'unrecorded']) expect(text).toMatch(new RegExp(`^baton_chat_replies_total\\{outcome="${outcome}"\\} 0$`, 'm'));
  });
});

describe('scrape-time refreshers', () => {
  const removers: (() => void)[] = [];
  afterEach(() => {
    for (const r of removers.splice(0)) r();
    vi.useRealTimers();
  });

  it('one whose server never answers (NATS reconnecting) does not hold the scrape: its gauge keeps its value', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    exportMetric(metrics.relayLagEvents).set(7); // (exported by the processes that read the relay's state)
    removers.push(onScrape(() => new Promise<void>(() => {})));
    removers.push(onScrape(async () => Promise.reject(new Error('down'))));
    let text: string | null = null;
    const scrape = renderMetrics().then((t) => (text = t));
    await vi.advanceTimersByTimeAsync(SCRAPE_REFRESH_TIMEOUT_MS - 1);
    expect(text).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    await scrape;
    expect(text).toMatch(/^baton_relay_lag_events 7$/m);
  });
});
