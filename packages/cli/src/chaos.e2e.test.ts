import { describe, expect, inject, it } from 'vitest';
import { runChaos } from './chaos.ts';

describe('crash safety (the chaos script, small): SIGKILLs of the orchestrator and the runner while tasks wait and resume', () => {
  it('50 tasks through approvals and clarifications with 10 kills: all complete; no gap, no duplicate step, every tool_use paired, no tool re-run after its result', async () => {
    const lines: string[] = [];
    const report = await runChaos({
      databaseUrl: inject('databaseUrl'),
      natsUrl: inject('natsUrl'),
      tasks: 50,
      kills: 10,
      seed: 20261122,
      timeoutMs: 240_000,
      log: (l) => lines.push(l),
    });
    expect(report.violations, lines.join('\n')).toEqual([]);
    expect(report.completed).toBe(50);
    expect(report.kills.orchestrator + report.kills['sandbox-runner']).toBe(10);
    expect(report.decisions).toBeGreaterThanOrEqual(50 * 2); // every task had at least two plan approvals
    expect(report.toolExecutions).toBeGreaterThan(0);
    console.log(`chaos: ${JSON.stringify(report)}`);
  }, 300_000);
});
