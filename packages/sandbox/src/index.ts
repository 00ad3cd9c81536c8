export * from './provider.ts';
export { MAX_SKIPPED_REPORTED, Workspace, WorkspacePathError, type SkippedEntry, type WalkedFile } from './workspace.ts';
export { ADDRESS_SPACE_HEADROOM_MB, confinedArgv, findBwrap, runArgv, shellQuote } from './confine.ts';
export { detectToolchain, resolveToolchain, TOOLCHAIN_MOUNTS, type SandboxToolchain, type ToolchainOption } from './toolchain.ts';
export { DEFAULT_MAX_WORKSPACE_BYTES, LocalSandboxProvider, SandboxUnavailableError, sandboxUser, workspaceSizeProblem, type LocalProviderOptions } from './local.ts';
export { SandboxRegistry, type SandboxRow } from './registry.ts';
export { E2BSandboxProvider, type E2BProviderOptions } from './e2b.ts';
