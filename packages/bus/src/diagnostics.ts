import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { z } from 'zod';
import type { BusNames } from './subjects.ts';

/**
 * A process's vital signs, answered over NATS request/reply on `baton.diag.<service>`: what
 * `baton bench` (M4) reads to show that parked tasks cost no timers, sockets or memory.
 */
export const Diagnostics = z.object({
  service: z.string(),
  pid: z.number().int(),
  uptimeS: z.number(),
  rssBytes: z.number(),
  heapUsedBytes: z.number(),
  /** process.getActiveResourcesInfo(), counted by kind (Timeout, TCPSocketWrap, …). */
  activeResources: z.record(z.string(), z.number()),
  /** Statements sent to Postgres since start (when the service reports it). */
  pgQueries: z.number().optional(),
  /** Tasks held in the service's TaskCache (a waiting or finished task is not kept). */
  cachedTasks: z.number().optional(),
  /** The gateway's SSE hub: how transitions reach it (one subscription to every task's, or one per watched task) and how many tasks its streams watch. */
  sseHub: z.object({ mode: z.enum(['all', 'per-task']), watchedTasks: z.number().int() }).optional(),
  /** The ops port (/healthz, /readyz, /metrics) of a worker service. */
  opsPort: z.number().optional(),
  /** CPU time used since start (user + system), in microseconds. */
  cpuUs: z.number().optional(),
  /** Messages through the service's NATS connection since it opened (in = delivered to it, out = published). */
  nats: z.object({ inMsgs: z.number(), outMsgs: z.number() }).optional(),
});
export type Diagnostics = z.infer<typeof Diagnostics>;

export function diagnostics(service: string, extra: () => Partial<Diagnostics> = () => ({})): Diagnostics {
  const activeResources: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) activeResources[r] = (activeResources[r] ?? 0) + 1;
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage();
  return { service, pid: process.pid, uptimeS: process.uptime(), rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, activeResources, cpuUs: cpu.user + cpu.system, ...extra() };
}

export function serveDiagnostics(nc: NatsConnection, names: BusNames, service: string, extra?: () => Partial<Diagnostics>): Subscription {
  return nc.subscribe(names.diagSubject(service), {
    callback: (_err, msg) => {
      // "gc": collect garbage first (only when the process runs with --expose-gc), so the heap figure is what is retained.
      if (msg.string() === 'gc') (globalThis as { gc?: () => void }).gc?.();
      const { inMsgs, outMsgs } = nc.stats();
      void msg.respond(JSON.stringify(diagnostics(service, () => ({ nats: { inMsgs, outMsgs }, ...extra?.() }))));
    },
  });
}

export async function requestDiagnostics(nc: NatsConnection, names: BusNames, service: string, opts: { gc?: boolean; timeoutMs?: number } = {}): Promise<Diagnostics> {
  const reply = await nc.request(names.diagSubject(service), opts.gc ? 'gc' : '', { timeout: opts.timeoutMs ?? 5000 });
  return Diagnostics.parse(reply.json());
}
