import path from 'node:path';
import { cutText, isGlob } from '@baton/domain';
import { call, calls, firstPrompt, oneLine, rejectedPlans, text, type Play } from './offline-script.ts';
import { WORKSPACE_FILES_HEADING } from './teams.ts';

/**
 * The offline model's engineering team. It makes a small but real change, test-first, on any
 * TypeScript project with a vitest suite: the lead plans one subtask per side of the codebase
 * (backend and frontend directories, in parallel); each engineer writes a failing test for a
 * new function in its locked files, runs it (it fails), implements it, and runs the suite (it
 * passes); the reviewer reads every changed file and asks for a doc comment on each new
 * exported function that lacks one — which the first pass leaves out, so the demo shows a
 * round of changes — then approves. With ANTHROPIC_API_KEY set, Claude does the real work.
 */

const BACKEND_DIRS = ['api', 'server', 'backend', 'src', 'lib'];
const FRONTEND_DIRS = ['web', 'ui', 'client', 'frontend', 'app'];

/** The workspace's file paths, from the listing the orchestrator puts in the lead's prompt. */
export function workspaceFilesOf(prompt: string): string[] {
  const at = prompt.indexOf(WORKSPACE_FILES_HEADING);
  if (at < 0) return [];
  return [...prompt.slice(at).matchAll(/^- (\S+)/gm)].map((m) => m[1] ?? '').filter(Boolean);
}

const engineeringLead: Play = (req, turn) => {
  const prompt = firstPrompt(req.messages);
  const task = oneLine(prompt.split(`\n\n${WORKSPACE_FILES_HEADING}`)[0] ?? prompt, 160);
  const plans = calls(req.messages).filter((c) => c.name === 'submit_plan');
  const last = plans.at(-1);
  // A rejected plan is revised with the person's reasons (up to three times; see rejectedPlans).
  const rejections = rejectedPlans(plans, 'submit_plan');
  if (rejections.stop !== null) return { content: [text(`The plan was rejected (${rejections.stop}). I stop here rather than guess.`)], stopReason: 'end_turn' };
  if (!last || rejections.calls.includes(last)) {
    const feedback = rejections.reasons.length > 0 ? ` Revised after your feedback: ${rejections.reasons.join('; ')}.` : '';
    const tops = new Set(workspaceFilesOf(prompt).filter((f) => f.includes('/')).map((f) => f.split('/')[0] as string));
    const has = (agent: string): boolean => req.system.includes(`\`${agent}\``);
    const backend = BACKEND_DIRS.find((d) => tops.has(d));
    const frontend = FRONTEND_DIRS.find((d) => tops.has(d));
    const subtasks: Record<string, unknown>[] = [];
    const side = (id: string, agent: string, dir: string): void =>
      void subtasks.push({ id, agent, description: `${task} — the ${dir}/ side: change ${dir}/ test-first (a failing test, then the code that makes it pass).${feedback}`, file_locks: [`${dir}/**`], depends_on: [] });
    if (backend && has('backend-engineer')) side('backend', 'backend-engineer', backend);
    if (frontend && has('frontend-engineer')) side('frontend', 'frontend-engineer', frontend);
    if (subtasks.length === 0) side('change', has('backend-engineer') ? 'backend-engineer' : 'frontend-engineer', backend ?? frontend ?? 'src');
    const summary = `${task}.${feedback} ${subtasks.length > 1 ? `Two engineers work in parallel, each in its own part of the codebase (${subtasks.map((s) => (s.file_locks as string[])[0]).join(' and ')}).` : 'One engineer makes the change.'} Then the reviewer reviews it.`;
    // The plan itself is what the approval shows after these words (submit_plan's describe): not said twice.
    const why = subtasks.length > 1 ? 'I split the change by where it lives in the codebase, so that two engineers can work at once without touching the same files.' : 'The change fits one engineer.';
    return { content: [text(feedback ? `${why} This plan takes your feedback into account.` : why), call(req, turn, 'submit_plan', { summary, subtasks })], stopReason: 'tool_use' };
  }
  const result = last.result ?? '';
  let outcome: { status?: string; subtasks?: { id: string; status: string; summary: string | null }[]; review?: { verdict: string; summary: string; rounds: number } | null };
  try {
    outcome = JSON.parse(result) as typeof outcome;
  } catch {
    return { content: [text(`The plan could not run: ${cutText(result, 500)}`)], stopReason: 'end_turn' };
  }
  const parts = (outcome.subtasks ?? []).map((s) => `${s.id}: ${s.status}${s.summary ? ` — ${s.summary}` : ''}`);
  const review = outcome.review ? ` Review: ${outcome.review.verdict} after ${outcome.review.rounds} round(s) of changes — ${outcome.review.summary}` : '';
  return { content: [text(`${last.isError ? 'The change did not finish.' : 'The change is done.'} ${parts.join('; ')}.${review}`)], stopReason: 'end_turn' };
};

