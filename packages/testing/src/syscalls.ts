import { readFileSync } from 'node:fs';

/**
 * write(2)-family system calls made so far by the calling thread (Linux `/proc/thread-self/io`).
 * A socket write from JavaScript is made synchronously on the thread that runs it, so the
 * difference across a window counts the socket writes made in it.
 */
export function writeSyscalls(): number {
  const m = /syscw:\s*(\d+)/.exec(readFileSync('/proc/thread-self/io', 'utf8'));
  if (!m) throw new Error('/proc/thread-self/io has no syscw line');
  return Number(m[1]);
}
