import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import http from 'node:http'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { PetstoreError, createPetstoreClient } from '@petstore/client'
import { BIN, DIRECT_ENGINES, createTestDatabase } from '../helper.js'
import { cleanupProcesses, runCli, startServer, stopServer, trackedTempDir, until, within } from '../processes.js'

after(cleanupProcesses)

/** The pids of the live children of `pid`. */
function childrenOf(pid: number): number[] {
  const result = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
  return result.stdout.split('\n').filter(Boolean).map(Number)
}

for (const engine of DIRECT_ENGINES) {
  describe(`serve --workers on ${engine}`, () => {
    it('runs two workers on one port that answer 300 concurrent creates with 201 and distinct ids, then stop together on SIGTERM', { timeout: 60_000 }, async (t) => {
      const dir = trackedTempDir('petstore-workers-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const key = execFileSync(process.execPath, [BIN, 'keys', 'create', '--name', 'workers'], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', ...database.env },
        encoding: 'utf8',
      })
        .trimEnd()
        .split('\n')
        .at(-1) ?? ''
      const server = await startServer({ ...database.env, LOG_LEVEL: 'info' }, dir, ['--workers', '2'])
      const pid = server.child.pid ?? 0
      const workers = childrenOf(pid)
      assert.equal(workers.length, 2, `expected 2 workers, got ${workers.join(', ')}`)

      const client = createPetstoreClient({ baseUrl: `${server.baseUrl}/v1`, apiKey: key })
      const refused: string[] = []
      const ids = new Set<bigint>()
      let next = 0
      const sendAll = async () => {
        while (next < 300) {
          const i = next++
          try {
            ids.add((await client.pets.create({ name: `worker pet ${i}`, categoryId: BigInt(i + 1) })).id)
          } catch (error) {
            if (!(error instanceof PetstoreError)) throw error
            refused.push(`#${i}: ${error.status} ${error.code}`)
          }
        }
      }
      await Promise.all(Array.from({ length: 30 }, sendAll))
      assert.deepEqual(refused, [])
      assert.equal(ids.size, 300)

      const exit = await stopServer(server, 'SIGTERM', 20_000)
      assert.deepEqual(exit, { code: 0, signal: null }, server.output())
      assert.deepEqual(childrenOf(pid), [])
      assert.match(server.output(), /all workers stopped/)
    })
  })
}

describe('serve --workers usage', () => {
  for (const value of ['0', 'abc', '1.5', '257']) {
    it(`refuses --workers ${value} with exit code 2`, () => {
      const dir = trackedTempDir('petstore-workers-')
      const result = spawnSync(process.execPath, [BIN, 'serve', '--workers', value], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite://${dir}/p.db` },
        encoding: 'utf8',
        timeout: 10_000,
      })
      assert.deepEqual({ status: result.status, signal: result.signal }, { status: 2, signal: null }, result.stderr)
      assert.match(result.stderr, /--workers/)
    })
  }
})