const camel = (id: string): string => id.replace(/[-_]+([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The subtask an engineer's brief names, its first lock's directory and the review issues (if this is a round of changes). */
function briefOf(brief: string): { id: string; dir: string; file: string | null; issues: { file: string; name: string }[]; description: string } {
  const id = /subtask '([^']+)'/.exec(brief)?.[1] ?? 'change';
  // The first lock, without the sentence's full stop when it is the last one.
  const lock = (/the only paths you may create, change or delete: ([^\s,]+)/.exec(brief)?.[1] ?? 'src/**').replace(/\.$/, '');
  // A lock on one file (no wildcard): that file is the one to change, in its directory.
  const file = isGlob(lock) ? null : lock;
  const dir = file ? path.posix.dirname(file) : lock.replace(/\/?\*.*$/, '') || '.';
  const issues = [...brief.matchAll(/^- \[\w+\] ([^:\s]+)(?::\d+)?: exported function `(\w+)` has no doc comment/gm)].map((m) => ({ file: m[1] ?? '', name: m[2] ?? '' }));
  const description = cutText(oneLine(/Your subtask: (.*)/.exec(brief)?.[1] ?? brief, 160).replace(/[^\p{L}\p{N} .,:;()/-]/gu, ''), 120);
  return { id, dir, file, issues, description };
}

/** An engineer, test-first: find a module, write a failing test, run it, implement, run the suite, report. */
const engineer: Play = (req, turn) => {
  const b = briefOf(firstPrompt(req.messages));
  const history = calls(req.messages);
  const tests = history.filter((c) => c.name === 'run_tests');
  const done = (what: string): ReturnType<Play> => {
    const last = tests.at(-1);
    const verdict = last ? (last.isError ? 'the tests still fail' : 'the tests pass') : 'no tests were run';
    return { content: [text(`${what} (${verdict}).`)], stopReason: 'end_turn' };
  };

  if (/asked for changes/.test(firstPrompt(req.messages))) {
    // A round of changes: add the doc comments the review asked for, then run the suite.
    const edits = history.filter((c) => c.name === 'edit_file');
    if (edits.length === 0 && b.issues.length > 0) {
      return {
        content: [
          text(`Adding the doc comment${b.issues.length > 1 ? 's' : ''} the review asked for.`),
          ...b.issues.map((i, n) => call(req, turn, 'edit_file', { path: i.file, old_string: `export function ${i.name}(`, new_string: `/** What subtask '${b.id}' added, in a sentence (written by the offline model). */\nexport function ${i.name}(` }, n)),
        ],
        stopReason: 'tool_use',
      };
    }
    if (tests.length === 0) return { content: [text('Running the suite after the changes.'), call(req, turn, 'run_tests', {})], stopReason: 'tool_use' };
    return done(edits.length > 0 ? `Addressed the review: added doc comments to ${b.issues.map((i) => i.name).join(', ')}` : 'The review named nothing I can change offline');
  }

  const globbed = history.find((c) => c.name === 'glob');
  if (!globbed) return { content: [text(`Looking at ${b.dir}/ first.`), call(req, turn, 'glob', { pattern: '*.ts', path: b.dir })], stopReason: 'tool_use' };
  // The glob's answer is a path per line, or a sentence when nothing matched ("no files match …").
  const listed = globbed.isError || !globbed.result || globbed.result.startsWith('no files match ') ? [] : globbed.result.split('\n');
  const sources = listed.filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !f.endsWith('.d.ts'));
  const target = b.file ?? sources[0] ?? `${b.dir}/${b.id}.ts`;
  const fn = `${camel(b.id)}ChangeNote`;
  const testPath = `${path.posix.dirname(target)}/${path.posix.basename(target, '.ts')}.${b.id}.test.ts`;
  const writes = history.filter((c) => c.name === 'write_file');
  // Test-first needs room for a test file: a lock on one file leaves none.
  const testFirst = b.file === null;
  const before = testFirst ? 1 : 0;
  if (testFirst && writes.length === 0) {
    const body = `import { ${fn} } from './${path.posix.basename(target)}';\n\ndescribe('${fn}', () => {\n  it('says what subtask ${b.id} changed', () => {\n    expect(${fn}()).toBe('${b.description}');\n  });\n});\n`;
    return { content: [text(`Test first: ${testPath} expects ${fn}() from ${target}.`), call(req, turn, 'write_file', { path: testPath, content: body })], stopReason: 'tool_use' };
  }
  if (testFirst && tests.length === 0) return { content: [text('Running the new test; it should fail, as nothing implements it yet.'), call(req, turn, 'run_tests', { path: testPath })], stopReason: 'tool_use' };
  const read = history.find((c) => c.name === 'read_file');
  if (!read && (b.file !== null || sources.length > 0)) return { content: [text(`Reading ${target} before changing it.`), call(req, turn, 'read_file', { path: target })], stopReason: 'tool_use' };
  if (writes.length === before) {
    const kept = read && !read.isError && read.result ? `${read.result.replace(/\s*$/, '')}\n\n` : '';
    const impl = `${kept}export function ${fn}(): string {\n  return '${b.description}';\n}\n`;
    return { content: [text(`${testFirst ? 'The test failed as expected; implementing' : 'Implementing'} ${fn} in ${target}.`), call(req, turn, 'write_file', { path: target, content: impl })], stopReason: 'tool_use' };
  }
  if (tests.length === before) return { content: [text('Running the whole suite.'), call(req, turn, 'run_tests', {})], stopReason: 'tool_use' };
  return done(testFirst ? `Added ${fn} to ${target}, test-first (${testPath})` : `Added ${fn} to ${target} (my lock is that one file: no room for a new test)`);
};

