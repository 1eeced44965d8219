import assert from 'node:assert/strict'
import { type TestContext, after, describe, it } from 'node:test'
import type { ApiKey } from '../../src/api-keys/api-keys.repository.js'
import { type ApiKeysService, createApiKeysService, type RotatedApiKey } from '../../src/api-keys/api-keys.service.js'
import type { Environment } from '../../src/config.js'
import { ENGINES, type TestApp, buildTestApp, createTestDatabase, errorBody } from '../helper.js'
import { cleanupProcesses, refusedWithin, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

const HOUR = 3_600_000
const DAY = 24 * HOUR

function keys(testApp: TestApp, environment: Environment = testApp.config.environment): ApiKeysService {
  return createApiKeysService({ apiKeys: testApp.storage.apiKeys, clock: testApp.clock, environment })
}

/** Why a rotation was refused, or undefined if it was not. */
function refusal(result: Awaited<ReturnType<ApiKeysService['rotate']>>): string | undefined {
  return 'refused' in result ? result.refused : undefined
}

function rotated(result: Awaited<ReturnType<ApiKeysService['rotate']>>): RotatedApiKey {
  if ('refused' in result) assert.fail(`rotation refused: ${result.refused}`)
  return result
}

async function listStatus(testApp: TestApp, secret: string): Promise<number> {
  return (await testApp.request(secret, { method: 'GET', url: '/v1/pets' })).statusCode
}

for (const engine of ENGINES) {
  describe(`keys rotate on ${engine}`, () => {
    // Each test gets its own app and database: the key tables are compared whole.
    const withApp = (test: (testApp: TestApp) => Promise<void>) => async (t: TestContext) => {
      const testApp = await buildTestApp(engine)
      t.after(() => testApp.close())
      await test(testApp)
    }

    it('keeps both keys working during the grace period, and only the new one after it', withApp(async (testApp) => {
      const old = await keys(testApp).create({ name: 'billing' })
      const { key, secret } = rotated(await keys(testApp).rotate(old.key.id, 24 * HOUR))
      assert.equal(await listStatus(testApp, old.secret), 200)
      assert.equal(await listStatus(testApp, secret), 200)
      testApp.clock.advance(24 * HOUR - 1)
      assert.equal(await listStatus(testApp, old.secret), 200, 'the last millisecond of grace')
      testApp.clock.advance(1)
      const refused = await testApp.request(old.secret, { method: 'GET', url: '/v1/pets' })
      assert.equal(refused.statusCode, 401)
      assert.equal(errorBody(refused).code, 'unauthorized')
      assert.equal(await listStatus(testApp, secret), 200)
      assert.notEqual(key.id, old.key.id)
    }))

    it('refuses the old key at once with a grace of 0', withApp(async (testApp) => {
      const old = await keys(testApp).create({ name: 'leaked' })
      const { secret } = rotated(await keys(testApp).rotate(old.key.id, 0))
      assert.equal(await listStatus(testApp, old.secret), 401)
      assert.equal(await listStatus(testApp, secret), 200)
    }))

    it('gives the new key the same name, environment, scopes and lifetime, and records the lineage', withApp(async (testApp) => {
      const old = await keys(testApp, 'staging').create({ name: 'partner-x', expiresInMs: 90 * DAY, scopes: ['pets:read'] })
      testApp.clock.advance(10 * DAY)
      const now = testApp.clock.now()
      // Rotated by a CLI configured for production: the key stays a staging key.
      const result = rotated(await keys(testApp, 'production').rotate(old.key.id, HOUR))
      assert.deepEqual(result.key, {
        id: result.key.id,
        name: 'partner-x',
        prefix: result.secret.slice(0, 'ps_test_'.length + 4),
        environment: 'staging',
        createdAt: now,
        expiresAt: now + 90 * DAY,
        revokedAt: null,
        lastUsedAt: null,
        replacedBy: null,
        lineage: old.key.id,
        scopes: ['pets:read'],
      } satisfies ApiKey)
      assert.match(result.secret, /^ps_test_[0-9A-Za-z]{32}$/)
      assert.deepEqual(result.old, { ...old.key, expiresAt: now + HOUR, replacedBy: result.key.id })
      assert.deepEqual(await testApp.storage.apiKeys.list(), [result.old, result.key])
    }))

    it('keeps a key that never expires as one that never expires', withApp(async (testApp) => {
      const old = await keys(testApp).create({ name: 'forever' })
      assert.equal(rotated(await keys(testApp).rotate(old.key.id, HOUR)).key.expiresAt, null)
    }))

    it('never lengthens the life of the old key: an earlier expiry than the grace stays', withApp(async (testApp) => {
      const old = await keys(testApp).create({ name: 'short', expiresInMs: HOUR })
      testApp.clock.advance(HOUR / 2)
      const result = rotated(await keys(testApp).rotate(old.key.id, 24 * HOUR))
      assert.equal(result.old.expiresAt, old.key.expiresAt)
      testApp.clock.advance(HOUR / 2)
      assert.equal(await listStatus(testApp, old.secret), 401)
      assert.equal(await listStatus(testApp, result.secret), 200)
    }))

    it('refuses an unknown, a revoked, an expired and an already rotated key, writing nothing', withApp(async (testApp) => {
      const revoked = await keys(testApp).create({ name: 'revoked' })
      await keys(testApp).revoke(revoked.key.id)
      const expired = await keys(testApp).create({ name: 'expired', expiresInMs: HOUR })
      const once = await keys(testApp).create({ name: 'once' })
      const successor = rotated(await keys(testApp).rotate(once.key.id, HOUR)).key
      testApp.clock.advance(HOUR)
      const before = await testApp.storage.apiKeys.list()

      assert.deepEqual(await keys(testApp).rotate('key_doesNotExist00', HOUR), { refused: 'unknown' })
      assert.equal(refusal(await keys(testApp).rotate(revoked.key.id, HOUR)), 'revoked')
      assert.equal(refusal(await keys(testApp).rotate(expired.key.id, HOUR)), 'expired')
      // `once` is past its grace now: expired comes first.
      assert.equal(refusal(await keys(testApp).rotate(once.key.id, HOUR)), 'expired')
      assert.deepEqual(await testApp.storage.apiKeys.list(), before)

      const inGrace = await keys(testApp).create({ name: 'in grace' })
      const next = rotated(await keys(testApp).rotate(inGrace.key.id, HOUR)).key
      assert.deepEqual(await keys(testApp).rotate(inGrace.key.id, HOUR), {
        refused: 'rotated',
        key: { ...inGrace.key, expiresAt: testApp.clock.now() + HOUR, replacedBy: next.id },
        replacedBy: next.id,
      })
      assert.equal((await testApp.storage.apiKeys.list()).length, before.length + 2)
      assert.notEqual(successor.id, next.id)
    }))

    it('lets only one of two simultaneous rotations of a key succeed', withApp(async (testApp) => {
      const old = await keys(testApp).create({ name: 'raced' })
      const results = await Promise.all([keys(testApp).rotate(old.key.id, HOUR), keys(testApp).rotate(old.key.id, HOUR)])
      const winners = results.filter((result) => !('refused' in result))
      assert.equal(winners.length, 1)
      assert.deepEqual(results.map(refusal).filter((reason) => reason !== undefined), ['rotated'])
      assert.equal((await testApp.storage.apiKeys.list()).length, 2, 'the loser inserted no key')
    }))
  })

  describe(`petstore keys rotate against a running server on ${engine}`, () => {
    it('keeps both keys working, sets the old expiry to now + --grace, and --grace 0 ends it at once', { timeout: 60_000 }, async (t) => {
      const dir = trackedTempDir('petstore-rotate-')
      const database = await createTestDatabase(engine, dir)
      const { env } = database
      const server = await startServer(env, dir)
      // One hook, as the server must stop before its database goes: t.after runs hooks in the order they were added.
      t.after(async () => {
        await stopServer(server)
        await database.drop()
      })
      const status = async (secret: string) =>
        (
          await fetch(`${server.baseUrl}/v1/pets`, {
            headers: { authorization: `Bearer ${secret}` },
            signal: AbortSignal.timeout(5_000),
          })
        ).status
      const cli = async (...args: string[]) => {
        const result = await runCli(args, env, dir)
        assert.equal(result.code, 0, result.stderr)
        return result.stdout
      }
      const original = JSON.parse(await cli('keys', 'create', '--name', 'billing', '--json')) as { id: string; key: string }
      assert.equal(await status(original.key), 200)

      const before = Date.now()
      const rotatedOut = await cli('keys', 'rotate', original.id, '--grace', '1m', '--json')
      const afterRun = Date.now()
      const second = JSON.parse(rotatedOut) as {
        id: string
        key: string
        name: string
        createdAt: string
        replaces: { id: string; expiresAt: string; replacedBy: string }
      }
      assert.equal(second.name, 'billing')
      assert.equal(second.replaces.id, original.id)
      assert.equal(second.replaces.replacedBy, second.id)
      const oldExpiry = Date.parse(second.replaces.expiresAt)
      assert.ok(oldExpiry >= before + 60_000 && oldExpiry <= afterRun + 60_000, `old key expires at ${second.replaces.expiresAt}`)
      assert.equal(oldExpiry, Date.parse(second.createdAt) + 60_000)
      assert.equal(await status(original.key), 200, 'the old key works during the grace period')
      assert.equal(await status(second.key), 200)

      const listed = JSON.parse(await cli('keys', 'list', '--json')) as { id: string; replacedBy: string | null; expiresAt: string | null }[]
      assert.deepEqual(
        listed.map((key) => [key.id, key.replacedBy, key.expiresAt]),
        [
          [original.id, second.id, second.replaces.expiresAt],
          [second.id, null, null],
        ],
      )
      const table = await cli('keys', 'list')
      assert.match(table.split('\n')[0] ?? '', / +REPLACED BY$/)
      assert.equal(table.split('\n').find((line) => line.startsWith(original.id))?.split(/ {2,}/).at(-1), second.id)

      const text = await cli('keys', 'rotate', second.id, '--grace', '0')
      const rotatedAt = Date.now()
      const third = text.trimEnd().split('\n').at(-1) ?? ''
      assert.match(third, /^ps_live_[0-9A-Za-z]{32}$/)
      assert.ok(text.includes(second.id))
      // Ended at once in the database; a server that checked the key less than a second ago trusts its
      // check until it is a second old, so every server refuses it within the 2 s a revocation takes.
      const refused = await refusedWithin(async () => ({ status: await status(second.key) }), {
        since: rotatedAt,
        withinMs: 2_000,
        after: 'keys rotate --grace 0',
      })
      assert.equal(refused.status, 401)
      assert.equal(await status(third), 200)
      assert.equal(await status(original.key), 200, 'the first key keeps its own grace period')

      const again = await runCli(['keys', 'rotate', original.id], env, dir)
      assert.equal(again.code, 1)
      assert.match(again.stderr, new RegExp(`already rotated to ${second.id}`))
      assert.equal(again.stdout, '')
      assert.doesNotMatch(again.stderr, /\n\s+at /, 'no stack trace')
    })

    it('exits 1 naming the key for an unknown, revoked or expired key, and 2 for a bad --grace', { timeout: 60_000 }, async (t) => {
      const dir = trackedTempDir('petstore-rotate-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const { env } = database
      const create = async (name: string) => {
        const result = await runCli(['keys', 'create', '--name', name, '--json'], env, dir)
        assert.equal(result.code, 0, result.stderr)
        return (JSON.parse(result.stdout) as { id: string }).id
      }
      const revoked = await create('revoked')
      assert.equal((await runCli(['keys', 'revoke', revoked], env, dir)).code, 0)
      const expired = await create('expired')
      assert.equal((await runCli(['keys', 'rotate', expired, '--grace', '0'], env, dir)).code, 0)

      for (const [id, reason] of [
        ['key_doesNotExist00', /no API key has id "key_doesNotExist00"/],
        [revoked, /was revoked at .* cannot be rotated/],
        [expired, /expired at .* cannot be rotated/],
      ] as const) {
        const result = await runCli(['keys', 'rotate', id], env, dir)
        assert.equal(result.code, 1, `${id}: ${result.stderr}`)
        assert.match(result.stderr, reason)
        assert.ok(result.stderr.includes(id))
        assert.equal(result.stdout, '')
      }
      for (const grace of ['-1', '1x', '00', '3651d', '']) {
        const result = await runCli(['keys', 'rotate', revoked, '--grace', grace], env, dir)
        assert.equal(result.code, 2, `--grace ${grace}: ${result.stderr}`)
        assert.match(result.stderr, /--grace/)
        assert.match(result.stderr, /Run "petstore keys rotate --help"/)
      }
    })
  })
}
