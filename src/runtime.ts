/**
 * Why the service cannot run on Node.js `version` (as `process.versions.node` gives it), or undefined
 * when it can. better-sqlite3 13 crashes the process on Node 20 instead of failing to load, so the entry
 * point asks before it imports anything native. 22.12 is the first 22 that loads ES modules with
 * require(). Majors newer than the tested 22 and 24 are let through (docs/decisions/0011-node-runtime.md).
 */
export function unsupportedNode(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  if (major > 22 || (major === 22 && minor >= 12)) return undefined
  return (
    `petstore needs Node.js 24 or 22.12+, and this is Node.js ${version}. ` +
    'Start it with `npm start` or `npx petstore`, which run the Node.js 24 that `npm install` put in ' +
    'node_modules, or install Node.js 24.'
  )
}

/** Half of V8's young generation, in MiB, for `petstore serve` (docs/decisions/0011-node-runtime.md). */
export const SEMI_SPACE_MIB = 4

/**
 * The Node options `petstore serve` must be restarted with, or undefined when it already runs with them.
 * Node 24 lets the young generation grow to 64 MiB half-spaces under load; capped at 4 MiB, the service's
 * peak RSS is about 30 MB lower. V8 reads the size only when the process starts, so the entry point
 * replaces its process image (same pid) with these options first. A size the operator chose, on the
 * command line or in NODE_OPTIONS, is kept.
 */
export function serveNodeOptions(execArgv: readonly string[], nodeOptions: string | undefined): string[] | undefined {
  const chosen = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((option) => /^--max-semi-space-size(=|$)/.test(option))
  return chosen ? undefined : [`--max-semi-space-size=${SEMI_SPACE_MIB}`]
}
