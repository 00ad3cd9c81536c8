import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

/** One tar entry: a header (name, type, mode, linkname, …) and, for files, its content. */
export type TarEntry = Partial<Header> & { name: string; content?: string | Buffer };

/** A tar made by tar-stream's packer (the library Baton reads uploads with), entries in the given order. */
export async function tarOf(entries: readonly TarEntry[]): Promise<Buffer> {
  const p = pack();
  const out: Buffer[] = [];
  p.on('data', (c: unknown) => void out.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    p.on('end', () => resolve());
    p.on('error', reject);
  });
  for (const { content, ...header } of entries) {
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (content === undefined) p.entry(header, cb);
      else p.entry(header, content, cb);
    });
  }
  p.finalize();
  await ended;
  return Buffer.concat(out);
}

/** The same, gzipped: what a workspace upload is. */
export async function tarGz(entries: readonly TarEntry[]): Promise<Buffer> {
  return gzipSync(await tarOf(entries));
}
