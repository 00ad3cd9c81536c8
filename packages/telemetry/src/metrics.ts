import client from 'prom-client';

/**
 * Every Prometheus series Baton exports, defined once, on one registry per process. A service
 * exposes the registry at GET /metrics (the gateway on its HTTP port, the others on their ops
 * port); Prometheus tells the services apart by their scrape target (`job`, `instance`). Gauges
 * computed from the database (tasks by status, open requests, stuck tasks) are the gateway's: it
 * is the one every deployment runs and scrapes, and the figures are the same from any replica.
 */
export const registry = new client.Registry();

/**
 * Collect Node's own process metrics (CPU, memory, event-loop lag, GC) too. (No `service` label:
 * Prometheus labels each target with its job and instance.)
 */
export function startMetrics(): void {
  if (!defaultsStarted) {
    client.collectDefaultMetrics({ register: registry });
    defaultsStarted = true;
  }
}
let defaultsStarted = false;

const seconds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const longSeconds = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];

/**
 * Export a metric defined on no registry (`registers: []`), once: for series only some processes
 * measure — the relay's, in the orchestrators that run one and the gateway that reads its state —
 * which every other process would otherwise export as a constant 0 that reads as a fact ("no relay
 * leads").
 */
export function exportMetric<T extends client.Metric>(m: T): T {
  if (!registry.getSingleMetric((m as unknown as { name: string }).name)) registry.registerMetric(m);
  return m;
}

export const metrics = {
  // Agent loop (the orchestrator for leads, the runner for subagents).
  stepSeconds: new client.Histogram({
    name: 'baton_step_duration_seconds',
    help: 'One agent step: a model turn and the tool calls it asked for (or the triage that parked it), by where it ran and the team',
    labelNames: ['runs_in', 'team'] as const,
    buckets: seconds,
    registers: [registry],
  }),
  turns: new client.Counter({ name: 'baton_model_turns_total', help: 'Model turns recorded, by team and model', labelNames: ['team', 'model'] as const, registers: [registry] }),
  modelSeconds: new client.Histogram({ name: 'baton_model_call_duration_seconds', help: 'Model calls, by model and outcome', labelNames: ['model', 'outcome'] as const, buckets: seconds, registers: [registry] }),
  tokens: new client.Counter({
    name: 'baton_model_tokens_total',
    help: 'Model tokens, by team, model and kind (input, output, cache_read, cache_write)',
    labelNames: ['team', 'model', 'kind'] as const,
    registers: [registry],
  }),
  costUsd: new client.Counter({ name: 'baton_model_cost_usd_total', help: 'Model spending in US dollars (list prices), by team and model', labelNames: ['team', 'model'] as const, registers: [registry] }),
  toolCalls: new client.Counter({ name: 'baton_tool_calls_total', help: 'Tool calls run, by tool and outcome (ok, error)', labelNames: ['tool', 'outcome'] as const, registers: [registry] }),

  // The log and the bus.
  appendSeconds: new client.Histogram({ name: 'baton_append_duration_seconds', help: 'Appends to the event log (one stream, one statement)', buckets: seconds, registers: [registry] }),
  eventsAppended: new client.Counter({ name: 'baton_events_appended_total', help: 'Events appended to the log', registers: [registry] }),
  // The relay's: exported by the processes that run one or read its state (exportMetric).
  relayPublished: new client.Counter({ name: 'baton_relay_published_total', help: 'Messages the relay published to JetStream (acknowledged)', registers: [] }),
  relayLagEvents: new client.Gauge({ name: 'baton_relay_lag_events', help: 'Transitions in the log the relay has not published yet (up to 1,000; log head vs checkpoint)', registers: [] }),
  relayLagSeconds: new client.Gauge({ name: 'baton_relay_lag_seconds', help: 'Age of the oldest transition the relay has not published (0 when caught up)', registers: [] }),
  relayLeading: new client.Gauge({ name: 'baton_relay_leading', help: '1 when a relay holds the leader lock for this database', registers: [] }),
  relayLeader: new client.Gauge({ name: 'baton_relay_leader', help: '1 in the process whose relay holds the leader lock (which replica leads; baton_relay_leading says whether any does)', registers: [] }),
  consumerPending: new client.Gauge({ name: 'baton_consumer_pending_messages', help: 'Messages a durable consumer has not been delivered yet (JetStream num_pending)', labelNames: ['consumer'] as const, registers: [registry] }),
  consumerAckPending: new client.Gauge({ name: 'baton_consumer_ack_pending_messages', help: 'Messages delivered and not yet acknowledged (JetStream num_ack_pending)', labelNames: ['consumer'] as const, registers: [registry] }),
  consumerRedelivered: new client.Gauge({ name: 'baton_consumer_redelivered_messages', help: 'Messages delivered more than once and still unacknowledged (JetStream num_redelivered)', labelNames: ['consumer'] as const, registers: [registry] }),
  messagesHandled: new client.Counter({
    name: 'baton_messages_handled_total',
    help: 'Messages a consumer handled, by outcome (ack; retry; transient: a lost connection, not counted; dead_letter; handed_back)',
    labelNames: ['consumer', 'outcome'] as const,
    registers: [registry],
  }),
  handlerSeconds: new client.Histogram({ name: 'baton_message_handler_duration_seconds', help: 'Time a consumer handler held a message', labelNames: ['consumer'] as const, buckets: seconds, registers: [registry] }),

  // Runner.
  jobs: new client.Counter({ name: 'baton_runner_jobs_total', help: 'Runner jobs, by kind and outcome', labelNames: ['kind', 'outcome'] as const, registers: [registry] }),
  jobSeconds: new client.Histogram({ name: 'baton_runner_job_duration_seconds', help: 'Runner jobs from claim to exit, by kind', labelNames: ['kind'] as const, buckets: seconds, registers: [registry] }),
  sandboxesActive: new client.Gauge({ name: 'baton_sandboxes_active', help: 'Sandboxes this runner holds open, by provider', labelNames: ['provider'] as const, registers: [registry] }),
  sandboxSeconds: new client.Histogram({
    name: 'baton_sandbox_duration_seconds',
    help: 'How long a sandbox stayed open for one job, by provider and how it ended (paused, killed)',
    labelNames: ['provider', 'end'] as const,
    buckets: longSeconds,
    registers: [registry],
  }),

  // Notifier.
  deliveries: new client.Counter({
    name: 'baton_deliveries_total',
    help: 'Webhook and email deliveries, by channel and outcome (delivered; failed; gone: the endpoint answered 410; retried)',
    labelNames: ['channel', 'outcome'] as const,
    registers: [registry],
  }),
  deliverySeconds: new client.Histogram({ name: 'baton_delivery_duration_seconds', help: 'One delivery attempt, by channel', labelNames: ['channel'] as const, buckets: seconds, registers: [registry] }),
};

