import { readFileSync } from 'node:fs';
import { Template } from 'e2b';
import { TOOLCHAIN_PACKAGES } from './toolchain.ts';

/** The repository's pnpm (its `packageManager`), as the runner's image installs it: agents get the one the project is built with. */
const PNPM = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { packageManager: string }).packageManager;

/**
 * The E2B template Baton's agents run in (`baton-agent`): Node 24 (the major the runner's image
 * runs) with what the built-in tools
 * use (bash, git, ripgrep, python3 for tests), a non-root `user` and the workspace directory.
 * The toolchain local sandboxes lend read-only (vitest, TypeScript, at the repository's
 * versions) is installed globally, so `node` and `vitest` are on PATH here too and a test
 * command such as `vitest run` works the same. No keys are baked in; an agent gets only the
 * variables its config names.
 */
export function batonTemplate() {
  return Template()
    .fromNodeImage('24')
    .aptInstall(['git', 'ripgrep', 'python3', 'python3-pip', 'curl', 'ca-certificates'])
    .runCmd('mkdir -p /home/user/workspace && chown -R 1000:1000 /home/user/workspace || true')
    .setWorkdir('/home/user/workspace')
    .npmInstall([PNPM, ...TOOLCHAIN_PACKAGES], { g: true })
    .setEnvs({ NODE_ENV: 'development' });
}

/** Build and publish the template with E2B (needs E2B_API_KEY and network): `infra/e2b/build`. */
export async function buildTemplate(name = 'baton-agent'): Promise<void> {
  await Template.build(batonTemplate(), name, { cpuCount: 2, memoryMB: 2048, onBuildLogs: (log) => console.log(String(log)) });
}

if (import.meta.main) {
  if (process.argv.includes('--dockerfile')) console.log(Template.toDockerfile(batonTemplate()));
  else await buildTemplate(process.argv[2]);
}
