import type { Stats } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { E2B_WORKSPACE } from './e2b.ts';
import { resolveToolchain, toolchainPath, type SandboxToolchain, type ToolchainOption } from './toolchain.ts';

/**
 * A fake of E2B for tests, on loopback: the control plane (create, connect, pause, kill) and
 * envd (files over HTTP, filesystem and process RPCs in the Connect protocol's JSON form), each
 * sandbox backed by a host directory. Commands run unconfined with bash — it is a fake of
 * E2B's API, not of its isolation — with the toolchain first on PATH, as the template has
 * Node and vitest on PATH (default: this runner's own, `detectToolchain`). Every
 * control-plane call is recorded.
 */
export class FakeE2B {
  readonly calls: { method: string; path: string; body: unknown; apiKey: string | undefined }[] = [];
  readonly sandboxes = new Map<string, { state: 'running' | 'paused'; dir: string; envs: Record<string, string>; metadata: Record<string, string>; startedAt: string }>();
  /** Commands running, by pid: as in envd, a command outlives its stream (a client gone away does not stop it); SendSignal does. */
  readonly processes = new Map<number, ChildProcess>();
  url = '';
  private server: Server | null = null;
  private root = '';
  private next = 1;
  private readonly toolchain: SandboxToolchain;

  constructor(opts: { toolchain?: ToolchainOption } = {}) {
    this.toolchain = resolveToolchain(opts.toolchain);
  }

