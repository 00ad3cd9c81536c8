/**
 * The one text rule: Postgres jsonb refuses the NUL character (U+0000), and a lone (unpaired)
 * UTF-16 surrogate is not text at all. Outside input carrying either is refused (textProblems
 * names where); text the system produces itself (model output, tool results) is cleaned instead
 * (cleanText).
 */

export type TextProblem = { path: string; problem: 'nul' | 'lone_surrogate' };

/** What replaces a NUL: U+2400 SYMBOL FOR NULL (visible, and storable). */
export const NUL_REPLACEMENT = '\u2400';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const join = (path: string, key: string | number): string => (path === '' ? String(key) : `${path}.${key}`);

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
};

function stringProblems(s: string, path: string, out: TextProblem[]): void {
  if (s.includes('\u0000')) out.push({ path, problem: 'nul' });
  if (!s.isWellFormed()) out.push({ path, problem: 'lone_surrogate' });
}

/**
 * Every string in `value` (array items, object values and keys, at any depth) holding a NUL or a
 * lone surrogate, by dotted path (`prompt`, `input.subtasks.0.title`; a bad key is named by the
 * key cleaned). Walks with a stack of its own, so any depth JSON.parse accepts is fine.
 */
export function textProblems(value: unknown, path = ''): TextProblem[] {
  const out: TextProblem[] = [];
  // [value, its path, the key it is under (checked in document order, before the value)]
  const stack: [unknown, string, string | null][] = [[value, path, null]];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const [v, p, key] = item;
    if (key !== null) stringProblems(key, p, out);
    if (typeof v === 'string') stringProblems(v, p, out);
    else if (Array.isArray(v)) for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], join(p, i), null]);
    else if (isPlainObject(v)) for (const [k, child] of Object.entries(v).reverse()) stack.push([child, join(p, cleanString(k).value), k]);
  }
  return out;
}

function cleanString(s: string): { value: string; replaced: number } {
  let replaced = 0;
  let value = s;
  if (value.includes('\u0000')) {
    value = value.replaceAll('\u0000', () => {
      replaced++;
      return NUL_REPLACEMENT;
    });
  }
  if (!value.isWellFormed()) {
    value = value.replace(LONE_SURROGATE, () => {
      replaced++;
      return '\ufffd';
    });
  }
  return { value, replaced };
}

/**
 * `value` with every NUL replaced by ␀ (U+2400) and every lone surrogate by U+FFFD (the
 * replacement character), in strings at any depth (object keys too), and how many were
 * replaced. Parts with nothing to replace are returned as they are (the same objects).
 */
export function cleanText<T>(value: T): { value: T; replaced: number } {
  if (typeof value === 'string') return cleanString(value) as { value: T; replaced: number };
  let replaced = 0;
  if (Array.isArray(value)) {
    const items = value.map((item: unknown) => {
      const c = cleanText(item);
      replaced += c.replaced;
      return c.value;
    });
    return { value: (replaced > 0 ? items : value) as T, replaced };
  }
  if (isPlainObject(value)) {
    const entries = Object.entries(value).map(([k, v]) => {
      const ck = cleanString(k);
      const cv = cleanText(v);
      replaced += ck.replaced + cv.replaced;
      return [ck.value, cv.value] as const;
    });
    return { value: (replaced > 0 ? Object.fromEntries(entries) : value) as T, replaced };
  }
  return { value, replaced: 0 };
}

/**
 * The one rule for the characters of a workspace path (an upload's entries, an agent's tool
 * paths, the names a sandbox walk keeps): why a path cannot be taken, or null. A path is shown as
 * one line — to agents in the lead's listing, to people in diffs and lists — so no control
 * character, C0 or C1, nor U+2028/U+2029 (a line break could pass for more lines); no backslash
 * (a separator elsewhere, a character of the name here: it would name another file than it seems
 * to); no bidirectional control or mark (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C: a
 * name that displays as another); no character that shows as nothing (U+00AD soft hyphen, U+034F,
 * the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, U+17B4–U+17B5, U+180B–U+180F, U+200B zero
 * width space, U+2060–U+206F word joiner, invisible operators and deprecated format characters,
 * U+FEFF, the tags U+E0000–U+E007F: `a\u200bpi.ts` shows as `api.ts` and is another file). The
 * joiners U+200C/U+200D and the variation selectors U+FE00–U+FE0F are allowed: scripts (Persian,
 * Indic) and emoji need them in names.
 */