/** The reviewer: read every changed file, flag new exported functions without a doc comment and failing tests, record the verdict. */
const reviewer: Play = (req, turn) => {
  const brief = firstPrompt(req.messages);
  const history = calls(req.messages);
  const changed = (/Changed files \(read every one\): (.*)/.exec(brief)?.[1] ?? '').split(', ').filter((f) => f && f !== 'none');
  const reads = history.filter((c) => c.name === 'read_file');
  if (reads.length === 0 && changed.length > 0) {
    return { content: [text(`Reading the ${changed.length} changed file${changed.length === 1 ? '' : 's'}.`), ...changed.slice(0, 20).map((f, i) => call(req, turn, 'read_file', { path: f }, i))], stopReason: 'tool_use' };
  }
  const submitted = history.filter((c) => c.name === 'submit_review');
  if (submitted.length === 0) {
    const issues: { severity: string; file: string | null; line: number | null; message: string }[] = [];
    for (const r of reads) {
      if (r.isError || !r.result) continue;
      const lines = r.result.split('\n');
      lines.forEach((l, i) => {
        const m = /^export (?:async )?function (\w+)/.exec(l);
        const prev = lines.slice(0, i).reverse().find((x) => x.trim() !== '') ?? '';
        if (m && !prev.trim().endsWith('*/')) issues.push({ severity: 'minor', file: String(r.input.path), line: i + 1, message: `exported function \`${m[1]}\` has no doc comment` });
      });
    }
    for (const m of brief.matchAll(/^- ([\w-]+) \([^)]*\):.*tests: (\d+) passed, (\d+) failed/gm)) {
      if (Number(m[3]) > 0) issues.push({ severity: 'major', file: null, line: null, message: `subtask ${m[1]} ends with ${m[3]} failing test(s)` });
    }
    const verdict = issues.length > 0 ? 'request_changes' : 'approve';
    const summary = issues.length > 0 ? `${issues.length} issue(s) to address: ${issues.map((i) => i.message).join('; ')}` : `Read ${reads.length} changed file(s): each change is tested and documented.`;
    return { content: [text(`Verdict: ${verdict}.`), call(req, turn, 'submit_review', { verdict, issues, summary })], stopReason: 'tool_use' };
  }
  const last = submitted.at(-1);
  return { content: [text(last?.isError ? `My review could not be recorded: ${last.result ?? ''}` : `Review recorded: ${String(last?.input.verdict)}.`)], stopReason: 'end_turn' };
};

export const engineeringRoles: Record<string, Play> = {
  'engineering-lead': engineeringLead,
  'backend-engineer': engineer,
  'frontend-engineer': engineer,
  reviewer,
};