/**
 * The gateway's own series, on a registry of each app (a process may run several in tests): the
 * HTTP API, SSE and chat streams, and the task figures read from the database when scraped.
 * `render` gives them together with the process-wide series.
 */
export function createGatewayMetrics() {
  const r = new client.Registry();
  const series = {
    // Tasks (gateway; from the tasks read model at scrape time).
    tasks: new client.Gauge({ name: 'baton_tasks', help: 'Tasks by status', labelNames: ['status'] as const, registers: [r] }),
    parkedTasks: new client.Gauge({ name: 'baton_parked_tasks', help: 'Tasks waiting for a person (approval, answer or budget), holding no compute', registers: [r] }),
    openRequests: new client.Gauge({ name: 'baton_open_requests', help: 'Requests waiting for a person, by kind', labelNames: ['kind'] as const, registers: [r] }),
    openRequestOldestSeconds: new client.Gauge({ name: 'baton_open_request_oldest_age_seconds', help: 'Age of the oldest request waiting for a person, by kind (0: none)', labelNames: ['kind'] as const, registers: [r] }),
    deadLetters: new client.Gauge({ name: 'baton_dead_letters', help: 'Messages given up after their attempts (table dead_letters), by consumer: a webhook or mail no longer tried, a job or lead trigger failed', labelNames: ['consumer'] as const, registers: [r] }),
    deadLetterLastSeconds: new client.Gauge({ name: 'baton_dead_letter_last_timestamp_seconds', help: 'When the last dead letter of a consumer was recorded (Unix seconds)', labelNames: ['consumer'] as const, registers: [r] }),
    stuckTasks: new client.Gauge({ name: 'baton_stuck_tasks', help: 'Tasks with work no person holds, no transition for STUCK_AFTER_MS and no live agent lease', registers: [r] }),

    // Gateway HTTP.
    httpRequests: new client.Counter({ name: 'baton_http_requests_total', help: 'HTTP requests, by method, route and status code', labelNames: ['method', 'route', 'status'] as const, registers: [r] }),
    httpSeconds: new client.Histogram({ name: 'baton_http_request_duration_seconds', help: 'HTTP request duration, by method and route', labelNames: ['method', 'route'] as const, buckets: seconds, registers: [r] }),
    sseConnections: new client.Gauge({ name: 'baton_sse_connections', help: 'Open SSE streams on this gateway', registers: [r] }),
    chatReplies: new client.Counter({ name: 'baton_chat_replies_total', help: 'Chat replies by outcome (recorded, failed, unrecorded)', labelNames: ['outcome'] as const, registers: [r] }),
    chatStreams: new client.Gauge({ name: 'baton_chat_streams', help: 'Chat replies being streamed', registers: [r] }),
    tasksSubmitted: new client.Counter({ name: 'baton_tasks_submitted_total', help: 'Tasks submitted, by team', labelNames: ['team'] as const, registers: [r] }),
    sseHiddenReads: new client.Counter({ name: 'baton_sse_hidden_reads_total', help: 'SSE reads that found events still hidden by the commit horizon (looked again within milliseconds)', registers: [r] }),
  };
  // Every outcome from the start: a rate of failed replies reads 0, not "No data", before the first.
  for (const outcome of ['recorded', 'failed', 'unrecorded'] as const) series.chatReplies.inc({ outcome }, 0);
  const own = new Set<() => Promise<void> | void>();
  return {
    registry: r,
    ...series,
    /** Run `refresh` before each of this app's scrapes (gauges read from its own state or database). */
    onScrape: (refresh: () => Promise<void> | void): void => void own.add(refresh),
    /** The process-wide series (after their scrape-time refreshers) and the app's. */
    render: async (): Promise<string> => {
      await Promise.all([refreshBeforeScrape(), ...[...own].map((f) => bounded(async () => f()))]);
      return client.Registry.merge([registry, r]).metrics();
    },
  };
}
export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;

