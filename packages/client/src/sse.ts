/** One server-sent event: its `event` (default `message`), its `data` lines joined, its `id`. */
export interface SseFrame {
  event: string;
  data: string;
  id: string | null;
}

/** Parse one frame (the text between two blank lines); comment lines (heartbeats) are skipped. */
export function parseFrame(block: string): SseFrame {
  let event = 'message';
  let id: string | null = null;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':') || line === '') continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'event') event = v;
    else if (field === 'data') data.push(v);
    else if (field === 'id') id = v;
  }
  return { event, data: data.join('\n'), id };
}

/**
 * Read a text/event-stream body frame by frame until it ends (works in browsers and Node); an
 * async `onFrame` is awaited before the next frame. `onBytes`: called as anything arrives
 * (a heartbeat too), for a reader that watches for silence.
 */
export async function readSse(body: ReadableStream<Uint8Array>, onFrame: (f: SseFrame) => unknown, onBytes?: () => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onBytes?.();
      buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        await onFrame(parseFrame(block));
      }
    }
  } catch (err) {
    // Given up here (the handler threw, the stream broke): the connection is closed, not left open
    // for the gateway to count against the tenant's streams until the process ends.
    await reader.cancel(err).catch(() => {});
    throw err;
  }
}
