import { isUtf8 } from 'node:buffer';
import path from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { cutText, lastText, looksBinary, normalPath, NUL_REPLACEMENT, REGENERATED_DIRS, type ToolResult, type ToolUseBlock } from '@baton/domain';
import { allTools, parseToolInput, restricts, writeRefusal, type SendEmailInput, type WritePolicy } from '@baton/agents';
import type { CorpusHit } from '@baton/storage';
import { MAX_SKIPPED_REPORTED, shellQuote, type CommandResult, type Sandbox } from '@baton/sandbox';
import { parseTestCounts, testRun } from './test-counts.ts';

export const MAX_RESULT_CHARS = 4000;
const MAX_MATCHES = 200;
const MAX_SEARCHED_FILE_BYTES = 1_000_000;

/** What a tool call may use besides its sandbox. */
export interface ToolEnv {
  sandbox: Sandbox;
  /** The agent's configured test command (run_tests without a command). */
  testCommand?: string | undefined;
  /** The offline web search (a full-text corpus); absent → web_search returns an error result. */
  search?: ((query: string, limit: number) => Promise<CorpusHit[]>) | undefined;
  signal?: AbortSignal | undefined;
  /** What the agent may change (scope and locks): a command's changes outside it are reverted. */
  policy?: WritePolicy | undefined;
  /**
   * The task's outbox (send_email): records the mail as EmailRequested and answers the tool result;
   * nothing is sent from the sandbox (docs/email.md). Absent: send_email is an error result.
   */
  outbox?: ((toolUseId: string, input: SendEmailInput) => Promise<{ content: string; isError?: boolean }>) | undefined;
}

type Input = Record<string, unknown>;
type Outcome = { content: string; isError?: boolean; files?: ToolResult['files']; tests?: ToolResult['tests'] };

/**
 * Run one tool call of a subagent. Never throws: an unknown or disallowed tool, invalid input
 * or a failing tool becomes an error result the model sees, and the loop goes on.
 */
