import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Template } from 'e2b';
import { describe, expect, it } from 'vitest';
import { batonTemplate } from './e2b-template.ts';
import { TOOLCHAIN_PACKAGES } from './toolchain.ts';

const repo = path.resolve(import.meta.dirname, '../../..');

describe('the E2B template', () => {
  it('has what the agents need, and the workspace the provider uses', () => {
    const dockerfile = Template.toDockerfile(batonTemplate());
    expect(dockerfile).toMatch(/^FROM node:24/);
    expect(dockerfile).toMatch(/apt-get install -y .*git ripgrep python3/);
    expect(dockerfile).toMatch(/WORKDIR \/home\/user\/workspace/);
    expect(dockerfile).not.toMatch(/API_KEY/);
  });

  it('installs the toolchain local sandboxes lend, at the repository\'s versions — as does the runner\'s image', () => {
    const { devDependencies: dev, packageManager } = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { devDependencies: Record<string, string>; packageManager: string };
    expect(TOOLCHAIN_PACKAGES).toEqual([`vitest@${dev.vitest}`, `typescript@${dev.typescript}`]);
    // pnpm too: the repository's (the template had a floating pnpm@10 beside the repository's 11).
    expect(Template.toDockerfile(batonTemplate())).toContain(`RUN npm install -g ${packageManager} ${TOOLCHAIN_PACKAGES.join(' ')}`);
    const image = readFileSync(path.join(repo, 'infra/docker/Dockerfile'), 'utf8');
    expect(image).toContain(`npm install --global ${packageManager}`);
    expect(image).toContain(`npm install --prefix /opt/baton/toolchain --no-fund --no-audit ${TOOLCHAIN_PACKAGES.join(' ')}`);
    expect(image).toContain('SANDBOX_TOOLCHAIN_NODE_MODULES=/opt/baton/toolchain/node_modules');
  });
});
