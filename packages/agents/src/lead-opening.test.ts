import { describe, expect, it } from 'vitest';
import { leadOpening, WORKSPACE_FILES_HEADING } from './teams.ts';

const file = (path: string, bytes = 10) => ({ path, bytes });

describe("the lead's opening message: the workspace's files", () => {
  it('every file of a small workspace, as before; .git/ and node_modules/ counted, not listed (they crowded the project out)', () => {
    const text = leadOpening('Fix it', [file('.git/HEAD'), file('.git/objects/ab/cd'), file('node_modules/x/index.js'), file('src/a.ts'), file('README.md')]);
    expect(text).toBe(`Fix it\n\n${WORKSPACE_FILES_HEADING} (5, the codebase this task starts from):\n- src/a.ts (10 bytes)\n- README.md (10 bytes)\n… and 3 files under .git/ and node_modules/, not listed`);
    expect(leadOpening('Fix it', null)).toBe('Fix it');
  });

  it('a large one: the directories two levels deep with what they hold, and the shallowest 500 files — every top-level part of the repository is seen (before: the first 500 paths, gen/ filling them)', () => {
    const files = [file('README.md'), file('packages/cli/src/main.ts', 100), file('scripts/run.sh'), ...Array.from({ length: 5000 }, (_, i) => file(`gen/d${i % 50}/f${i}.txt`, 1))];
    const text = leadOpening('Change the CLI', files);
    const listed = [...text.matchAll(/^- (\S+)/gm)].map((m) => m[1]);
    expect(listed).toHaveLength(500);
    expect(listed).toEqual(expect.arrayContaining(['README.md', 'scripts/run.sh']));
    expect(text).toMatch(/\n {2}packages\/: 1 files, 100 bytes\n {2}packages\/cli\/: 1 files, 100 bytes\n {2}scripts\/: 1 files, 10 bytes/);
    expect(text).toMatch(/\n {2}gen\/: 5000 files, 5000 bytes\n/);
    expect(text).toMatch(/\n… and 4503 more files, deeper \(the directories below count them\)\n/);
  });
});