describe('serve --workers 2 on sqlite, one worker held by the write lock while it stops', () => {
  // A worker whose event loop SQLite's busy wait holds (here: the test holds the write lock, and the worker
  // waits for it inside a create) stops listening late. Until it does, the primary accepts connections for
  // the service and resets those it still queues when that worker stops listening. So the other worker must
  // keep its clients' connections until no worker listens: then a client that reconnects is refused before
  // it sends anything, never reset with its request sent.
  const HELD_MS = 3_000
  it(`resets none of the other worker's clients (the lock held ${HELD_MS} ms after SIGTERM)`, { timeout: 60_000 }, async (t) => {
    const dir = trackedTempDir('petstore-workers-held-')
    const database = await createTestDatabase('sqlite', dir)
    t.after(() => database.drop())
    const key = (await runCli(['keys', 'create', '--name', 'held'], database.env, dir, { rejectOnFailure: true })).stdout.trim().split('\n').at(-1) ?? ''
    const server = await startServer({ ...database.env, LOG_LEVEL: 'info', RATE_LIMIT_PER_KEY: '0', SHUTDOWN_TIMEOUT_MS: '10000' }, dir, ['--workers', '2'])

    await until(
      () => server.output().split('Server listening').length === 3,
      10_000,
      () => `the two workers did not both listen:\n${server.output()}`,
    )
    // Keep-alive connections, one request each, tell which worker serves which: the log line of a request
    // names its X-Request-Id and its worker's pid. Each worker's first request also records the key's use
    // (a write), done before the lock is taken.
    const CONNECTIONS = 8
    const agents = Array.from({ length: CONNECTIONS }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }))
    t.after(() => agents.forEach((agent) => agent.destroy()))
    const send = (agent: http.Agent, method: 'GET' | 'POST', id: string): Promise<{ status?: number; error?: string }> =>
      new Promise((resolve) => {
        const body = method === 'POST' ? JSON.stringify({ name: id, categoryId: 1 }) : ''
        const request = http.request({
          agent,
          host: '127.0.0.1',
          port: server.port,
          method,
          path: method === 'GET' ? '/v1/pets?limit=5' : '/v1/pets',
          headers: { authorization: `Bearer ${key}`, 'x-request-id': id, ...(body === '' ? {} : { 'content-type': 'application/json' }) },
        })
        request.on('response', (response) => {
          response.resume()
          response.on('end', () => resolve({ status: response.statusCode }))
          response.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }))
        })
        request.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }))
        request.setTimeout(15_000, () => request.destroy(new Error('no answer within 15 s')))
        request.end(body)
      })
    assert.deepEqual(await Promise.all(agents.map((agent, i) => send(agent, 'GET', `connection-${i}`))), agents.map(() => ({ status: 200 })))
    const pidOf = new Map<string, number>()
    await until(
      () => {
        for (const line of server.output().split('\n').filter((text) => text.startsWith('{'))) {
          const { reqId, pid } = JSON.parse(line) as { reqId?: string; pid: number }
          if (reqId?.startsWith('connection-') === true) pidOf.set(reqId, pid)
        }
        return pidOf.size === CONNECTIONS
      },
      5_000,
      () => `the log did not name every request:\n${server.output()}`,
    )
    const pids = [...new Set(pidOf.values())]
    assert.equal(pids.length, 2, `the connections did not reach both workers: ${JSON.stringify([...pidOf])}`)
    const onWorker = (pid: number | undefined) => agents.filter((_, i) => pidOf.get(`connection-${i}`) === pid)
    // One connection of the first worker is the one it is held on; all of the other worker's keep sending.
    const [held] = onWorker(pids[0])
    const others = onWorker(pids[1])
    assert.ok(held !== undefined)

    const lock = new Database(path.join(dir, 'petstore.db'))
    t.after(() => lock.close())
    lock.exec('BEGIN IMMEDIATE')
    const signalAt = performance.now()
    server.child.kill('SIGTERM')
    // Once both workers have begun their drain, the held one starts waiting for the lock.
    await sleep(300)
    const create = send(held, 'POST', 'held create').then((done) => ({ ...done, afterMs: performance.now() - signalAt }))
    setTimeout(() => {
      if (lock.open) lock.exec('ROLLBACK')
    }, HELD_MS - 300)

    // The other worker's clients go on as clients that know nothing of the stop, until refused.
    const failures: string[] = []
    let sent = 0
    await Promise.all(
      others.map(async (agent, i) => {
        for (let n = 0; ; n++) {
          const done = await send(agent, 'GET', `other-${i}-${n}`)
          sent++
          if (done.error === 'ECONNREFUSED') return
          if (done.error !== undefined || done.status !== 200) {
            failures.push(`other-${i}-${n}, ${Math.round(performance.now() - signalAt)} ms after the signal: ${done.status ?? ''} ${done.error ?? ''}`)
            return
          }
        }
      }),
    )
    const exit = await within(server.exited, 20_000, () => `the server did not exit:\n${server.output()}`)
    t.diagnostic(`${sent} requests from the other worker's clients; exited ${Math.round(performance.now() - signalAt)} ms after the signal`)
    // All but the request lines, thousands of them.
    const output = () => server.output().replace(/^.*"msg":"request"}\n/gm, '')
    assert.deepEqual(failures, [], `the other worker's clients were not answered or refused; the server wrote:\n${output()}`)
    const { status, afterMs } = await create
    assert.equal(status, 201, output())
    assert.ok(afterMs >= HELD_MS, `the create was answered ${Math.round(afterMs)} ms after the signal, before the lock was released: no worker was held`)
    assert.deepEqual(exit, { code: 0, signal: null }, output())
  })
})
