/**
 * Wait for a condition, polling, with a timeout: tests wait for facts, never for luck.
 * Returns the first truthy value of `check`.
 */
export async function waitFor<T>(check: () => T | Promise<T>, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}${why}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 20));
  }
}