export async function runTool(call: ToolUseBlock, allowed: readonly string[], env: ToolEnv): Promise<ToolResult> {
  const base = { toolUseId: call.id, toolName: call.name };
  const fail = (content: string): ToolResult => ({ ...base, content, isError: true });
  const def = allTools[call.name];
  if (!def || !allowed.includes(call.name)) return fail(`tool '${call.name}' is not available to this agent; available: ${allowed.join(', ')}`);
  const parsed = parseToolInput(def, call.input);
  if (!parsed.ok) return fail(parsed.error);
  const impl = impls[call.name];
  if (!impl) return fail(`tool '${call.name}' cannot run in the sandbox runner`);
  try {
    const out = await impl(parsed.value as Input, env, call.id);
    return { ...base, content: out.content, isError: out.isError ?? false, ...(out.files ? { files: out.files } : {}), ...(out.tests ? { tests: out.tests } : {}) };
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
}

const fileEffect = (effect: 'created' | 'modified', p: string): ToolResult['files'] => ({ created: effect === 'created' ? [p] : [], modified: effect === 'modified' ? [p] : [] });

const impls: Record<string, (input: Input, env: ToolEnv, toolUseId: string) => Promise<Outcome>> = {
  send_email: async (i, { outbox }, toolUseId) => (outbox ? outbox(toolUseId, i as SendEmailInput) : { content: 'send_email: the outbox is not available to this runner', isError: true }),
  write_file: async (i, { sandbox }) => {
    const p = normalPath(i.path as string);
    const content = i.content as string;
    const twin = await spelledOtherwise(sandbox, p);
    if (twin) throw new Error(`'${p}' is the existing '${twin}' written in another Unicode normalization (${p.normalize('NFC') === p ? 'NFC' : 'NFD'}): one name would be two files; write '${twin}'`);
    const effect = await sandbox.files.write(p, content);
    return { content: `${effect} ${p} (${Buffer.byteLength(content)} bytes)${nulNote(content)}`, files: fileEffect(effect, p) };
  },
  read_file: async (i, { sandbox }) => {
    const { bytes, size } = await sandbox.files.readBytes(i.path as string, MAX_READ_FILE_BYTES);
    const past = size > bytes.length ? `\n[the file is ${size} bytes: read_file reads its first ${MAX_READ_FILE_BYTES}]` : '';
    // Said first when the bytes are not text: shown as UTF-8, what is not reads as U+FFFD.
    const kind = looksBinary(bytes) ? '[a binary file (it has NUL bytes): shown as UTF-8 text, which it is not]\n' : !isUtf8(bytes.subarray(0, size > bytes.length ? bytes.length - 4 : bytes.length)) ? '[not UTF-8 text: each byte that is not shows as U+FFFD; edit_file refuses it]\n' : '';
    return { content: `${kind}${readWindow(bytes.toString('utf8'), i.offset as number | undefined, i.limit as number | undefined)}${past}` };
  },
  list_directory: async (i, { sandbox }) => ({ content: (await sandbox.files.list(i.path as string)).join('\n') || '(empty)' }),
  edit_file: async (i, { sandbox }) => {
    const p = normalPath(i.path as string);
    const count = await editFile(sandbox, p, i.old_string as string, i.new_string as string, i.replace_all as boolean);
    return { content: `edited ${p}: replaced ${count} occurrence${count === 1 ? '' : 's'}${nulNote(i.new_string as string)}`, files: fileEffect('modified', p) };
  },
  glob: async (i, { sandbox }) => {
    const { files, truncated } = await sandbox.files.walk(i.path as string);
    const pattern = i.pattern as string;
    const hits = files.filter((f) => path.posix.matchesGlob(f.path, pattern) || path.posix.matchesGlob(path.posix.basename(f.path), pattern)).map((f) => f.path);
    if (hits.length === 0) return { content: `no files match ${pattern}` };
    return { content: truncate(`${hits.join('\n')}${truncated ? '\n[the workspace has more files than were searched]' : ''}`) };
  },
  search_files: async (i, { sandbox }) => {
    let re: RegExp;
    try {
      re = new RegExp(i.pattern as string, i.ignore_case ? 'i' : '');
    } catch (err) {
      throw new Error(`invalid regular expression: ${(err as Error).message}`, { cause: err });
    }
    const { files } = await sandbox.files.walk(i.path as string);
    const only = i.glob as string | undefined;
    const lines: string[] = [];
    for (const f of files) {
      if (only && !path.posix.matchesGlob(f.path, only) && !path.posix.matchesGlob(path.posix.basename(f.path), only)) continue;
      if (f.size > MAX_SEARCHED_FILE_BYTES) continue;
      const { bytes } = await sandbox.files.readBytes(f.path, MAX_SEARCHED_FILE_BYTES);
      if (looksBinary(bytes)) continue;
      const text = bytes.toString('utf8').split('\n');
      for (let n = 0; n < text.length && lines.length < MAX_MATCHES; n++) {
        if (re.test(text[n] as string)) lines.push(`${f.path}:${n + 1}: ${(text[n] as string).slice(0, 300)}`);
      }
      if (lines.length >= MAX_MATCHES) break;
    }
    if (lines.length === 0) return { content: `no matches for /${i.pattern as string}/` };
    return { content: truncate(`${lines.join('\n')}${lines.length >= MAX_MATCHES ? `\n[stopped at ${MAX_MATCHES} matches]` : ''}`) };
  },
  run_command: async (i, env) => {
    const guard = await guardWrites(env);
    const r = await env.sandbox.run(i.command as string, { timeoutMs: (i.timeout_seconds as number) * 1000, ...(i.cwd ? { cwd: i.cwd as string } : {}), ...(env.signal ? { signal: env.signal } : {}) });
    const { files, reverted } = await guard.settle();
    return { content: `${formatCommand(r, i.timeout_seconds as number)}${reverted}`, isError: r.exitCode !== 0, files };
  },
  run_tests: async (i, env) => {
    const configured = (i.command as string | undefined) ?? env.testCommand;
    if (!configured) throw new Error('no test command: this agent has no test_command configured; pass one as `command`');
    const command = i.path ? `${configured} ${shellQuote(normalPath(i.path as string))}` : configured;
    try {
      const guard = await guardWrites(env);
      const r = await env.sandbox.run(command, { timeoutMs: (i.timeout_seconds as number) * 1000, ...(env.signal ? { signal: env.signal } : {}) });
      const { files, reverted } = await guard.settle();
      const run = testRun(parseTestCounts(`${r.stdout}\n${r.stderr}`), r);
      return { content: `${run.summary}\n$ ${command}\n${formatCommand(r, i.timeout_seconds as number)}${reverted}`, isError: !run.ok, files, tests: run.tests };
    } catch (err) {
      if (env.signal?.aborted) throw err;
      // Tests that could not be run did not pass: the run is recorded as failed (a change is not accepted on no verdict).
      return { content: `tests could not be run (counted as 1 failed): ${(err as Error).message}\n$ ${command}`, isError: true, tests: { passed: 0, failed: 1, skipped: 0 } };
    }
  },
  submit_review: async (i) => {
    const issues = i.issues as unknown[];
    return { content: `review recorded: ${i.verdict as string} with ${issues.length} issue${issues.length === 1 ? '' : 's'}` };
  },
  web_search: async (i, { search }) => {
    if (!search) throw new Error('web search is not available on this runner');
    const hits = await search(i.query as string, i.max_results as number);
    if (hits.length === 0) return { content: `no results for "${i.query as string}" in the offline corpus` };
    const body = hits.map((h, n) => `${n + 1}. ${h.title}\n   source: ${h.source}\n   ${h.snippet}`).join('\n\n');
    return { content: truncate(`Results for "${i.query as string}" (offline corpus):\n\n${body}`) };
  },
};

/**
 * What a written text holding ␀ is told: a NUL in a model's text is stored as ␀ (the log cannot
 * hold NUL), so the file has ␀ where the model may have meant NUL bytes (it was not told).
 */
function nulNote(text: string): string {
  if (!text.includes(NUL_REPLACEMENT)) return '';
  return `\n[baton: the text written holds ${NUL_REPLACEMENT} (U+2400): a NUL in a model's text is stored as ${NUL_REPLACEMENT}, since the log cannot hold NUL, so the file has ${NUL_REPLACEMENT} there; to write NUL bytes, use a command (printf '\\0')]`;
}

/** Directories a command's file changes are not reported for (dependency installs, caches, VCS internals): not walked at all. */
const UNREPORTED_DIRS: ReadonlySet<string> = new Set([...REGENERATED_DIRS, '.git', '.cache']);
const UNREPORTED = new RegExp(`(^|/)(${[...UNREPORTED_DIRS].map((d) => d.replace(/\./g, '\\.')).join('|')})/`);
/** Files a command's changes are checked among; past that, what was not seen is said to be unchecked. */
const MAX_GUARDED_FILES = 50_000;
const MAX_REPORTED_FILES = 200;
/** Changes a command made outside what the agent may change that its result names (the rest counted). */
const MAX_REVERTED_NAMED = 20;

/** Bytes of protected files kept before a command so its changes to them can be undone. */
const MAX_GUARDED_BYTES = 64 * 1024 * 1024;


/**
 * Watch a command's effect on the workspace: what it created or modified is reported (and kept
 * as artifacts like written files), and what it deleted (recorded as FileDeleted when the agent
 * completes: gone from the task's files); what it created, changed or deleted outside the agent's
 * policy (file scope and locks) is undone — created files removed, changed or deleted ones put
 * back — and the undoing is reported to the model.
 */
async function guardWrites(env: ToolEnv): Promise<{ settle(): Promise<{ files: NonNullable<ToolResult['files']>; reverted: string }> }> {
  const { sandbox, policy } = env;
  const before = await sandbox.files.walk('.', MAX_GUARDED_FILES, { skipDirs: UNREPORTED_DIRS });
  // Size, mode and change time: a chmod is a change (E2B's time is the modification time, which a chmod leaves).
  const stamp = (f: { size: number; mode: number; changedMs: number }): string => `${f.size}:${f.mode}:${f.changedMs}`;
  const seen = new Map(before.files.map((f) => [f.path, f]));
  const refusal = (p: string): string | null => (policy && restricts(policy) ? writeRefusal(policy, p) : null);
  const saved = new Map<string, { bytes: Buffer; mode: number }>();
  let budget = MAX_GUARDED_BYTES;
  for (const f of before.files) {
    if (UNREPORTED.test(f.path) || !refusal(f.path) || f.size > budget) continue;
    const { bytes, mode } = await sandbox.files.readBytes(f.path, f.size + 1);
    saved.set(f.path, { bytes, mode });
    budget -= bytes.length;
  }
  return {
    async settle() {
      const after = await sandbox.files.walk('.', MAX_GUARDED_FILES, { skipDirs: UNREPORTED_DIRS });
      const files = after.files;
      const now = new Set(files.map((f) => f.path));
      // A walk cut short saw only part of the workspace: a file one walk saw and the other did not is neither created nor deleted, only unchecked.
      const partial = before.truncated || after.truncated;
      const created: string[] = [];
      const modified: string[] = [];
      const deleted: string[] = [];
      const undone: string[] = [];
      /** Why the first undone change was refused (the rest share the agent's policy). */
      let reason: string | null = null;
      // Each change is undone on its own: one that cannot be (a directory or a link left where the
      // file was, removed first; anything else said) never stops the others being undone, or the
      // command's allowed changes being reported.
      // What a created file removed held, by its name and size: a file the command deleted inside
      // what it may change, with that name and size, was moved out (`mv src/a.ts lib/a.ts`) — it is
      // put back, not lost with the copy.
      const removedCopies = new Map<string, { path: string; bytes: Buffer; mode: number }>();
      const moveKey = (p: string, size: number): string => `${path.posix.basename(p)}\u0000${size}`;
      const undo = async (what: 'created' | 'modified' | 'deleted', p: string, why: string): Promise<void> => {
        reason ??= why;
        try {
          if (what === 'created') {
            const copy = await sandbox.files.readBytes(p, MAX_GUARDED_BYTES).catch(() => null);
            if (copy && copy.size === copy.bytes.length) removedCopies.set(moveKey(p, copy.size), { path: p, bytes: copy.bytes, mode: copy.mode });
            await sandbox.files.remove(p);
            undone.push(`created ${p} (removed)`);
            return;
          }
          const copy = saved.get(p);
          if (!copy) return void undone.push(`${what} ${p} (could not be restored: too large to keep a copy)`);
          await sandbox.files.write(p, copy.bytes, copy.mode).catch(async () => {
            await sandbox.files.remove(p); // what stands there now (a directory, a link), then the file again
            await sandbox.files.write(p, copy.bytes, copy.mode);
          });
          undone.push(`${what} ${p} (restored)`);
        } catch (err) {
          undone.push(`${what} ${p} (could not be ${what === 'created' ? 'removed' : 'restored'}: ${(err as Error).message})`);
        }
      };
      // The paths there were, by their composed spelling: a file made under another spelling of one is not kept.
      const spelled = new Map([...seen.keys()].map((p) => [p.normalize('NFC'), p]));
      for (const f of files) {
        if (UNREPORTED.test(f.path)) continue;
        const was = seen.get(f.path);
        if (was === undefined && partial) continue;
        const changed = was === undefined ? 'created' : stamp(was) !== stamp(f) ? 'modified' : null;
        if (!changed) continue;
        const twin = changed === 'created' ? spelled.get(f.path.normalize('NFC')) : undefined;
        const why = twin !== undefined && twin !== f.path ? `'${f.path}' is the existing '${twin}' in another Unicode normalization: one name would be two files` : refusal(f.path);
        if (why) await undo(changed, f.path, why);
        else (changed === 'created' ? created : modified).push(f.path);
      }
      for (const [p, was] of seen) {
        if (now.has(p) || partial || UNREPORTED.test(p)) continue;
        const why = refusal(p);
        if (why) {
          await undo('deleted', p, why);
          continue;
        }
        const movedKey = moveKey(p, was.size);
        const moved = removedCopies.get(movedKey);
        if (moved) {
          removedCopies.delete(movedKey);
          const back = await sandbox.files.write(p, moved.bytes, moved.mode).then(() => true, () => false);
          if (back) {
            undone.push(`moved ${p} to ${moved.path} (put back at ${p})`);
            continue;
          }
        }
        deleted.push(p);
      }
      const unchecked = partial ? `\n[the workspace has more than ${MAX_GUARDED_FILES} files besides dependencies: files created or deleted beyond those were not checked]` : '';
      // The first of them by name, the rest counted: one `python3 -m venv` had made a 68,000-character result, sent again with every later turn.
      const named = undone.slice(0, MAX_REVERTED_NAMED).join('; ') + (undone.length > MAX_REVERTED_NAMED ? `; and ${undone.length - MAX_REVERTED_NAMED} more` : '');
      const reverted = `${reason ? `\n[reverted: the command changed files outside what this agent may change (${reason}): ${named}]` : ''}${unchecked}`;
      const reported = { created: created.slice(0, MAX_REPORTED_FILES), modified: modified.slice(0, MAX_REPORTED_FILES), ...(deleted.length > 0 ? { deleted: deleted.sort().slice(0, MAX_REPORTED_FILES) } : {}) };
      // Past the files one command may report, the rest are not kept as the task's files: said, so the agent can act (fewer files, or one archive).
      const over = Object.entries({ created: created.length, modified: modified.length, deleted: deleted.length }).filter(([, n]) => n > MAX_REPORTED_FILES);
      const cut = over.length > 0 ? `\n[this command ${over.map(([what, n]) => `${what} ${n} files`).join(', ')}: only the first ${MAX_REPORTED_FILES} of each are recorded and kept as the task's files; the rest are not — make fewer files, or put them in one archive]` : '';
      // What the command made that a workspace cannot hold (a link, a name no path can carry) is said: it is not kept.
      const skippedBefore = new Set(before.skipped.map((e) => e.path));
      const made = after.skipped.filter((e) => !skippedBefore.has(e.path) && !UNREPORTED.test(`${e.path}/`));
      const unkept = made.length > 0 ? `\n[not kept as the task's files (never synced, listed or stored): ${made.map((e) => `${e.path} — ${e.why}`).join('; ')}${after.skipped.length >= MAX_SKIPPED_REPORTED ? '; and maybe more' : ''}]` : '';
      return { files: reported, reverted: `${reverted}${cut}${unkept}` };
    },
  };
}

/** One edit of a workspace file, as `edit_file` makes it (and a rebuilt workspace replays it): the whole file read, the text replaced, written back; the number of occurrences replaced. */
export async function editFile(sandbox: Sandbox, file: string, oldString: string, newString: string, all: boolean): Promise<number> {
  const { bytes, size } = await sandbox.files.readBytes(file);
  if (size > bytes.length) throw new Error(`${file} is too large to edit (${size} bytes)`);
  // Read as UTF-8, a file in another encoding would be written back with every byte it does not
  // fit changed to U+FFFD, the untouched ones too: refused, the file as it was.
  if (!isUtf8(bytes)) throw new Error(`${file} is not UTF-8 text: edit_file would change bytes it was not asked to; change it with a command (run_command) instead`);
  const next = applyEdit(bytes.toString('utf8'), oldString, newString, all, file);
  await sandbox.files.write(file, next.text);
  return next.count;
}

/** Replace old with new: exactly one occurrence unless all are asked for; the error says what was found. */
export function applyEdit(text: string, oldString: string, newString: string, all: boolean, file: string): { text: string; count: number } {
  const count = text.split(oldString).length - 1;
  if (count === 0) throw new Error(`old_string was not found in ${file}`);
  if (count > 1 && !all) throw new Error(`old_string occurs ${count} times in ${file}; give more context to make it unique, or set replace_all`);
  return { text: all ? text.split(oldString).join(newString) : text.replace(oldString, () => newString), count: all ? count : 1 };
}

/**
 * A command's outcome as the model reads it: exit code (or timeout), then its output — terminal
 * escape sequences (colours, cursor moves) left out, they are noise to a model — truncated with
 * the fact stated.
 */
export function formatCommand(r: CommandResult, timeoutSeconds: number): string {
  const head = r.timedOut ? `timed out after ${timeoutSeconds} s: the command was killed` : `exit code ${r.exitCode ?? 'none (killed by a signal)'}`;
  const first = `${head} (${(r.durationMs / 1000).toFixed(1)} s)`;
  const streams = ([['stdout', r.stdout, r.stdoutBytes], ['stderr', r.stderr, r.stderrBytes]] as const).filter(([, text]) => text !== '');
  // Each stream cut to its own share, in its middle (cut as one, a long stderr had crowded out the
  // end of stdout — a test summary — and its "bytes in all"); a stream gets what the other leaves.
  const room = MAX_RESULT_CHARS - first.length - streams.length * 120; // headers, truncation and byte-count notes
  const fair = Math.floor(room / Math.max(1, streams.length));
  const shareOf = (i: number): number => {
    const other = streams[1 - i]?.[1].length;
    return other !== undefined && other < fair ? room - other : fair;
  };
  return [first, ...streams.map(([name, text, bytes], i) => `--- ${name} ---\n${truncate(stripVTControlCharacters(text), shareOf(i))}${bytes > Buffer.byteLength(text) ? `\n[${bytes} bytes in all]` : ''}`)].join('\n');
}

/**
 * The existing path `p` would be another spelling of — the same name in another Unicode
 * normalization (`café` composed or decomposed), which shows as one name but is two files (two
 * artifacts, an archive no upload takes) — or null. Each component is compared in its directory.
 */
async function spelledOtherwise(sandbox: Sandbox, p: string): Promise<string | null> {
  if (p.normalize('NFC') === p && p.normalize('NFD') === p) return null; // nothing to spell another way
  const parts = p.split('/');
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] as string;
    const here = (await sandbox.files.list(parts.slice(0, i).join('/') || '.').catch(() => [] as string[])).map((n) => n.replace(/\/$/, ''));
    if (here.includes(part)) continue;
    const twin = here.find((n) => n.normalize('NFC') === part.normalize('NFC'));
    return twin ? [...parts.slice(0, i), twin, ...parts.slice(i + 1)].join('/') : null;
  }
  return null;
}

