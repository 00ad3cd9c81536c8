import { defineConfig } from 'vitest/config';

// Unit tests (*.test.ts) need nothing; integration (*.int.test.ts) and end-to-end
// (*.e2e.test.ts) tests talk to real Postgres and NATS found by packages/testing's global setup.
export default defineConfig({
  test: {
    reporters: ['default', './packages/testing/src/reporter.ts'],
    hookTimeout: 60_000,
    testTimeout: 60_000,
    projects: [
      {
        test: {
          name: 'unit',
          // Services started by tests take a free ops port (the defaults would collide between test files).
          env: { OPS_PORT: '0' },
          sequence: { groupOrder: 0 },
          include: ['packages/*/src/**/*.test.ts', 'packages/console/src/**/*.test.tsx', 'services/*/src/**/*.test.ts'],
          exclude: ['**/*.int.test.ts', '**/*.e2e.test.ts', '**/node_modules/**'],
        },
      },
      {
        test: {
          name: 'int',
          env: { OPS_PORT: '0' },
          sequence: { groupOrder: 1 },
          include: ['packages/*/src/**/*.int.test.ts', 'services/*/src/**/*.int.test.ts', 'packages/*/src/**/*.e2e.test.ts', 'services/*/src/**/*.e2e.test.ts'],
          globalSetup: ['./packages/testing/src/global-setup.ts'],
          hookTimeout: 60_000,
          testTimeout: 120_000,
          maxWorkers: 4,
        },
      },
    ],
  },
});