const refreshers = new Set<() => Promise<void>>();

/** How long a scrape waits for a refresher: one whose server does not answer (NATS reconnecting) must not hold the scrape up past Prometheus's timeout. */
export const SCRAPE_REFRESH_TIMEOUT_MS = 1000;

/** Run a refresher for at most SCRAPE_REFRESH_TIMEOUT_MS; failing or late, its gauges keep their values. */
async function bounded(refresh: () => Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([refresh().catch(() => {}), new Promise<void>((resolve) => (timer = setTimeout(resolve, SCRAPE_REFRESH_TIMEOUT_MS)))]);
  clearTimeout(timer);
}

/**
 * Run `refresh` before each scrape (gauges read from the database or the NATS server: the relay's
 * lag, a consumer's pending count). A refresher that fails, or does not answer within
 * SCRAPE_REFRESH_TIMEOUT_MS, leaves its gauges as they were. Returns the function that removes it.
 */
export function onScrape(refresh: () => Promise<void>): () => void {
  refreshers.add(refresh);
  return () => void refreshers.delete(refresh);
}

async function refreshBeforeScrape(): Promise<void> {
  await Promise.all([...refreshers].map(bounded));
}

/** The process-wide registry in Prometheus text format, refreshed first. */
export async function renderMetrics(): Promise<string> {
  await refreshBeforeScrape();
  return registry.metrics();
}
export const METRICS_CONTENT_TYPE = registry.contentType;

/** Every series name Baton defines (the dashboard's queries are checked against it). */
export const METRIC_NAMES: readonly string[] = [...Object.values(metrics), ...Object.values(createGatewayMetrics())]
  .filter((v) => v instanceof client.Counter || v instanceof client.Gauge || v instanceof client.Histogram)
  .map((m) => (m as unknown as { name: string }).name);