/** The most a read_file answer shows: lines, and characters (about 10,000 tokens). */
export const MAX_READ_LINES = 2000;
export const MAX_READ_CHARS = 40_000;
/** The most of one file read_file reads (its windows are within these bytes). */
const MAX_READ_FILE_BYTES = 20_000_000;

/**
 * What read_file shows of a file's text: all of it when it fits and no window was asked for;
 * else whole lines from `offset` (1-based), at most `limit` and MAX_READ_LINES of them and
 * MAX_READ_CHARS characters (a longer first line cut), followed by which lines these are and
 * where to read on. Pure.
 */
export function readWindow(text: string, offset?: number, limit?: number): string {
  if (offset === undefined && limit === undefined && text.length <= MAX_READ_CHARS && lineCountOf(text) <= MAX_READ_LINES) return text;
  const lines = text === '' ? [] : text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  const total = lines.length;
  const start = (offset ?? 1) - 1;
  if (start >= total) throw new Error(`offset ${offset} is past the end: the file has ${total} line${total === 1 ? '' : 's'}`);
  const most = Math.min(limit ?? MAX_READ_LINES, MAX_READ_LINES);
  let end = start;
  let chars = 0;
  while (end < total && end - start < most && chars + (lines[end]?.length ?? 0) + 1 <= MAX_READ_CHARS) chars += (lines[end++]?.length ?? 0) + 1;
  if (end === start) {
    const length = lines[start]?.length ?? 0;
    return `${cutText(lines[start] ?? '', MAX_READ_CHARS)}\n[read_file: line ${start + 1} of ${total}, its first ${MAX_READ_CHARS} characters of ${length} (the rest of it: run_command, e.g. cut -c${MAX_READ_CHARS + 1}-${MAX_READ_CHARS * 2})${start + 1 < total ? `; read on with offset ${start + 2}` : ''}]`;
  }
  const shown = lines.slice(start, end).join('\n');
  if (start === 0 && end === total) return `${shown}${text.endsWith('\n') ? '\n' : ''}`;
  return `${shown}\n[read_file: lines ${start + 1}–${end} of ${total}${end < total ? `; read on with offset ${end + 1}` : ''}]`;
}

const lineCountOf = (s: string): number => {
  let n = 0;
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) n++;
  return n;
};

/** At most `max` characters (4,000): the start and the end (where errors usually are), and the fact stated. */
export function truncate(s: string, max = MAX_RESULT_CHARS): string {
  if (s.length <= max) return s;
  const keepHead = Math.min(1000, Math.floor(max / 4));
  const note = `\n[output truncated: ${s.length} characters, showing the first ${keepHead} and the last ${max - keepHead}]\n`;
  return `${cutText(s, keepHead)}${note}${lastText(s, max - keepHead)}`;
}
