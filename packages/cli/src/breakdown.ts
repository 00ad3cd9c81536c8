import { readdir, readFile } from 'node:fs/promises';
import { requestDiagnostics, type BusNames, type Diagnostics } from '@baton/bus';
import type { NatsConnection } from '@nats-io/transport-node';
import { SERVICES } from './launcher.ts';
import { pollUntil } from './poll.ts';

/**
 * Where the time of a step goes, by process: CPU per step of each service (from its own
 * process.cpuUsage over NATS diagnostics) and of the Postgres and NATS servers (from /proc, when
 * they run on this machine), statements sent to Postgres and messages through NATS per step
 * (published and delivered, per service). Taken around a whole metric (e.g. M1's 2,000 steps),
 * so it is an average, not a sample.
 */
export interface StepBreakdown {
  steps: number;
  services: { service: string; cpuMs: number; statements: number; natsIn: number; natsOut: number }[];
  /** CPU ms per step of processes found in /proc by name (absent when none is visible). */
  servers: { name: string; cpuMs: number }[];
}

interface Snapshot {
  diags: Diagnostics[];
  servers: Map<string, number>;
}

const SERVER_NAMES = ['postgres', 'nats-server'];

/** CPU ms used so far by every process named `postgres` or `nats-server` (summed per name). */
async function serverCpuMs(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const ticks = 100; // USER_HZ on Linux
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!SERVER_NAMES.includes(name)) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(f[11]) + Number(f[12])) / ticks) * 1000; // utime + stime
      out.set(name, (out.get(name) ?? 0) + ms);
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** Wait until every service answers its diagnostics (each subscribes once it has started). */
export async function waitForDiagnostics(nc: NatsConnection, names: BusNames, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const s of SERVICES) {
    await pollUntil(() => requestDiagnostics(nc, names, s, { timeoutMs: 2000 }), { timeoutMs: Math.max(0, deadline - Date.now()), intervalMs: 200, onTimeout: () => new Error(`${s} did not answer diagnostics within ${timeoutMs / 1000} s`) });
  }
}

async function snapshot(nc: NatsConnection, names: BusNames): Promise<Snapshot> {
  const [diags, servers] = await Promise.all([Promise.all(SERVICES.map((s) => requestDiagnostics(nc, names, s))), serverCpuMs()]);
  return { diags, servers };
}

/** Run `work` (which performs `steps` durable steps) and say what each step cost each process. */
export async function measureSteps<T>(nc: NatsConnection, names: BusNames, steps: number, work: () => Promise<T>): Promise<{ result: T; breakdown: StepBreakdown }> {
  const before = await snapshot(nc, names);
  const result = await work();
  const after = await snapshot(nc, names);
  const services = after.diags.map((d, i) => {
    const b = before.diags[i] as Diagnostics;
    return {
      service: d.service,
      cpuMs: ((d.cpuUs ?? 0) - (b.cpuUs ?? 0)) / 1000 / steps,
      statements: ((d.pgQueries ?? 0) - (b.pgQueries ?? 0)) / steps,
      natsIn: ((d.nats?.inMsgs ?? 0) - (b.nats?.inMsgs ?? 0)) / steps,
      natsOut: ((d.nats?.outMsgs ?? 0) - (b.nats?.outMsgs ?? 0)) / steps,
    };
  });
  const servers = [...after.servers].map(([name, ms]) => ({ name, cpuMs: (ms - (before.servers.get(name) ?? 0)) / steps }));
  return { result, breakdown: { steps, services, servers } };
}

/** One line: per step (or other unit of work), each service's CPU, statements and NATS messages, then the servers' CPU. */
export function formatBreakdown(b: StepBreakdown, unit = 'step'): string {
  const svc = b.services.map((s) => `${s.service} ${s.cpuMs.toFixed(3)} ms cpu, ${s.statements.toFixed(2)} stmt, nats ${s.natsOut.toFixed(2)} out/${s.natsIn.toFixed(2)} in`);
  const srv = b.servers.map((s) => `${s.name} ${s.cpuMs.toFixed(3)} ms cpu`);
  const total = [...b.services.map((s) => s.cpuMs), ...b.servers.map((s) => s.cpuMs)].reduce((a, n) => a + n, 0);
  return `per ${unit} (${b.steps}): ${[...svc, ...srv].join(' | ')} | all ${total.toFixed(3)} ms cpu`;
}
