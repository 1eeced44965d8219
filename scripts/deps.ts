// The drift of the direct dependencies against the registry: for each one of package.json and of its
// workspaces (dependencies and devDependencies), the version package-lock.json holds, the registry's
// latest, how many majors behind that is, and whether the development guide's "Dependencies" section
// explains why it is held. Not part of `npm test`, since it asks the registry; the release steps run it.
// Usage: `npm run deps [-- --json]`. Exit 0 when every dependency is on its latest major or explained,
// 1 when one is a major or more behind and not explained, 3 when the registry could not be asked.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import { parseArgs } from 'node:util'
import semver from 'semver'

const ROOT = path.resolve(import.meta.dirname, '..')
const GUIDE = 'docs/development.md'
/** Registry look-ups at once: npm view is one process per package. */
const CONCURRENCY = 8

/** A direct dependency as package.json and the lock file have it. */
interface Held {
  name: string
  /** The package.json that declares it, `.` for the root. */
  declaredIn: string
  range: string
  version: string
}

interface Drift extends Held {
  latest: string
  majorsBehind: number
  explained: boolean
}

/**
 * How many majors `latest` is ahead of `held`; on a 0.x line the minor is the major (0.28 → 0.29 is
 * one), and from 0.x to a 1.0 or later counts that major. A held version newer than latest (a
 * prerelease) is 0 behind.
 */
export function majorsBehind(held: string, latest: string): number {
  const from = semver.coerce(held)
  const to = semver.coerce(latest)
  if (from === null || to === null) throw new Error(`cannot compare versions ${held} and ${latest}`)
  if (from.major === 0) return Math.max(0, to.major === 0 ? to.minor - from.minor : to.major)
  return Math.max(0, to.major - from.major)
}

/**
 * The packages that the guide's "Dependencies" section explains: the first cell of each row of its
 * table, a package name in backticks.
 */
export function explainedPackages(guide: string): Set<string> {
  const start = guide.search(/^## Dependencies$/m)
  if (start === -1) return new Set()
  const rest = guide.slice(start + 1)
  const end = rest.search(/^## /m)
  const section = end === -1 ? rest : rest.slice(0, end)
  const names = [...section.matchAll(/^\| `([^`]+)` \|/gm)].map((match) => match[1] ?? '')
  return new Set(names)
}

function readJson<T>(file: string): T {
  return JSON.parse(fs.readFileSync(path.join(ROOT, file), 'utf8')) as T
}

interface Manifest {
  workspaces?: string[]
  dependencies?: Record<string, string>
  devDependencies?: Record<string, string>
}

/** The direct dependencies of the root package and its workspaces, with the versions the lock file holds. */
function heldDependencies(): Held[] {
  const lock = readJson<{ packages: Record<string, { version?: string }> }>('package-lock.json')
  const root = readJson<Manifest>('package.json')
  const held: Held[] = []
  for (const dir of ['.', ...(root.workspaces ?? [])]) {
    const manifest = dir === '.' ? root : readJson<Manifest>(path.join(dir, 'package.json'))
    for (const [name, range] of Object.entries({ ...manifest.dependencies, ...manifest.devDependencies })) {
      // npm installs a workspace's dependency at the root unless two versions conflict.
      const version = (dir === '.' ? undefined : lock.packages[`${dir}/node_modules/${name}`]?.version) ?? lock.packages[`node_modules/${name}`]?.version
      if (version === undefined) throw new Error(`${name} (${dir}/package.json) is not in package-lock.json: run npm install`)
      held.push({ name, declaredIn: dir, range, version })
    }
  }
  return held.sort((a, b) => a.name.localeCompare(b.name))
}

/** The registry's `latest` tag of `name`, through npm, which uses the registry and certificates it is configured with. */
async function latestOf(name: string): Promise<string> {
  const { stdout } = await promisify(execFile)('npm', ['view', name, 'dist-tags.latest'], { cwd: ROOT, timeout: 60_000 })
  const latest = stdout.trim()
  if (semver.valid(latest) === null) throw new Error(`npm view ${name} dist-tags.latest answered ${JSON.stringify(latest)}`)
  return latest
}

async function inBatches<T, R>(items: readonly T[], size: number, each: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await each(items[i] as T)
    }
  }
  await Promise.all(Array.from({ length: Math.min(size, items.length) }, worker))
  return results
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } })
  if (values.help === true) {
    process.stdout.write(
      'Usage: npm run deps [-- --json]\n\nEach direct dependency: the version held, the latest on the registry, the majors behind, and\n' +
        `whether ${GUIDE}'s "Dependencies" section explains it. Exit 0 when none is behind unexplained, 1 when one is,\n` +
        '3 when the registry could not be asked.\n',
    )
    return 0
  }
  const explained = explainedPackages(fs.readFileSync(path.join(ROOT, GUIDE), 'utf8'))
  const held = heldDependencies()
  let drift: Drift[]
  try {
    drift = await inBatches(held, CONCURRENCY, async (dependency) => {
      const latest = await latestOf(dependency.name)
      return { ...dependency, latest, majorsBehind: majorsBehind(dependency.version, latest), explained: explained.has(dependency.name) }
    })
  } catch (error) {
    process.stderr.write(`deps: the registry could not be asked: ${(error as Error).message}\n`)
    return 3
  }
  const unexplained = drift.filter((d) => d.majorsBehind > 0 && !d.explained)
  const stale = [...explained].filter((name) => !drift.some((d) => d.name === name && d.majorsBehind > 0))
  if (values.json === true) {
    process.stdout.write(`${JSON.stringify({ dependencies: drift, unexplained: unexplained.map((d) => d.name), explainedButCurrent: stale }, null, 2)}\n`)
  } else {
    const rows = [
      ['dependency', 'held', 'latest', 'behind', 'explained'],
      ...drift.map((d) => [
        d.declaredIn === '.' ? d.name : `${d.name} (${d.declaredIn})`,
        d.version,
        d.latest,
        d.majorsBehind === 0 ? '' : String(d.majorsBehind),
        d.explained ? 'yes' : d.majorsBehind > 0 ? 'NO' : '',
      ]),
    ]
    const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length))) ?? []
    for (const row of rows) process.stdout.write(`${row.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`)
    const behind = drift.filter((d) => d.majorsBehind > 0).length
    process.stdout.write(`\n${drift.length} direct dependencies; ${behind} a major or more behind, ${behind - unexplained.length} of them explained in ${GUIDE}.\n`)
    if (stale.length > 0) process.stdout.write(`Explained in ${GUIDE} but on the latest major (or not a dependency): ${stale.join(', ')}.\n`)
    if (unexplained.length > 0) {
      process.stdout.write(`Behind and not explained: ${unexplained.map((d) => d.name).join(', ')}: move them, or say why in "Dependencies".\n`)
    }
  }
  return unexplained.length > 0 ? 1 : 0
}

if (path.resolve(process.argv[1] ?? '') === import.meta.filename) process.exitCode = await main()
