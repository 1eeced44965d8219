import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import { BIN, ROOT } from '../../scripts/petstore-process.js'

// Releases of the service other than this checkout, built for the tests that run two releases on one
// database (issue 38): the next release, made from a copy of this tree with one more expand-only migration
// and the next minor version; and, once one is tagged, a previous release built from git history. Each is
// compiled by this checkout's TypeScript into a folder of its own (bin/, dist/, package.json) whose
// node_modules is this checkout's, so that it runs as an installed release would.

const run = promisify(execFile)

/** A release a test can run: `node <bin> serve`, `node <bin> keys …`. */
export interface Release {
  /** Its package.json's version. */
  version: string
  /** The folder that holds bin/, dist/ and package.json. */
  root: string
  bin: string
  /** The migrations it knows, per engine, in the order they apply. */
  migrations: Migrations
}

interface Migrations {
  sqlite: string[]
  postgres: string[]
}

/** The first release that runs on a database a newer release migrated expand-only: no older one can be rolled back to. */
export const FIRST_WINDOWED_RELEASE = '1.1.0'

/** What a release's tree holds that `tsc` and `bin/petstore.js` need; node_modules is linked, never copied. */
const TREE = ['src', 'bin', 'package.json', 'tsconfig.json']

/** This checkout, as `npm run build` left it (`npm test` builds first). */
export function currentRelease(): Release {
  return { version: versionOf(ROOT), root: ROOT, bin: BIN, migrations: migrationsOf(ROOT) }
}

function versionOf(root: string): string {
  return (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version
}

const NAMES = path.join('src', 'storage', 'migrations', 'names.ts')

/** The migrations of each engine as the tree at `root` names them in its names.ts. */
function migrationsOf(root: string): Migrations {
  const text = fs.readFileSync(path.join(root, NAMES), 'utf8')
  const list = (engine: keyof Migrations) => {
    const items = new RegExp(`\\b${engine}: \\[([^\\]]*)\\]`).exec(text)?.[1]
    if (items === undefined) throw new Error(`${NAMES} of ${root} has no list of ${engine} migrations`)
    return [...items.matchAll(/'(\d{4}-[a-z0-9-]+)'/g)].map((match) => match[1] as string)
  }
  return { sqlite: list('sqlite'), postgres: list('postgres') }
}

/** `major.(minor + 1).0`. */
function nextMinor(version: string): string {
  const [major, minor] = version.split('.').map(Number)
  if (major === undefined || minor === undefined || Number.isNaN(major) || Number.isNaN(minor)) throw new Error(`not a semantic version: ${version}`)
  return `${major}.${minor + 1}.0`
}

/** `text` with the one match of `pattern` replaced by `to(...groups)`; fails naming `what` unless it matches exactly once. */
function replaceOnce(text: string, pattern: RegExp, to: (...groups: string[]) => string, what: string): string {
  const count = [...text.matchAll(new RegExp(pattern.source, `${pattern.flags}g`))].length
  if (count !== 1) throw new Error(`${what}: found ${count} times, not once`)
  return text.replace(pattern, (_match, ...groups: unknown[]) => to(...groups.filter((group): group is string => typeof group === 'string')))
}

/**
 * The next release: a copy of this tree, with one more migration for both engines that only adds (a table,
 * and a nullable column on `pets`, neither of which its code uses) and package.json's next minor version,
 * compiled into `dir`.
 */
export async function buildNextRelease(dir: string): Promise<Release> {
  copyTree(ROOT, dir)
  addExpandMigration(dir)
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }
  manifest.version = nextMinor(manifest.version)
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  await compile(dir)
  return releaseAt(dir)
}

/**
 * The newest release tagged `v<version>` in this repository's history that the current release can roll
 * back to (one with the compatibility window, older than this checkout), or undefined: none is tagged yet,
 * or the history is not here (a shallow clone).
 */
export async function previousReleaseTag(): Promise<string | undefined> {
  let tags: string
  try {
    ;({ stdout: tags } = await run('git', ['-C', ROOT, 'tag', '--merged', 'HEAD', '--list', 'v*', '--sort=-v:refname']))
  } catch {
    return undefined
  }
  const current = versionOf(ROOT)
  return tags
    .split('\n')
    .filter((tag) => /^v\d+\.\d+\.\d+$/.test(tag))
    .find((tag) => compareVersions(tag.slice(1), current) < 0 && compareVersions(tag.slice(1), FIRST_WINDOWED_RELEASE) >= 0)
}