  async start(): Promise<this> {
    this.root = await mkdtemp(path.join(tmpdir(), 'fake-e2b-'));
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 'internal', message: err.message }));
      });
    });
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    await rm(this.root, { recursive: true, force: true });
  }

  /** Forget a sandbox as if E2B had dropped it. */
  lose(id: string): void {
    this.sandboxes.delete(id);
  }

  private readonly faults: { method: string; path: RegExp; status: number; left: number }[] = [];
  /** Answer the next `times` requests of `method` to a path matching `path` with `status` instead (E2B failing: a 500, a 401, a 404). */
  fail(method: string, path: RegExp, status: number, times = 1): void {
    this.faults.push({ method, path, status, left: times });
  }

  private lostCreates = 0;
  /** The next `times` creates make their sandbox, then answer 502 (the answer lost on the way: E2B has a sandbox its caller never learnt of). */
  loseCreateAnswers(times = 1): void {
    this.lostCreates += times;
  }

  /** E2B well again: the faults not yet answered are dropped. */
  clearFaults(): void {
    this.faults.length = 0;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', this.url);
    const json = (status: number, data: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(data));
    const info = (id: string) => ({ sandboxID: id, templateID: 'baton-agent', clientID: 'fake', envdVersion: '0.2.0', envdAccessToken: 'tok' });
    const fault = this.faults.find((f) => f.left > 0 && f.method === req.method && f.path.test(url.pathname));
    if (fault) {
      fault.left--;
      return json(fault.status, { code: fault.status, message: `injected fault ${fault.status}` });
    }
    let m: RegExpExecArray | null;

    // Control plane.
    const control = (): void => {
      const isJson = (req.headers['content-type'] ?? '').includes('application/json');
      this.calls.push({ method: req.method ?? '', path: url.pathname, body: raw.length && isJson ? JSON.parse(raw.toString()) : null, apiKey: req.headers['x-api-key'] as string | undefined });
    };
    if (req.method === 'POST' && url.pathname === '/v2/sandboxes') {
      control();
      const body = JSON.parse(raw.toString()) as { envVars?: Record<string, string>; metadata?: Record<string, string> };
      const id = `sbx${this.next++}`;
      const dir = path.join(this.root, id);
      await mkdir(dir, { recursive: true });
      this.sandboxes.set(id, { state: 'running', dir, envs: body.envVars ?? {}, metadata: body.metadata ?? {}, startedAt: new Date().toISOString() });
      if (this.lostCreates > 0) {
        this.lostCreates--;
        return json(502, { code: 502, message: 'bad gateway (the answer lost)' });
      }
      return json(201, info(id));
    }
    if (req.method === 'GET' && url.pathname === '/v2/sandboxes') {
      // E2B's list: running and paused unless `state` says; `metadata` an encoded `k=v&…` (all must match); paged by `limit` and `x-next-token`.
      control();
      const wanted = [...new URLSearchParams(url.searchParams.get('metadata') ?? '')];
      const states = url.searchParams.getAll('state');
      const all = [...this.sandboxes]
        .filter(([, s]) => (states.length ? states.includes(s.state) : true) && wanted.every(([k, v]) => s.metadata[k] === v))
        .map(([id, s]) => ({ ...info(id), startedAt: s.startedAt, endAt: s.startedAt, cpuCount: 2, memoryMB: 512, metadata: s.metadata, state: s.state }));
      const from = Number(url.searchParams.get('nextToken') ?? 0);
      const limit = Number(url.searchParams.get('limit') ?? 100);
      const page = all.slice(from, from + limit);
      const next = from + limit < all.length ? { 'x-next-token': String(from + limit) } : {};
      return void res.writeHead(200, { 'content-type': 'application/json', ...next }).end(JSON.stringify(page));
    }
    if (req.method === 'POST' && (m = /^\/v2\/sandboxes\/([^/]+)\/connect$/.exec(url.pathname))) {
      control();
      const s = this.sandboxes.get(m[1] as string);
      if (!s) return json(404, { code: 404, message: `sandbox ${m[1]} not found` });
      s.state = 'running';
      return json(200, info(m[1] as string));
    }
    if (req.method === 'POST' && (m = /^\/sandboxes\/([^/]+)\/pause$/.exec(url.pathname))) {
      control();
      const s = this.sandboxes.get(m[1] as string);
      if (!s) return json(404, { code: 404, message: 'not found' });
      s.state = 'paused';
      return void res.writeHead(204).end();
    }
    if (req.method === 'POST' && (m = /^\/sandboxes\/([^/]+)\/timeout$/.exec(url.pathname))) {
      control();
      if (!this.sandboxes.has(m[1] as string)) return json(404, { code: 404, message: 'not found' });
      return void res.writeHead(204).end();
    }
    if (req.method === 'DELETE' && (m = /^\/sandboxes\/([^/]+)$/.exec(url.pathname))) {
      control();
      // As E2B: a sandbox it does not have is a 404 (the SDK's kill says false).
      const s = this.sandboxes.get(m[1] as string);
      if (!s) return json(404, { code: 404, message: `sandbox ${m[1]} not found` });
      this.sandboxes.delete(m[1] as string);
      await rm(s.dir, { recursive: true, force: true });
      return void res.writeHead(204).end();
    }

    // envd: which sandbox is named by a header; it must be running.
    const id = req.headers['e2b-sandbox-id'] as string | undefined;
    const sbx = id ? this.sandboxes.get(id) : undefined;
    if (!sbx || sbx.state !== 'running') return json(502, { code: 'unavailable', message: `sandbox ${id} is not running` });
    const host = (p: string): string => {
      const rel = path.posix.relative(E2B_WORKSPACE, p);
      if (rel.startsWith('..')) throw new Error(`fake envd only serves ${E2B_WORKSPACE}`);
      return path.join(sbx.dir, rel);
    };
    if (url.pathname === '/files' && req.method === 'GET') {
      const data = await readFile(host(url.searchParams.get('path') ?? '')).catch(() => null);
      if (!data) return json(404, { code: 404, message: 'file not found' });
      return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length }).end(data);
    }
    if (url.pathname === '/files' && req.method === 'POST') {
      const form = await new Request(url, { method: 'POST', headers: req.headers as Record<string, string>, body: raw }).formData();
      const target = url.searchParams.get('path') ?? '';
      const out = [];
      for (const [, v] of form.entries()) {
        const file = v as File;
        const p = host(target);
        await mkdir(path.dirname(p), { recursive: true });
        await writeFile(p, Buffer.from(await file.arrayBuffer()));
        out.push({ name: path.basename(target), type: 'file', path: target });
      }
      return json(200, out);
    }
    const rpcError = (status: number, code: string, message: string): void => json(status, { code, message });
    if (url.pathname === '/filesystem.Filesystem/Stat') {
      const { path: p } = JSON.parse(raw.toString()) as { path: string };
      const st = await stat(host(p)).catch(() => null);
      if (!st) return rpcError(404, 'not_found', `${p} not found`);
      return json(200, { entry: entryOf(p, st) });
    }
    if (url.pathname === '/filesystem.Filesystem/Remove') {
      // envd: os.RemoveAll, so a missing path is fine.
      const { path: p } = JSON.parse(raw.toString()) as { path: string };
      await rm(host(p), { recursive: true, force: true });
      return json(200, {});
    }
    if (url.pathname === '/filesystem.Filesystem/ListDir') {
      const { path: p, depth = 1 } = JSON.parse(raw.toString()) as { path: string; depth?: number };
      const entries: unknown[] = [];
      const walk = async (dir: string, level: number): Promise<void> => {
        for (const name of (await readdir(host(dir)).catch(() => [])).sort()) {
          const child = path.posix.join(dir, name);
          const st = await stat(host(child));
          entries.push(entryOf(child, st));
          if (st.isDirectory() && level < depth) await walk(child, level + 1);
        }
      };
      await walk(p, 1);
      return json(200, { entries });
    }
    if (url.pathname === '/process.Process/Start') {
      const body = JSON.parse(raw.subarray(5).toString()) as { process: { cmd: string; args: string[]; cwd?: string; envs?: Record<string, string> } };
      res.writeHead(200, { 'content-type': 'application/connect+json' });
      const frame = (flags: number, msg: unknown): void => {
        const payload = Buffer.from(JSON.stringify(msg));
        const head = Buffer.alloc(5);
        head.writeUInt8(flags, 0);
        head.writeUInt32BE(payload.length, 1);
        res.write(Buffer.concat([head, payload]));
      };
      const child = spawn(body.process.cmd, body.process.args.filter((a) => a !== '-l'), {
        cwd: body.process.cwd ? host(body.process.cwd) : sbx.dir,
        env: { PATH: [...toolchainPath(this.toolchain), process.env.PATH ?? '/usr/bin:/bin'].join(':'), HOME: sbx.dir, ...sbx.envs, ...body.process.envs },
      });
      const pid = child.pid ?? 1;
      this.processes.set(pid, child);
      frame(0, { event: { start: { pid } } });
      child.stdout.on('data', (d: Buffer) => frame(0, { event: { data: { stdout: d.toString('base64') } } }));
      child.stderr.on('data', (d: Buffer) => frame(0, { event: { data: { stderr: d.toString('base64') } } }));
      child.on('close', (code) => {
        this.processes.delete(pid);
        if (res.destroyed) return;
        frame(0, { event: { end: { exitCode: code ?? -1, exited: code !== null, status: `exit status ${code}` } } });
        frame(2, {});
        res.end();
      });
      return;
    }
    if (url.pathname === '/process.Process/SendSignal') {
      const body = JSON.parse(raw.toString()) as { process?: { pid?: number }; signal?: string };
      const child = body.process?.pid !== undefined ? this.processes.get(body.process.pid) : undefined;
      if (!child) return rpcError(404, 'not_found', `process ${body.process?.pid} not found`);
      child.kill(body.signal === 'SIGNAL_SIGTERM' ? 'SIGTERM' : 'SIGKILL');
      return json(200, {});
    }
    return json(404, { code: 404, message: `fake e2b: no route ${req.method} ${url.pathname}` });
  }
}

function entryOf(p: string, st: Stats) {
  const t = Math.floor(st.mtimeMs / 1000);
  return { name: path.posix.basename(p), type: st.isDirectory() ? 2 : 1, path: p, size: String(st.size), mode: st.mode & 0o777, permissions: '', owner: 'user', group: 'user', modifiedTime: new Date(t * 1000).toISOString() };
}
