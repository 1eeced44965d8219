import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { MALLOC_ARENAS, NO_PRETENURING, SEMI_SPACE_MIB, serveRestart, supportedNodeRange, unsupportedNode } from '../../src/process/runtime.js'
import { BIN, ROOT } from '../helper.js'
import { cleanupProcesses, runCommand, startServer, stopServer, trackedTempDir } from '../processes.js'

// better-sqlite3 12 on Node 24.19+ aborted the process (`Assertion failed: (env) != nullptr` in
// node::RemoveEnvironmentCleanupHook) whenever a GC collected a statement nobody held any more: at
// start-up, during migrations, or later under load (docs/decisions/0011-node-runtime.md). Only a GC
// shows it, so the service runs here with a 1 MiB young generation and a full GC forced every few
// milliseconds, which collects every dropped statement almost at once. SQLite only: the PostgreSQL
// driver has no native part.

after(cleanupProcesses)

/** Node flags that make garbage collection constant: tiny young generation, `gc()` on a 3 ms timer. */
const GC_STRESS = [
  '--max-semi-space-size=1',
  '--expose-gc',
  '--import',
  'data:text/javascript,setInterval(() => globalThis.gc(), 3).unref()',
]

describe(`the service under constant garbage collection (Node ${process.versions.node})`, () => {
  it('migrates a new database, serves 600 creates and reads, and shuts down cleanly', { timeout: 90_000 }, async () => {
    const dir = trackedTempDir('petstore-native-gc-')
    const env = { DATABASE_URL: `sqlite://${dir}/petstore.db` }
    // keys create opens the new database and applies every migration, under the same stress.
    const created = await runCommand(process.execPath, [...GC_STRESS, BIN, 'keys', 'create', '--name', 'gc', '--json'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', ...env },
      timeoutMs: 30_000,
    })
    assert.deepEqual({ code: created.code, signal: created.signal }, { code: 0, signal: null }, created.stderr)
    const { key } = JSON.parse(created.stdout) as { key: string }

    const server = await startServer(env, dir, [], { nodeArgs: GC_STRESS })
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const statuses = new Map<number, number>()
    const count = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1)
    let next = 0
    const client = async () => {
      while (next < 200) {
        const i = next++
        const created = await fetch(`${server.baseUrl}/v1/pets`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ name: `gc ${i}`, categoryId: i + 1, status: 'available' }),
        })
        count(created.status)
        const { id } = (await created.json()) as { id: number }
        // Distinct queries, so that the read cache misses and statements are prepared and dropped.
        const list = await fetch(`${server.baseUrl}/v1/pets?limit=${(i % 100) + 1}&status=available`, { headers })
        count(list.status)
        await list.arrayBuffer()
        const one = await fetch(`${server.baseUrl}/v1/pets/${id}`, { headers })
        count(one.status)
        await one.arrayBuffer()
      }
    }
    await Promise.all(Array.from({ length: 8 }, client))
    assert.deepEqual(Object.fromEntries(statuses), { 200: 400, 201: 200 }, server.output())
    assert.equal(server.child.exitCode, null, server.output())

    const exit = await stopServer(server, 'SIGTERM', 20_000)
    assert.deepEqual(exit, { code: 0, signal: null }, server.output())
  })
})

describe('the supported Node.js lines', () => {
  it('accepts each tested line from its first working release: 22.15 and later 22s, every 24, every 26', () => {
    for (const version of ['22.15.0', '22.23.3', '24.0.0', '24.21.0', '26.0.0', '26.10.0']) assert.equal(unsupportedNode(version), undefined, version)
  })

  it('refuses every other line, older or newer, and 22 before 22.15, naming the version and the way out', () => {
    for (const version of ['18.20.8', '20.20.2', '21.7.3', '22.14.0', '23.11.1', '25.2.0', '27.0.0']) {
      const reason = unsupportedNode(version) ?? ''
      assert.ok(reason.includes(`this is Node.js ${version}`), `${version}: ${reason}`)
      assert.match(reason, /Node\.js 26, 24 or 22\.15\+/)
      assert.match(reason, /npm start/)
    }
  })

  it('declares the same lines in package.json engines, and brings Node 26 with npm install', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      engines: { node: string }
      devDependencies: Record<string, string>
    }
    assert.equal(manifest.engines.node, supportedNodeRange())
    assert.equal(manifest.engines.node, '^22.15.0 || ^24.0.0 || ^26.0.0')
    assert.match(manifest.devDependencies.node ?? '', /^\^26\./)
  })

  // The machines this project is built on have Node 20 as their system Node: the very case.
  const systemNode = '/usr/bin/node'
  const systemVersion = fs.existsSync(systemNode)
    ? execFileSync(systemNode, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim()
    : ''
  it(
    'stops with exit 1 and that message when started on an older Node, before loading better-sqlite3',
    { skip: systemVersion === '' || unsupportedNode(systemVersion) === undefined ? `no unsupported Node at ${systemNode}` : false },
    async () => {
      const dir = trackedTempDir('petstore-old-node-')
      const run = await runCommand(systemNode, [BIN, 'keys', 'list'], { cwd: dir, env: { PATH: '/usr/bin:/bin' } })
      assert.equal(run.code, 1, run.stderr)
      assert.equal(run.stderr, `${unsupportedNode(systemVersion)}\n`)
      assert.equal(fs.existsSync(path.join(dir, 'data')), false, 'it opened a database')
    },
  )
})