function compareVersions(a: string, b: string): number {
  const [x, y] = [a, b].map((version) => version.split('.').map(Number))
  for (let i = 0; i < 3; i++) {
    const difference = (x?.[i] ?? 0) - (y?.[i] ?? 0)
    if (difference !== 0) return difference
  }
  return 0
}

/**
 * The release at git `ref` (a tag), from `git archive`, compiled into `dir` by this checkout's TypeScript
 * against this checkout's node_modules: good for a release whose dependencies this checkout still has.
 */
export async function buildReleaseFromGit(ref: string, dir: string): Promise<Release> {
  fs.mkdirSync(dir, { recursive: true })
  const archive = path.join(dir, 'release.tar')
  await run('git', ['-C', ROOT, 'archive', '--format=tar', `--output=${archive}`, ref, ...TREE])
  await run('tar', ['-xf', archive, '-C', dir])
  fs.rmSync(archive)
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir')
  await compile(dir)
  return releaseAt(dir)
}

function releaseAt(dir: string): Release {
  return { version: versionOf(dir), root: dir, bin: path.join(dir, 'bin', 'petstore.js'), migrations: migrationsOf(dir) }
}

function copyTree(from: string, to: string): void {
  fs.mkdirSync(to, { recursive: true })
  for (const entry of TREE) fs.cpSync(path.join(from, entry), path.join(to, entry), { recursive: true })
  fs.symlinkSync(path.join(from, 'node_modules'), path.join(to, 'node_modules'), 'dir')
}

async function compile(dir: string): Promise<void> {
  try {
    await run(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], { cwd: dir, timeout: 120_000 })
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string }
    throw new Error(`tsc failed in ${dir}:\n${stdout}${stderr}`, { cause: error })
  }
}

/** The body of the migration the next release adds, per engine: only additions, which no older code reads. */
const EXPAND: Record<keyof Migrations, string> = {
  sqlite: [
    'await sql`CREATE TABLE pet_notes (pet_id INTEGER NOT NULL REFERENCES pets (id), note TEXT NOT NULL)`.execute(db)',
    'await sql`ALTER TABLE pets ADD COLUMN nickname TEXT`.execute(db)',
  ].join('\n  '),
  postgres: [
    'await sql`CREATE TABLE pet_notes (pet_id bigint NOT NULL REFERENCES pets (id), note text NOT NULL)`.execute(db)',
    'await sql`ALTER TABLE pets ADD COLUMN nickname text`.execute(db)',
  ].join('\n  '),
}

/**
 * Adds migration `<next number>-test-pet-notes` to both engines of the tree at `dir`: its files, its name in
 * names.ts and its module in each engine's index.ts, as a developer would.
 */
function addExpandMigration(dir: string): void {
  const known = migrationsOf(dir)
  const last = Math.max(...[...known.sqlite, ...known.postgres].map((name) => Number(name.slice(0, 4))))
  const name = `${String(last + 1).padStart(4, '0')}-test-pet-notes`
  const namesFile = path.join(dir, NAMES)
  let names = fs.readFileSync(namesFile, 'utf8')
  for (const engine of ['sqlite', 'postgres'] as const) {
    names = replaceOnce(
      names,
      new RegExp(`(\\b${engine}: \\[[^\\]]*?)(,?)(\\s*)\\]`),
      (items = '', comma = '', space = '') => `${items}, '${name}'${comma}${space}]`,
      `the ${engine} list of ${NAMES}`,
    )
    const folder = path.join(dir, 'src', 'storage', 'migrations', engine)
    fs.writeFileSync(
      path.join(folder, `${name}.ts`),
      [
        "import { type Kysely, sql } from 'kysely'",
        '',
        '// Made by test/upgrade/releases.ts for a release that only adds: a table and a nullable column.',
        'export async function up(db: Kysely<unknown>): Promise<void> {',
        `  ${EXPAND[engine]}`,
        '}',
        '',
      ].join('\n'),
    )
    const indexFile = path.join(folder, 'index.ts')
    let index = fs.readFileSync(indexFile, 'utf8')
    index = replaceOnce(index, /(^import \* as \w+ from '\.\/\d{4}-[^']+\.js'\n)(?!import \* as)/m, (line = '') => `${line}import * as testPetNotes from './${name}.js'\n`, `the last migration import of ${indexFile}`)
    index = replaceOnce(index, /(^\s*'\d{4}-[^']+': \w+,\n)(?!\s*'\d{4}-)/m, (line = '') => `${line}  '${name}': testPetNotes,\n`, `the last migration of ${indexFile}`)
    fs.writeFileSync(indexFile, index)
  }
  fs.writeFileSync(namesFile, names)
}
