import type { ViteUserConfig } from 'vitest/config';

// Only a type is imported: inside a Baton sandbox vitest comes from a read-only toolchain on
// PATH, not from node_modules here, so nothing may import 'vitest' at run time. Tests use the
// globals (describe, it, expect), declared for the editor by tsconfig.json's "types".
export default {
  test: { globals: true },
} satisfies ViteUserConfig;
