// Lint: TypeScript rules plus the package graph's rules — no import cycles, no deep imports
// into another package's src/, no package importing a service, no relative imports across packages.
import js from '@eslint/js';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '.tools/**', 'coverage/**', '**/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx', '**/*.js'],
    plugins: { 'import-x': importX },
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', fetch: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', performance: 'readonly' } },
    settings: { 'import-x/resolver': { node: { extensions: ['.ts', '.js'] } } },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-relative-packages': 'error',
      'import-x/no-self-import': 'error',
      'no-restricted-imports': ['error', { patterns: [
        { group: ['@baton/*/src/*', '@baton/*/src'], message: 'import a package by its entry point (@baton/<name>), not its src/' },
        { group: ['**/services/*', '../../services/**', '../../../services/**'], message: 'packages and services never import a service' },
      ] }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-empty-pattern': 'off',
    },
  },
  {
    // A test's own Postgres connections listen for 'error' (@baton/testing's testPool/testClient):
    // a bare client whose session the server ends throws in the worker and fails the run.
    files: ['**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: [{ name: 'pg', allowTypeImports: true, message: "use testPool/testClient from @baton/testing: a bare pg client's 'error' is thrown in the test worker (types from 'pg' are fine)" }],
      }],
    },
  },
);
