import { Template } from 'e2b';
import { describe, expect, it } from 'vitest';
import { batonTemplate } from './e2b-template.ts';

describe('the E2B template', () => {
  it('has what the agents need, and the workspace the provider uses', () => {
    const dockerfile = Template.toDockerfile(batonTemplate());
    expect(dockerfile).toMatch(/^FROM node:24/);
    expect(dockerfile).toMatch(/apt-get install -y .*git ripgrep python3/);
    expect(dockerfile).toMatch(/WORKDIR \/home\/user\/workspace/);
    expect(dockerfile).not.toMatch(/API_KEY/);
  });
});
