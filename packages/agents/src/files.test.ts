import { describe, expect, it } from 'vitest';
import { editRefusal, fileAccessViolation } from './files.ts';

describe('the file policy', () => {
  it("a name starting with '..' is a name in the workspace, held to the locks and the scope (it passed unchecked: only '..' itself leaves the workspace)", () => {
    expect(fileAccessViolation({ locks: ['api/**'] }, 'write_file', { path: '..notes.md' })).toBe("'..notes.md' is outside this subtask's file locks (api/**)");
    expect(fileAccessViolation({ scope: { allowed: [], blocked: ['..secret'] }, locks: null }, 'read_file', { path: '..secret' })).toBe("'..secret' is outside this agent's file scope (blocked: ..secret)");
    // Out of the workspace: the file tools refuse it themselves; a person's edit is told so.
    expect(fileAccessViolation({ locks: ['api/**'] }, 'write_file', { path: '../x' })).toBeNull();
    expect(editRefusal({ locks: ['api/**'] }, 'write_file', { path: '../x' })).toBe("'../x' is not in the workspace (a path relative to it, without '..')");
    expect(editRefusal({ locks: ['api/**'] }, 'write_file', { path: '..x' })).toBe("'..x' is outside this subtask's file locks (api/**)");
  });
});