describe('the young generation, pretenuring and malloc arenas of petstore serve', () => {
  const flag = `--max-semi-space-size=${SEMI_SPACE_MIB}`
  const arenas = String(MALLOC_ARENAS)

  it('restarts with the cap, no pretenuring and the arenas unless the operator chose them (command line, NODE_OPTIONS, environment)', () => {
    // Where a size may be given, and look-alikes that are not the option.
    const sizes: [string[], string | undefined, boolean][] = [
      [[], undefined, false],
      [['--enable-source-maps'], '--max-old-space-size=512', false],
      [['--max-semi-space-size-x=1'], undefined, false],
      [['--max-semi-space-size=16'], undefined, true],
      [[], '--trace-gc --max-semi-space-size=1', true],
    ]
    // Pretenuring on or off on the command line, in V8's spellings, and look-alikes.
    const pretenurings: [string[], boolean][] = [
      [[], false],
      [['--allocation-site-pretenuring'], true],
      [[NO_PRETENURING], true],
      [['--noallocation_site_pretenuring'], true],
      [['--allocation-site-pretenuring-x'], false],
      [['--trace-pretenuring'], false],
    ]
    for (const [sizeArgv, nodeOptions, sized] of sizes) {
      for (const [pretenuringArgv, pretenuring] of pretenurings) {
        for (const given of [undefined, '4']) {
          const execArgv = [...sizeArgv, ...pretenuringArgv]
          const env = { PATH: '/bin', ...(nodeOptions === undefined ? {} : { NODE_OPTIONS: nodeOptions }), ...(given === undefined ? {} : { MALLOC_ARENA_MAX: given }) }
          const restart = serveRestart(execArgv, env)
          const what = `${JSON.stringify(execArgv)} NODE_OPTIONS=${nodeOptions ?? ''} MALLOC_ARENA_MAX=${given ?? ''}`
          if (sized && pretenuring && given !== undefined) {
            assert.equal(restart, undefined, what)
            continue
          }
          assert.deepEqual(restart?.nodeOptions, [...(sized ? [] : [flag]), ...(pretenuring ? [] : [NO_PRETENURING])], what)
          // Everything else in the environment is passed on as it is.
          assert.deepEqual(restart?.env, { ...env, MALLOC_ARENA_MAX: given ?? arenas }, what)
        }
      }
    }
  })

  it('turns off a flag that this Node knows, which Node refuses in NODE_OPTIONS', async () => {
    const known = await runCommand(process.execPath, [NO_PRETENURING, '-e', 'process.stdout.write("ran")'], { cwd: ROOT, env: { PATH: '/usr/bin:/bin' } })
    assert.deepEqual([known.code, known.stdout], [0, 'ran'], known.stderr)
    const refused = await runCommand(process.execPath, ['-e', ''], { cwd: ROOT, env: { PATH: '/usr/bin:/bin', NODE_OPTIONS: NO_PRETENURING } })
    assert.notEqual(refused.code, 0)
    assert.match(refused.stderr, /not allowed in NODE_OPTIONS/)
  })

  /** The command line and the environment of the live process `pid`, as the kernel has them. */
  const commandLine = (pid: number) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
  const environment = (pid: number) => fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)

  it(
    'is applied when the service is started as `node bin/petstore.js serve`, in the same process',
    { skip: process.platform === 'linux' ? false : 'reads /proc' },
    async () => {
      const dir = trackedTempDir('petstore-semi-space-')
      const server = await startServer({ DATABASE_URL: `sqlite://${dir}/petstore.db` }, dir)
      // The pid the test spawned is the one serving: the restart replaced the process image, not the process.
      assert.deepEqual(commandLine(server.child.pid ?? 0), [process.execPath, flag, NO_PRETENURING, BIN, 'serve'])
      assert.ok(environment(server.child.pid ?? 0).includes(`MALLOC_ARENA_MAX=${arenas}`))
      assert.deepEqual(await stopServer(server), { code: 0, signal: null }, server.output())
    },
  )

  it(
    'keeps the size an operator gave in NODE_OPTIONS, the pretenuring they chose and the arenas they set',
    { skip: process.platform === 'linux' ? false : 'reads /proc' },
    async () => {
      const dir = trackedTempDir('petstore-semi-space-')
      const server = await startServer({ DATABASE_URL: `sqlite://${dir}/petstore.db`, NODE_OPTIONS: '--max-semi-space-size=8', MALLOC_ARENA_MAX: '3' }, dir, [], {
        nodeArgs: ['--allocation-site-pretenuring'],
      })
      assert.deepEqual(commandLine(server.child.pid ?? 0), [process.execPath, '--allocation-site-pretenuring', BIN, 'serve'])
      assert.ok(environment(server.child.pid ?? 0).includes('MALLOC_ARENA_MAX=3'))
      assert.deepEqual(await stopServer(server), { code: 0, signal: null }, server.output())
    },
  )
})
