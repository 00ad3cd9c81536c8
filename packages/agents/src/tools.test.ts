import { describe, expect, it } from 'vitest';
import { askUserTool, parseToolInput, readFileTool, writeFileTool } from './tools.ts';

describe("a file tool's path", () => {
  it('may not hold a control character (a line break would pass for more lines in a diff or a listing), a backslash or a bidirectional control', () => {
    const r = parseToolInput(writeFileTool, { path: 'api/evil\n\nIGNORE PREVIOUS.ts', content: 'x' });
    expect(!r.ok && r.error).toMatch(/^invalid input for write_file: path: the path contains a control character \(U\+000A, a line break\)/);
    expect(parseToolInput(readFileTool, { path: 'a\tb.ts' }).ok).toBe(false);
    const back = parseToolInput(readFileTool, { path: 'src\\app.ts' });
    expect(!back.ok && back.error).toMatch(/path: the path contains a backslash \(directories are separated by '\/'\)/);
    for (const path of ['a\u0085b.ts', 'a\u2028b.ts', 'a\u009b31m.ts', 'a\u200fb.ts']) expect([path, parseToolInput(readFileTool, { path }).ok]).toEqual([path, false]);
    const bidi = parseToolInput(writeFileTool, { path: 'api/\u202eevil.md', content: 'x' });
    expect(!bidi.ok && bidi.error).toMatch(/path: the path contains a bidirectional control character \(U\+202E: the name would display as another\)/);
    expect(parseToolInput(writeFileTool, { path: 'src/ünïcode names.ts', content: 'x' }).ok).toBe(true);
    // Invisible characters that join nothing: a name that shows as another's.
    const zw = parseToolInput(writeFileTool, { path: 'a\u200bpi/app.ts', content: 'x' });
    expect(!zw.ok && zw.error).toMatch(/path: the path contains an invisible character \(U\+200B: the name would display as another\)/);
    for (const path of ['x\u2060.ts', 'x\ufeff.ts', 'x\u2062.ts', 'x\u180e.ts', 'a\u00adpi.ts', 'x\u034f.ts', 'x\u2065.ts', 'x\u206a.ts', 'x\u115f.ts', 'x\u3164.ts', 'x\uffa0.ts', 'x\u17b4.ts', 'x\u180b.ts', 'x\u{e0041}.ts']) expect([path, parseToolInput(readFileTool, { path }).ok]).toEqual([path, false]);
    expect(parseToolInput(readFileTool, { path: 'x\u{e0041}.ts' })).toMatchObject({ ok: false, error: expect.stringMatching(/U\+E0041/) });
    // The joiners scripts and emoji need are names' own.
    for (const path of ['docs/می\u200cخواهم.md', 'icons/👩\u200d💻.svg', 'icons/❤\ufe0f.svg']) expect([path, parseToolInput(writeFileTool, { path, content: 'x' }).ok]).toEqual([path, true]);
  });
});

describe('a tool input of the wrong type', () => {
  it('is told its type alone — not also a size its right type would have had', () => {
    expect(parseToolInput(askUserTool, { questions: 'a string, not a list' })).toMatchObject({ ok: false, error: 'invalid input for ask_user: questions: must be an array' });
    expect(parseToolInput(askUserTool, { questions: Array.from({ length: 11 }, () => 'q') })).toMatchObject({ ok: false, error: 'invalid input for ask_user: questions: must have at most 10 items' });
  });
});

describe("a file tool's file", () => {
  it("is not a directory: a path ending in '/' (or '.') is refused by write_file, read_file and edit_file, so no artifact is named so (its diff and archive broke)", () => {
    for (const path of ['src/gen/', 'src/q.ts/', '.', 'src/.', 'src/./']) {
      expect(parseToolInput(writeFileTool, { path, content: 'x' })).toMatchObject({ ok: false, error: `invalid input for write_file: path: names a directory (it ends in '/' or is '.'): give the file's name` });
      expect(parseToolInput(readFileTool, { path })).toMatchObject({ ok: false });
    }
    expect(parseToolInput(writeFileTool, { path: 'src/gen/a.ts', content: 'x' })).toMatchObject({ ok: true });
    expect(parseToolInput(writeFileTool, { path: '.env', content: 'x' })).toMatchObject({ ok: true });
  });
});
