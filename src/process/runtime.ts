/**
 * The Node.js lines the service is tested on, each from its first release that works: `package.json`'s
 * `engines` says the same (a test compares them), and so does the README (docs/decisions/0011-node-runtime.md).
 * 22.15 is the first 22 that OpenTelemetry's SDK 3 accepts (the development tools accept 22.13).
 */
export const SUPPORTED_NODE_LINES: readonly { major: number; minor: number }[] = [
  { major: 22, minor: 15 },
  { major: 24, minor: 0 },
  { major: 26, minor: 0 },
]

/** The semver range of `engines.node`, written from SUPPORTED_NODE_LINES. */
export function supportedNodeRange(): string {
  return SUPPORTED_NODE_LINES.map(({ major, minor }) => `^${major}.${minor}.0`).join(' || ')
}

/**
 * Why the service cannot run on Node.js `version` (as `process.versions.node` gives it), or undefined
 * when it can. better-sqlite3 13 crashes the process on Node 20 instead of failing to load, so the entry
 * point asks before it imports anything native. Only the tested lines run, newer majors included: a
 * line is declared once CI runs the whole suite on it.
 */
export function unsupportedNode(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  if (SUPPORTED_NODE_LINES.some((line) => line.major === major && minor >= line.minor)) return undefined
  const lines = SUPPORTED_NODE_LINES.map(({ major, minor }) => (minor === 0 ? `${major}` : `${major}.${minor}+`)).reverse()
  const newest = lines[0] ?? ''
  return (
    `petstore runs on Node.js ${lines.slice(0, -1).join(', ')} or ${lines.at(-1) ?? ''}, and this is Node.js ${version}. ` +
    `In a checkout, \`npm start\` and \`npx petstore\` run the Node.js ${newest} that \`npm install\` put in ` +
    `node_modules; elsewhere, install Node.js ${newest}.`
  )
}

/** Half of V8's young generation, in MiB, for `petstore serve` (docs/decisions/0011-node-runtime.md). */
export const SEMI_SPACE_MIB = 4

/** glibc's malloc arenas for `petstore serve` (docs/decisions/0011-node-runtime.md). */
export const MALLOC_ARENAS = 2

/** V8's allocation-site pretenuring, off for `petstore serve` (docs/decisions/0011-node-runtime.md). */
export const NO_PRETENURING = '--no-allocation-site-pretenuring'

/**
 * What `petstore serve` must be restarted with, or undefined when it already runs so. All three are read
 * only when a process starts, so the entry point replaces its process image (same pid) with them first;
 * what the operator chose is kept.
 * - `--max-semi-space-size=SEMI_SPACE_MIB`, unless a size is given on the command line or in NODE_OPTIONS:
 *   V8 would size it from the machine's memory instead, which differs between the machines a fleet runs on.
 * - NO_PRETENURING, unless the command line turns pretenuring on or off (Node refuses either in NODE_OPTIONS):
 *   V8 may decide, by chance in a process's first seconds under load, to allocate some short-lived objects
 *   straight into the old generation, where, dead, they hold every request's young objects until those are
 *   promoted too, and the process pays several times the GC for as long as it runs (ADR 11).
 * - `MALLOC_ARENA_MAX=MALLOC_ARENAS` in the environment, unless it is set: glibc gives each thread that
 *   allocates (the probe thread, libuv's pool) an arena of its own, whose pages stay in RSS. Other C
 *   libraries ignore it.
 */
export function serveRestart(
  execArgv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): { nodeOptions: string[]; env: Record<string, string | undefined> } | undefined {
  const sized = [...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)].some((option) => /^--max-semi-space-size(=|$)/.test(option))
  const pretenuring = execArgv.some((option) => /^--(no-?)?allocation[-_]site[-_]pretenuring$/.test(option))
  const arenas = env.MALLOC_ARENA_MAX !== undefined
  if (sized && pretenuring && arenas) return undefined
  return {
    nodeOptions: [...(sized ? [] : [`--max-semi-space-size=${SEMI_SPACE_MIB}`]), ...(pretenuring ? [] : [NO_PRETENURING])],
    env: arenas ? { ...env } : { ...env, MALLOC_ARENA_MAX: String(MALLOC_ARENAS) },
  }
}
