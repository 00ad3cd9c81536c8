import { stripVTControlCharacters } from 'node:util';

/**
 * Text for a terminal: what the gateway sends (a model's words above all) is shown as text, never
 * acted on — escape sequences (colours, a new window title, a cleared screen, a moved cursor)
 * left out, any other control character but a tab or a line end shown as U+FFFD, and a carriage
 * return that would write over the line it ends as well, and the bidirectional embeddings,
 * overrides and isolates (U+202A–U+202E, U+2066–U+2069), which would show the text after them
 * reversed (`file.txt` from `txt.exe`). Right-to-left scripts need none of them. Pure.
 */
export function terminalSafe(text: string): string {
  // eslint-disable-next-line no-control-regex -- the point: the control characters a terminal acts on
  return stripVTControlCharacters(text).replace(/\r(?!\n)|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, '\uFFFD');
}

/** console.log and console.error through terminalSafe, for the CLI's process (files it writes byte for byte go to stdout directly). */
export function safeConsole(): void {
  for (const name of ['log', 'error'] as const) {
    const write = console[name].bind(console);
    console[name] = (...args: unknown[]) => write(...args.map((a) => (typeof a === 'string' ? terminalSafe(a) : a)));
  }
}
