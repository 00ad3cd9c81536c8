import type { DecidedEvent } from '@baton/domain';
import { recorded } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import { filesAtStart, recordedWrites } from './subagent.ts';

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const turn = (agentId: string, n: number, uses: { id: string; name: string; input: Record<string, unknown> }[]): DecidedEvent => ({
  type: 'ModelTurnRecorded',
  data: { agentId, turn: n, model: 'm', content: uses.map((u) => ({ type: 'tool_use' as const, ...u })), stopReason: 'tool_use', usage, offline: true, durationMs: 1 },
});
const results = (agentId: string, rs: { id: string; name: string; isError: boolean }[]): DecidedEvent => ({
  type: 'ToolResultsRecorded',
  data: { agentId, results: rs.map((r) => ({ toolUseId: r.id, toolName: r.name, content: 'c', isError: r.isError })) },
});

describe('the file writes an agent recorded (what rebuilds a workspace that is gone)', () => {
  it('each write_file and edit_file that succeeded, in order, with its input; failed ones, other tools and other agents left out', () => {
    const events = recorded([
      turn('frontend', 1, [{ id: 'w1', name: 'write_file', input: { path: './web/a.ts', content: 'one' } }, { id: 'r1', name: 'read_file', input: { path: 'web/a.ts' } }]),
      results('frontend', [{ id: 'w1', name: 'write_file', isError: false }, { id: 'r1', name: 'read_file', isError: false }]),
      turn('backend', 1, [{ id: 'b1', name: 'write_file', input: { path: 'api/b.ts', content: 'theirs' } }]),
      results('backend', [{ id: 'b1', name: 'write_file', isError: false }]),
      turn('frontend', 2, [{ id: 'e1', name: 'edit_file', input: { path: 'web/a.ts', old_string: 'one', new_string: 'two' } }, { id: 'e2', name: 'edit_file', input: { path: 'web/a.ts', old_string: 'zzz', new_string: 'x' } }]),
      results('frontend', [{ id: 'e1', name: 'edit_file', isError: false }, { id: 'e2', name: 'edit_file', isError: true }]),
      turn('frontend', 3, [{ id: 'w2', name: 'write_file', input: { path: 'web/c.ts', content: 'never answered' } }]),
    ]);
    expect(recordedWrites(events, 'frontend')).toEqual([
      { kind: 'write', path: 'web/a.ts', content: 'one' },
      { kind: 'edit', path: 'web/a.ts', oldString: 'one', newString: 'two', all: false },
    ]);
  });
});

describe('the task files an agent was seeded with', () => {
  const stored = (agentId: string, path: string, sha: string): DecidedEvent => ({ type: 'ArtifactStored', data: { agentId, path, bytes: 1, sha256: sha.repeat(64), mediaType: 'text/plain' } });
  const deleted = (agentId: string, path: string): DecidedEvent => ({ type: 'FileDeleted', data: { agentId, path } });
  it('the last version of each path stored before its first start; what others stored while it worked left out', () => {
    const events = recorded([
      stored('researcher-1', 'notes.md', 'a'),
      stored('researcher-1', 'notes.md', 'b'),
      { type: 'SubagentStarted', data: { agentId: 'frontend', attempt: 1, runnerId: 'r' } },
      stored('backend', 'api/x.ts', 'c'),
      { type: 'SubagentStarted', data: { agentId: 'frontend', attempt: 2, runnerId: 'r' } },
    ]);
    expect(filesAtStart(events, 'frontend')).toEqual({ artifacts: [{ path: 'notes.md', sha256: 'b'.repeat(64) }], deletedFiles: [] });
    expect(filesAtStart(events, 'nobody').artifacts).toHaveLength(2); // never started: everything stored so far
  });
  it('the files deleted before its start, unless stored again; an artifact deleted is not seeded', () => {
    const events = recorded([
      stored('a', 'old.ts', 'a'),
      deleted('a', 'old.ts'),
      deleted('a', 'README.md'),
      deleted('a', 'back.ts'),
      stored('b', 'back.ts', 'b'),
      { type: 'SubagentStarted', data: { agentId: 'c', attempt: 1, runnerId: 'r' } },
      deleted('d', 'later.ts'),
    ]);
    expect(filesAtStart(events, 'c')).toEqual({ artifacts: [{ path: 'back.ts', sha256: 'b'.repeat(64) }], deletedFiles: ['README.md', 'old.ts'] });
  });
});
