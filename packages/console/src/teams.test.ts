import { describe, expect, it } from 'vitest';
import { startingTeam } from '../ui/teams.ts';

describe("startingTeam (the team the new-task and new-chat forms start on)", () => {
  const teams = [{ id: 'bench' }, { id: 'engineering' }];
  it("the gateway's default team, not a hard-coded one (a deployment without research had its forms stuck on it)", () => {
    expect(startingTeam(null, 'engineering', teams)).toBe('engineering');
  });
  it('no default: the first configured team; nothing loaded yet: none (the gateway decides)', () => {
    expect(startingTeam(null, null, teams)).toBe('bench');
    expect(startingTeam(null, null, [])).toBe('');
  });
  it("the person's pick wins", () => {
    expect(startingTeam('bench', 'engineering', teams)).toBe('bench');
  });
});
