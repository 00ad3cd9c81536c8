export * from './provider.ts';
export { Workspace, WorkspacePathError, type WalkedFile } from './workspace.ts';
export { confinedArgv, findBwrap, runArgv } from './confine.ts';
export { LocalSandboxProvider, SandboxUnavailableError, sandboxUser, type LocalProviderOptions } from './local.ts';
export { SandboxRegistry, type SandboxRow } from './registry.ts';
export { E2BSandboxProvider, type E2BProviderOptions } from './e2b.ts';
