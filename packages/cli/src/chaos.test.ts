import { describe, expect, it } from 'vitest';
import { faultPlan, NO_FAULTS, parseFaults, rng } from './chaos.ts';

describe('the chaos run\'s faults', () => {
  it('--faults names each kind once with a whole number; anything else is refused, naming the part and the kinds', () => {
    expect(parseFaults('')).toEqual(NO_FAULTS);
    expect(parseFaults('bus-wipes=6, nats-restarts=4,postgres-restarts=4,notifier-kills=5,gateway-kills=3')).toEqual({ busWipes: 6, natsRestarts: 4, postgresRestarts: 4, notifierKills: 5, gatewayKills: 3 });
    for (const bad of ['notifier-kills', 'notifier-kills=', 'notifier-kills=-1', 'notifier-kills=1.5', 'notifier-kills=1=2', 'runner-kills=2'])
      expect(() => parseFaults(bad), bad).toThrow(`--faults: '${bad}' is not one of bus-wipes=N, nats-restarts=N, postgres-restarts=N, notifier-kills=N, gateway-kills=N`);
    expect(() => parseFaults('gateway-kills=1,gateway-kills=2')).toThrow('--faults: gateway-kills is given twice');
  });

  it('the plan holds each fault asked for, and a seed without notifier or gateway kills plans what it planned before they existed', () => {
    const plan = faultPlan(rng(7), 10, { ...NO_FAULTS, busWipes: 2, notifierKills: 3, gatewayKills: 4 });
    const count = (f: string) => plan.filter((p) => p === f).length;
    expect([count('kill-orchestrator') + count('kill-sandbox-runner'), count('bus-wipe'), count('kill-notifier'), count('kill-gateway')]).toEqual([10, 2, 3, 4]);
    // The same seed and faults, the same plan (a failing run is repeated with its seed).
    expect(faultPlan(rng(7), 10, { ...NO_FAULTS, busWipes: 2, notifierKills: 3, gatewayKills: 4 })).toEqual(plan);
    expect(faultPlan(rng(7), 3, { ...NO_FAULTS, busWipes: 1 })).toEqual(['bus-wipe', 'kill-orchestrator', 'kill-orchestrator', 'kill-sandbox-runner']);
  });
});