export function pathCharacterProblem(p: string): string | null {
  if (p.includes('\0')) return 'the path contains a NUL byte';
  // eslint-disable-next-line no-control-regex -- the point: C0 controls, DEL, C1 controls (NEL among them) and the line and paragraph separators
  const control = /[\u0001-\u001f\u007f-\u009f\u2028\u2029]/.exec(p)?.[0];
  if (control) return `the path contains a control character (U+${codePoint(control)}${control === '\n' ? ', a line break' : control === '\t' ? ', a tab' : ''})`;
  if (p.includes('\\')) return "the path contains a backslash (directories are separated by '/')";
  const bidi = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/.exec(p)?.[0];
  if (bidi) return `the path contains a bidirectional control character (U+${codePoint(bidi)}: the name would display as another)`;
  // eslint-disable-next-line no-misleading-character-class -- the point: U+034F and the Mongolian selectors are combining marks, each refused on its own
  const invisible = /[\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u2060-\u206f\u3164\ufeff\uffa0\u{e0000}-\u{e007f}]/u.exec(p)?.[0];
  if (invisible) return `the path contains an invisible character (U+${codePoint(invisible)}: the name would display as another)`;
  // What a name that is not UTF-8 reads as (each byte that is not becomes U+FFFD): kept so, it
  // would be another name, one no later read could find.
  if (p.includes('\ufffd')) return 'the path is not UTF-8 (or holds U+FFFD, which a byte that is not UTF-8 reads as): it would be kept under another name';
  return null;
}

const codePoint = (c: string): string => (c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');

/**
 * The first `max` UTF-16 units of `text`, never ending in half a character: a cut through a
 * surrogate pair (an emoji, a rare CJK character) drops that half. A lone half cannot be stored —
 * Postgres refuses it in JSON (a 500, a step retried until the run failed) — and shows as �
 * anywhere else. Every cut of text that is kept or shown goes through here. Pure.
 */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/** The last `max` UTF-16 units of `text`, never starting with half a character (as `cutText`). Pure. */
export function lastText(text: string, max: number): string {
  if (text.length <= max) return text;
  const from = text.length - max;
  const code = text.charCodeAt(from);
  return text.slice(code >= 0xdc00 && code <= 0xdfff ? from + 1 : from);
}

/** The start of a text, at most `max` characters, cut at a line's end when one is near (a mail's report, the console's), never through a character. Pure. */
export function excerpt(text: string, max: number): string {
  if (text.length <= max) return text;
  const line = text.lastIndexOf('\n', max);
  return cutText(text, line > max * 0.8 ? line : max);
}

/** Text on one line (every run of white space, line breaks too, one space), cut at `max` characters with `…`. */
export function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${cutText(line, max - 1)}…` : line;
}

/** The most of one agent's summary another agent's brief or result carries (the rest is on the agent: GET /v1/tasks/:id/agents/:agentId). */
export const BRIEF_SUMMARY_MAX = 4000;

/**
 * An agent's summary as another agent is told it: whole up to `max` characters, else its start and
 * how much was left out (twenty engineers' 30,000-character answers made a reviewer's request of
 * 600 KB, past a model's context). Pure.
 */
export function briefSummary(text: string, max = BRIEF_SUMMARY_MAX): string {
  if (text.length <= max) return text;
  const kept = cutText(text, max);
  return `${kept}
[… ${text.length - kept.length} more characters of this summary left out]`;
}

/** A byte count in words: `10 MiB`, `1.3 GiB`, `512 bytes` (binary units; whole numbers shown whole). Pure. */
export function formatBytes(n: number): string {
  for (const [unit, size] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (n < size) continue;
    const v = n / size;
    return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
  }
  return `${n} bytes`;
}

/** Binary by git's own test: a NUL byte in the first 8000 bytes (the diff, the media type, read_file and search_files all ask it). Pure. */
export const looksBinary = (b: Uint8Array): boolean => b.subarray(0, 8000).includes(0);

/**
 * Directories tools make again from a workspace's sources — dependency installs and caches
 * (`node_modules`, a Python virtualenv, bytecode and test/linter caches): not uploaded by the CLI,
 * not copied to Postgres with a workspace, not reported or guarded as an agent's changes (a
 * `pytest` run had every agent's result end with `.pytest_cache` reverted, and a venv thousands
 * of reverted files long).
 */
export const REGENERATED_DIRS: readonly string[] = ['node_modules', '__pycache__', '.pytest_cache', '.mypy_cache', '.ruff_cache', '.venv'];

/**
 * Whether a URL in text an agent or model wrote may be a link a person clicks (mails, mail pages,
 * the console): absolute http(s) and mailto only. `smb:` hands a Windows reader's credentials to
 * the server it names, `search-ms:` and `intent:` open local programs, `//host` and relative
 * paths point wherever the page happens to be: those stay text.
 */
export const linkableUrl = (url: string): boolean => /^(https?:\/\/[^/\\\s]|mailto:)/i.test(url.trim());
