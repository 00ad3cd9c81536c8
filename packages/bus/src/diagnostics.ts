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
});
export type Diagnostics = z.infer<typeof Diagnostics>;

export function diagnostics(service: string, extra: () => Partial<Diagnostics> = () => ({})): Diagnostics {
  const activeResources: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) activeResources[r] = (activeResources[r] ?? 0) + 1;
  const mem = process.memoryUsage();
  return { service, pid: process.pid, uptimeS: process.uptime(), rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, activeResources, ...extra() };
}

export function serveDiagnostics(nc: NatsConnection, names: BusNames, service: string, extra?: () => Partial<Diagnostics>): Subscription {
  return nc.subscribe(names.diagSubject(service), { callback: (_err, msg) => void msg.respond(JSON.stringify(diagnostics(service, extra))) });
}

export async function requestDiagnostics(nc: NatsConnection, names: BusNames, service: string, timeoutMs = 2000): Promise<Diagnostics> {
  const reply = await nc.request(names.diagSubject(service), '', { timeout: timeoutMs });
  return Diagnostics.parse(reply.json());
}
