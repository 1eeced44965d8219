import assert from 'node:assert/strict'
import fs from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { createApiKeysService } from '../../src/api-keys/api-keys.service.js'
import { buildApp } from '../../src/app.js'
import { GET_PET_SUNSET } from '../../src/deprecations/deprecations.policy.js'
import { loadConfig } from '../../src/config.js'
import { createDeprecationRecorder, type DeprecationRecorder } from '../../src/deprecations/deprecations.recorder.js'
import type { DeprecatedCaller, DeprecationsRepository } from '../../src/deprecations/deprecations.repository.js'
import { createDeprecationsService } from '../../src/deprecations/deprecations.service.js'
import { createLogger } from '../../src/logger.js'
import { openStorage, type Storage } from '../../src/repositories.js'
import { ENGINES, type Engine, ManualClock, createTestDatabase, tempDir } from '../helper.js'
import { cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

const GET_PET = 'getPet'
const MINUTE = 60_000
const DAY = 86_400_000
// Far beyond any test: flushes happen when a test says so, never on their own.
const NEVER = 3_600_000

interface Fixture {
  storage: Storage
  clock: ManualClock
  /** A second connection to the same database: another process or instance. */
  other: Storage
  flushErrors: unknown[]
  recorder(deprecations?: DeprecationsRepository, flushIntervalMs?: number): DeprecationRecorder
  callers(): Promise<DeprecatedCaller[]>
  close(): Promise<void>
}

async function fixture(engine: Engine): Promise<Fixture> {
  const dir = tempDir()
  const database = await createTestDatabase(engine, dir)
  const config = loadConfig(database.env, dir)
  const storage = await openStorage(config.database)
  await storage.migrate()
  const other = await openStorage(config.database)
  const clock = new ManualClock()
  const flushErrors: unknown[] = []
  const recorders: DeprecationRecorder[] = []
  return {
    storage,
    clock,
    other,
    flushErrors,
    recorder(deprecations = storage.deprecations, flushIntervalMs = NEVER) {
      const recorder = createDeprecationRecorder({ deprecations, clock, flushIntervalMs, onFlushError: (error) => flushErrors.push(error) })
      recorders.push(recorder)
      return recorder
    },
    callers: () => storage.deprecations.callers(GET_PET),
    async close() {
      for (const recorder of recorders) await recorder.close().catch(() => undefined)
      await other.close()
      await storage.close()
      await database.drop()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A real repository whose `add` fails while `down` is true, as it does while the database is away. */
function flaky(real: DeprecationsRepository): DeprecationsRepository & { down: boolean; attempts: number } {
  const repository = {
    down: true,
    attempts: 0,
    async add(counts: Parameters<DeprecationsRepository['add']>[0]) {
      repository.attempts++
      if (repository.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432')
      await real.add(counts)
    },
    callers: (operation: string) => real.callers(operation),
  }
  return repository
}

for (const engine of ENGINES) {
  describe(`deprecated call recording on ${engine}`, () => {
    it('writes nothing per call: counts reach the database at a flush, one row per key', async (t) => {
      const f = await fixture(engine)
      t.after(() => f.close())
      const recorder = f.recorder()
      const start = f.clock.now()
      recorder.record(GET_PET, 'key_a')
      f.clock.advance(MINUTE)
      recorder.record(GET_PET, 'key_a')
      recorder.record(GET_PET, 'key_b')
      assert.deepEqual(await f.callers(), [], 'nothing is written before the flush')
      await recorder.flush()
      assert.deepEqual(
        (await f.callers()).map(({ keyId, calls, firstSeen, lastSeen }) => [keyId, calls, firstSeen, lastSeen]),
        [
          ['key_a', 2, start, start + MINUTE],
          ['key_b', 1, start + MINUTE, start + MINUTE],
        ],
      )
      await recorder.flush()
      assert.equal((await f.callers()).reduce((sum, caller) => sum + caller.calls, 0), 3, 'a flush writes each call once')
    })

    it('adds up the counts of two processes on one database, keeping the earliest first and the latest last seen', async (t) => {
      const f = await fixture(engine)
      t.after(() => f.close())
      const one = f.recorder(f.storage.deprecations)
      const two = f.recorder(f.other.deprecations)
      const start = f.clock.now()
      for (let i = 0; i < 5; i++) one.record(GET_PET, 'key_shared')
      f.clock.advance(-MINUTE)
      two.record(GET_PET, 'key_shared')
      f.clock.advance(3 * MINUTE)
      two.record(GET_PET, 'key_shared')
      await Promise.all([one.flush(), two.flush()])
      // A later batch adds to the stored row rather than replacing it.
      one.record(GET_PET, 'key_shared')
      await one.flush()
      const [caller, ...rest] = await f.callers()
      assert.deepEqual(rest, [])
      assert.deepEqual(caller, {
        operation: GET_PET,
        keyId: 'key_shared',
        keyName: null,
        calls: 8,
        firstSeen: start - MINUTE,
        lastSeen: start + 2 * MINUTE,
      })
    })

    it('keeps the counts of a failed flush and writes them, merged with newer ones, at the next', async (t) => {
      const f = await fixture(engine)
      t.after(() => f.close())
      const repository = flaky(f.storage.deprecations)
      const recorder = f.recorder(repository)
      const start = f.clock.now()
      for (let i = 0; i < 1000; i++) recorder.record(GET_PET, i % 2 === 0 ? 'key_even' : 'key_odd')
      await recorder.flush()
      assert.equal(repository.attempts, 1)
      assert.match(String(f.flushErrors[0]), /ECONNREFUSED/, 'the failure is reported, not thrown')
      assert.deepEqual(await f.callers(), [])

      f.clock.advance(MINUTE)
      recorder.record(GET_PET, 'key_even')
      await recorder.flush()
      assert.equal(f.flushErrors.length, 2)
      repository.down = false
      await recorder.flush()
      assert.deepEqual(
        (await f.callers()).map(({ keyId, calls, firstSeen, lastSeen }) => [keyId, calls, firstSeen, lastSeen]),
        [
          ['key_even', 501, start, start + MINUTE],
          ['key_odd', 500, start, start],
        ],
      )
      await recorder.flush()
      assert.equal(repository.attempts, 3, 'nothing left to write: no empty write either')
    })

    it('flushes by itself every flush interval, and once more when closed', async (t) => {
      const f = await fixture(engine)
      t.after(() => f.close())
      const recorder = f.recorder(f.storage.deprecations, 20)
      recorder.record(GET_PET, 'key_timed')
      let calls = 0
      for (let tries = 0; tries < 500 && calls === 0; tries++) {
        await sleep(10)
        calls = (await f.callers())[0]?.calls ?? 0
      }
      assert.equal(calls, 1, 'no flush within 5 s of a 20 ms interval')
      recorder.record(GET_PET, 'key_timed')
      await recorder.close()
      assert.equal((await f.callers())[0]?.calls, 2)
    })
  })

  describe(`getPet calls through the app on ${engine}`, () => {
    let f: Fixture | undefined
    let app: FastifyInstance | undefined
    after(async () => {
      await app?.close()
      await f?.close()
    })

    it('counts every authenticated getPet call per key, whatever the answer, and nothing else', async () => {
      f = await fixture(engine)
      const config = loadConfig({ DATABASE_URL: 'sqlite:///unused.db', LOG_LEVEL: 'silent' })
      const recorder = f.recorder()
      app = await buildApp({ config, storage: f.storage, clock: f.clock, logger: createLogger(config), deprecationRecorder: recorder })
      const keys = createApiKeysService({ apiKeys: f.storage.apiKeys, clock: f.clock, environment: config.environment })
      const alice = await keys.create({ name: 'alice' })
      const bob = await keys.create({ name: 'bob' })
      const get = (url: string, secret?: string) =>
        app?.inject({ method: 'GET', url, headers: secret === undefined ? {} : { authorization: `Bearer ${secret}` } })
      const created = await app.inject({
        method: 'POST',
        url: '/v1/pets',
        headers: { authorization: `Bearer ${alice.secret}`, 'content-type': 'application/json' },
        payload: '{"name":"Rex","categoryId":1}',
      })
      const { id } = JSON.parse(created.body) as { id: number }

      const start = f.clock.now()
      assert.equal((await get(`/v1/pets/${id}`, alice.secret))?.statusCode, 200)
      assert.equal((await get('/v1/pets/999999', alice.secret))?.statusCode, 404)
      assert.equal((await get('/v1/pets/abc', alice.secret))?.statusCode, 400)
      assert.equal((await get(`/v1/pets/${id}`))?.statusCode, 401, 'no key: nobody to count')
      assert.equal((await get(`/v1/pets/${id}`, 'ps_live_notAValidKey000000000000000000'))?.statusCode, 401)
      assert.equal((await get('/v1/pets', alice.secret))?.statusCode, 200, 'listPets is not deprecated')
      f.clock.advance(MINUTE)
      assert.equal((await get(`/v1/pets/${id}`, bob.secret))?.statusCode, 200)
      f.clock.ms = GET_PET_SUNSET.getTime()
      assert.equal((await get(`/v1/pets/${id}`, alice.secret))?.statusCode, 410, 'a call after the sunset still counts')

      await recorder.flush()
      assert.deepEqual(await f.callers(), [
        {
          operation: GET_PET,
          keyId: alice.key.id,
          keyName: 'alice',
          calls: 4,
          firstSeen: start,
          lastSeen: GET_PET_SUNSET.getTime(),
        },
        { operation: GET_PET, keyId: bob.key.id, keyName: 'bob', calls: 1, firstSeen: start + MINUTE, lastSeen: start + MINUTE },
      ])
    })
  })

  describe(`the deprecation report on ${engine}`, () => {
    it('lists callers by last seen, newest first, names known keys, keeps unknown ones, and counts days to the sunset', async (t) => {
      const f = await fixture(engine)
      t.after(() => f.close())
      const keys = createApiKeysService({ apiKeys: f.storage.apiKeys, clock: f.clock, environment: 'production' })
      const known = await keys.create({ name: 'billing' })
      const recorder = f.recorder()
      recorder.record(GET_PET, 'key_deletedLongAgo0')
      f.clock.advance(MINUTE)
      recorder.record(GET_PET, known.key.id)
      await recorder.flush()

      const service = createDeprecationsService({ deprecations: f.storage.deprecations, clock: f.clock })
      const report = await service.report(GET_PET, GET_PET_SUNSET)
      assert.deepEqual(
        report.callers.map((caller) => [caller.keyId, caller.keyName]),
        [
          [known.key.id, 'billing'],
          ['key_deletedLongAgo0', null],
        ],
      )
      // 2026-11-22T12:01Z to 2030-12-05T00:00Z: 1473 days and almost 12 hours, rounded up.
      assert.deepEqual([report.daysLeft, report.sunsetPassed], [1474, false])

      f.clock.ms = GET_PET_SUNSET.getTime() - 1
      assert.deepEqual(
        [(await service.report(GET_PET, GET_PET_SUNSET)).daysLeft, (await service.report(GET_PET, GET_PET_SUNSET)).sunsetPassed],
        [1, false],
      )
      for (const at of [GET_PET_SUNSET.getTime(), GET_PET_SUNSET.getTime() + 400 * DAY]) {
        f.clock.ms = at
        const passed = await service.report(GET_PET, GET_PET_SUNSET)
        assert.deepEqual([passed.daysLeft, passed.sunsetPassed], [0, true])
      }
    })
  })

  describe(`petstore deprecations against a real server on ${engine}`, () => {
    it('shows the getPet calls of a server that was stopped within seconds of them, as a table and as JSON', { timeout: 60_000 }, async (t) => {
      const dir = trackedTempDir('petstore-deprecations-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const { env } = database
      const create = await runCli(['keys', 'create', '--name', 'legacy-app', '--json'], env, dir)
      assert.equal(create.code, 0, create.stderr)
      const key = JSON.parse(create.stdout) as { id: string; key: string }

      const empty = await runCli(['deprecations'], env, dir)
      assert.equal(empty.code, 0, empty.stderr)
      assert.match(empty.stdout, /sunset 2030-12-05T00:00:00\.000Z, \d+ days left/)
      assert.match(empty.stdout, /No key has called it/)

      const server = await startServer(env, dir)
      const before = Date.now()
      try {
        for (let i = 0; i < 3; i++) {
          const response = await fetch(`${server.baseUrl}/v1/pets/1`, { headers: { authorization: `Bearer ${key.key}` } })
          assert.equal(response.status, 404)
        }
      } finally {
        // Well within the 10 s flush interval: the counts are written by the shutdown.
        const exit = await stopServer(server)
        assert.equal(exit.code, 0, server.output())
      }
      const afterCalls = Date.now()

      const json = await runCli(['deprecations', '--json'], env, dir)
      assert.equal(json.code, 0, json.stderr)
      const report = JSON.parse(json.stdout) as {
        operation: string
        sunset: string
        sunsetPassed: boolean
        daysLeft: number
        keys: { id: string; name: string | null; calls: number; firstSeen: string; lastSeen: string }[]
      }
      assert.deepEqual(Object.keys(report), ['operation', 'sunset', 'sunsetPassed', 'daysLeft', 'keys'])
      assert.equal(report.operation, 'getPet')
      assert.equal(report.sunset, '2030-12-05T00:00:00.000Z')
      assert.equal(report.sunsetPassed, false)
      assert.equal(report.daysLeft, Math.ceil((GET_PET_SUNSET.getTime() - Date.now()) / DAY))
      assert.equal(report.keys.length, 1)
      const [caller] = report.keys
      assert.deepEqual([caller?.id, caller?.name, caller?.calls], [key.id, 'legacy-app', 3])
      for (const at of [caller?.firstSeen ?? '', caller?.lastSeen ?? '']) {
        assert.ok(Date.parse(at) >= before && Date.parse(at) <= afterCalls, at)
      }

      const text = await runCli(['deprecations'], env, dir)
      assert.equal(text.code, 0, text.stderr)
      const lines = text.stdout.trimEnd().split('\n')
      assert.match(lines[1] ?? '', /^KEY ID +NAME +CALLS +FIRST SEEN +LAST SEEN$/)
      assert.deepEqual(lines[2]?.split(/ {2,}/), [key.id, 'legacy-app', '3', caller?.firstSeen, caller?.lastSeen])
    })
  })
}
