import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist/', 'clients/typescript/dist/', 'node_modules/', 'data/', 'test/artifacts/'] },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.strictTypeChecked],
    languageOptions: { parserOptions: { project: './tsconfig.check.json', tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/ban-ts-comment': 'error',
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test runs what describe() and it() return; awaiting them is not how suites are written.
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }] },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      // Fastify handlers and hooks are async by contract, with or without an await inside.
      '@typescript-eslint/require-await': 'off',
      // Numbers and bigints read clearly in messages (`${limit}`), and so does a missing value in a diagnostic
      // (`exit code null`); objects, booleans and any stay errors.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowNullish: true, allowAny: false, allowBoolean: false, allowRegExp: false }],
      // `() => reply.send(x)` and `return res.end()` in a void function are the idioms of a callback and an early return.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true, ignoreVoidReturningFunctions: true }],
      // TypeScript narrows a `let` as if no callback could change it (the tests' `stopping` and `loading` flags,
      // a child's exit signal) and trusts lib types that lie (JSON.stringify can return undefined): the rule
      // flagged working loops and needed guards.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // `[...text].length` counts code points, which is what the length rules mean; spreading other values stays an error.
      '@typescript-eslint/no-misused-spread': ['error', { allow: [{ from: 'lib', name: 'string' }] }],
      // The typed client's bodyOf<T>() names at each call which body it parses; the rule would only move that cast.
      '@typescript-eslint/no-unnecessary-type-parameters': 'off',
    },
  },
  {
    // The client's getPet (`pets.get`) is deprecated for its callers; the client must still implement it,
    // and its tests call it.
    files: ['clients/typescript/src/index.ts', 'test/client.test.ts'],
    rules: { '@typescript-eslint/no-deprecated': 'off' },
  },
  {
    files: ['**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
)
