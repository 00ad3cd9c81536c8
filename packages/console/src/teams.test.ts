import { describe, expect, it } from 'vitest';
import { startingTeam } from '../ui/teams.ts';

describe("startingTeam (the team the new-task and new-chat forms start on)", () => {
  it("the gateway's default team, not a hard-coded one (a deployment without research had its forms stuck on it)", () => {
    expect(startingTeam(null, 'engineering')).toBe('engineering');
  });
  it('no default: none, for the person to pick (a first team taken silently had sent tasks to the benchmark team)', () => {
    expect(startingTeam(null, null)).toBe('');
  });
  it("the person's pick wins", () => {
    expect(startingTeam('bench', 'engineering')).toBe('bench');
  });
});
