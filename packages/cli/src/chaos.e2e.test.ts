import { deleteNamespace } from '@baton/testing';
import { describe, expect, inject, it } from 'vitest';
import { runChaos } from './chaos.ts';

describe('crash safety (the chaos script, small): SIGKILLs of the orchestrator and the runner while tasks wait and resume', () => {
  it('50 tasks through approvals and clarifications with 10 kills: all complete; no gap, no duplicate step, every tool_use paired, no tool re-run after its result; every webhook and mail delivered', async () => {
    const lines: string[] = [];
    // The script picks its own NATS namespace; the orchestrator names it when it starts (at
    // info), so this test can delete the streams it made when it ends.
    if (!['info', 'debug', 'trace'].includes(process.env.CHAOS_LOG_LEVEL ?? '')) process.env.CHAOS_LOG_LEVEL = 'info';
    const namespaces = new Set<string>();
    const serviceLog = (l: string): void => {
      const ns = /orchestrator started \{"namespace":"(chaos[0-9a-f]+)"/.exec(l)?.[1];
      if (ns) namespaces.add(ns);
      if (/ERROR|FATAL/.test(l)) lines.push(l);
    };
    try {
      const report = await runChaos({
        databaseUrl: inject('databaseUrl'),
        natsUrl: inject('natsUrl'),
        tasks: 50,
        kills: 10,
        seed: 20261122,
        timeoutMs: 240_000,
        log: (l) => lines.push(l),
        serviceLog,
      });
      expect(report.violations, lines.join('\n')).toEqual([]);
      expect(report.completed).toBe(50);
      expect(report.kills.orchestrator + report.kills['sandbox-runner']).toBe(10);
      expect(report.decisions).toBeGreaterThanOrEqual(50 * 2); // every task had at least two plan approvals
      expect(report.toolExecutions).toBeGreaterThan(0);
      // Every task's webhooks (at least its completion) and mails (at least its completion) came.
      expect(report.deliveries.webhooks).toBeGreaterThanOrEqual(50);
      expect(report.deliveries.mails).toBeGreaterThanOrEqual(50);
      expect(report.followed).toBe(10);
      console.log(`chaos: ${JSON.stringify(report)}`);
    } finally {
      for (const ns of namespaces) await deleteNamespace(inject('natsUrl'), ns);
    }
    expect(namespaces.size).toBe(1);
  }, 300_000);

  it('30 tasks with 4 kills, 2 deletions of the bus streams, 2 NATS kill -9 restarts (one with an empty store), 3 notifier and 3 gateway kills: the log re-feeds the bus, all complete, each recorded once, followers see every event, no webhook lost, no mail twice', async () => {
    const lines: string[] = [];
    const report = await runChaos({
      databaseUrl: inject('databaseUrl'),
      natsUrl: inject('natsUrl'),
      tasks: 30,
      kills: 4,
      seed: 20261123,
      timeoutMs: 240_000,
      log: (l) => lines.push(l),
      faults: { busWipes: 2, natsRestarts: 2, postgresRestarts: 0, notifierKills: 3, gatewayKills: 3 },
    }).catch((err: unknown) => {
      // What the run and the services said (errors), with why it stopped.
      throw new Error(`${(err as Error).message}\n--- the run's log:\n${lines.join('\n')}`, { cause: err });
    });
    expect(report.violations, lines.join('\n')).toEqual([]);
    expect(report.completed).toBe(30);
    expect(report.faults).toEqual({ busWipes: 2, natsRestarts: 2, postgresRestarts: 0, notifierKills: 3, gatewayKills: 3 });
    console.log(`chaos with faults: ${JSON.stringify(report)}`);
  }, 300_000);
});
