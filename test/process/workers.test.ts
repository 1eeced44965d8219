import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { after, describe, it } from 'node:test'
import { PetstoreError, createPetstoreClient } from '@petstore/client'
import { BIN, DIRECT_ENGINES, createTestDatabase } from '../helper.js'
import { cleanupProcesses, startServer, stopServer, trackedTempDir } from '../processes.js'

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
