import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import { describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import type { LightMyRequestResponse } from 'fastify'
import pg from 'pg'
import { createApiKeysService, hashSecret } from '../../src/api-keys/api-keys.service.js'
import { buildApp } from '../../src/app.js'
import type { Config } from '../../src/config.js'
import { IDEMPOTENCY_ABANDONED_AFTER_MS, IDEMPOTENCY_RETENTION_MS } from '../../src/idempotency/idempotency.policy.js'
import { createPetFingerprint } from '../../src/pets/pets.service.js'
import { createLogger } from '../../src/logger.js'
import { openStorage, type Storage } from '../../src/repositories.js'
import { CONTRACT_ENGINES, type Engine, type TestApp, errorBody, listPetsText, useTestApp } from '../helper.js'

/** POSTs a raw JSON text to /v1/pets with `Idempotency-Key: key` (or several, or none). */
function postWithKey(
  testApp: TestApp,
  apiKey: string,
  key: string | string[] | undefined,
  body: string,
): Promise<LightMyRequestResponse> {
  return testApp.request(apiKey, {
    method: 'POST',
    url: '/v1/pets',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    payload: body,
  })
}

/** How many stored pets have this name, as listPets shows them. */
async function petsNamed(testApp: TestApp, apiKey: string, name: string): Promise<number> {
  const pets = JSON.parse(await listPetsText(testApp, apiKey)) as { name: string }[]
  return pets.filter((pet) => pet.name === name).length
}

/** The Idempotency-Key values of the records in the database, read with the engine's own client. */
async function recordedKeys(database: Config['database']): Promise<string[]> {
  const sql = 'SELECT idempotency_key FROM idempotency_keys ORDER BY idempotency_key'
  if (database.engine === 'sqlite') {
    const db = new Sqlite(database.path, { readonly: true })
    try {
      return db.prepare<[], string>(sql).pluck().all()
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    return (await client.query<{ idempotency_key: string }>(sql)).rows.map((row) => row.idempotency_key)
  } finally {
    await client.end()
  }
}

/**
 * What an earlier release left when its process died between claiming a key and creating the pet:
 * it committed the claim on its own. This release never writes such a record.
 */
async function insertInProgressRecord(
  database: Config['database'],
  scope: string,
  key: string,
  fingerprint: string,
  createdAt: number,
): Promise<void> {
  await execute(
    database,
    'INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, attempt_id, created_at) VALUES ($1, $2, $3, $4, $5)',
    [scope, key, fingerprint, randomUUID(), createdAt],
  )
}

/** A failure the engine itself raises when its storage is full or gone: the client gets 503. */
function outageError(engine: Engine): Error {
  return engine === 'sqlite'
    ? new Sqlite.SqliteError('database or disk is full', 'SQLITE_FULL')
    : Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
}

/** Holds the next pet creation of a keyed request until `open()`: a request really in progress. */
function gateCreates() {
  let entered!: () => void
  let open!: () => void
  const gate = {
    armed: true,
    entered: new Promise<void>((resolve) => (entered = resolve)),
    opened: new Promise<void>((resolve) => (open = resolve)),
    open: () => open(),
  }
  const wrap = (storage: Storage): Storage => ({
    ...storage,
    pets: {
      ...storage.pets,
      async createOnce(...args) {
        if (gate.armed) {
          gate.armed = false
          entered()
          await gate.opened
        }
        return storage.pets.createOnce(...args)
      },
    },
  })
  return { gate, wrap }
}

/** The public id of an API key; for one `createKey` made, also its lineage: the scope its requests' Idempotency-Keys belong to. */
async function apiKeyIdOf(testApp: TestApp, secret: string): Promise<string> {
  const key = await testApp.storage.apiKeys.findBySecretHash(hashSecret(secret))
  assert.ok(key !== undefined)
  return key.id
}

/** Rotates the API key `secret` as `petstore keys rotate` does, with an hour's grace; returns the successor's secret. */
async function rotate(testApp: TestApp, secret: string): Promise<string> {
  const service = createApiKeysService({ apiKeys: testApp.storage.apiKeys, clock: testApp.clock, environment: testApp.config.environment })
  const rotated = await service.rotate(await apiKeyIdOf(testApp, secret), 60 * 60_000)
  assert.ok('secret' in rotated, JSON.stringify(rotated))
  return rotated.secret
}

/** Runs `statement` with the engine's own client: PostgreSQL's `$n` parameters, `?` for SQLite. */
async function execute(database: Config['database'], statement: string, values: unknown[]): Promise<void> {
  if (database.engine === 'sqlite') {
    const db = new Sqlite(database.path)
    try {
      db.prepare(statement.replace(/\$\d+/g, '?')).run(...values)
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    await client.query(statement, values)
  } finally {
    await client.end()
  }
}

const discard = new Writable({ write: (_chunk, _encoding, callback) => callback() })

describe('Idempotency-Key in the OpenAPI document', () => {
  const fx = useTestApp('sqlite')

  it('documents the header, the Idempotent-Replayed response header, 409 and 422 on createPet only', async () => {
    type Operation = {
      parameters?: { name: string; in: string; required: boolean; schema: Record<string, unknown> }[]
      responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema: { $ref?: string } }> }>
    }
    const response = await fx.testApp.app.inject({ method: 'GET', url: '/v1/openapi.json' })
    const paths = (JSON.parse(response.body) as { paths: Record<string, Record<string, Operation>> }).paths
    const createPet = paths['/pets']?.post
    assert.ok(createPet)
    const header = createPet.parameters?.find((p) => p.in === 'header')
    assert.equal(header?.name.toLowerCase(), 'idempotency-key')
    assert.equal(header.required, false)
    assert.deepEqual(header.schema, { ...header.schema, type: 'string', minLength: 1, maxLength: 255 })
    assert.ok(createPet.responses['201']?.headers?.['Idempotent-Replayed'])
    for (const status of ['409', '422']) {
      assert.match(String(createPet.responses[status]?.content?.['application/json']?.schema.$ref), /Error$/)
    }
    for (const other of [paths['/pets']?.get, paths['/pets/{petId}']?.get]) {
      assert.ok(other && !(other.parameters ?? []).some((p) => p.name.toLowerCase() === 'idempotency-key'))
      assert.equal(other.responses['409'] ?? other.responses['422'], undefined)
    }
  })
})

for (const engine of CONTRACT_ENGINES) {
  describe(`Idempotency-Key on createPet on ${engine}`, () => {
    const fx = useTestApp(engine)

    it('replays the first response, byte for byte with its Location, and stores one pet', async () => {
      const body = '{"name":"Replay","categoryId":9223372036854775807,"status":"pending"}'
      const first = await postWithKey(fx.testApp, fx.key, 'replay-1', body)
      assert.equal(first.statusCode, 201, first.body)
      assert.equal(first.headers['idempotent-replayed'], undefined)
      const id = (JSON.parse(first.body) as { id: number }).id
      assert.equal(first.headers.location, `${fx.testApp.config.publicBaseUrl}/v1/pets/${id}`)
      // The stored body is what the 201 schema serialises: the same bytes getPet sends.
      const fetched = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${id}` })
      assert.equal(first.body, fetched.body)
      assert.match(first.body, /"categoryId":9223372036854775807,/)

      for (let i = 0; i < 2; i++) {
        const again = await postWithKey(fx.testApp, fx.key, 'replay-1', body)
        assert.equal(again.statusCode, 201)
        assert.equal(again.body, first.body)
        assert.equal(again.headers.location, first.headers.location)
        assert.equal(again.headers['content-type'], first.headers['content-type'])
        assert.equal(again.headers['idempotent-replayed'], 'true')
      }
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Replay'), 1)
    })

    it('replays a body that differs only in key order, white space and escapes', async () => {
      const first = await postWithKey(fx.testApp, fx.key, 'reorder-1', '{"name":"Reorder","categoryId":7,"status":"sold"}')
      assert.equal(first.statusCode, 201, first.body)
      const again = await postWithKey(
        fx.testApp,
        fx.key,
        'reorder-1',
        '\n{ "status" : "sold",\t"categoryId": 7 ,\r\n "name": "Re\\u006frder" }\n',
      )
      assert.equal(again.statusCode, 201, again.body)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.equal(again.body, first.body)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Reorder'), 1)
    })

    it('refuses the same key with a different body with 422 idempotency_key_reused, creating nothing', async () => {
      const first = await postWithKey(fx.testApp, fx.key, 'reused-1', '{"name":"Reused","categoryId":1}')
      assert.equal(first.statusCode, 201, first.body)
      for (const other of [
        '{"name":"Reused","categoryId":2}',
        '{"name":"Reused ","categoryId":1}',
        '{"name":"Reused","categoryId":1,"status":"available"}',
        '{"name":"Other","categoryId":1}',
      ]) {
        const response = await postWithKey(fx.testApp, fx.key, 'reused-1', other)
        assert.equal(response.statusCode, 422, other)
        assert.equal(errorBody(response).code, 'idempotency_key_reused')
        assert.equal(response.headers['idempotent-replayed'], undefined)
      }
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Reused'), 1)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Other'), 0)
      // The first body still replays.
      const again = await postWithKey(fx.testApp, fx.key, 'reused-1', '{"name":"Reused","categoryId":1}')
      assert.equal(again.body, first.body)
    })

    it('treats keys as case-sensitive text and fingerprints absent and present status apart', async () => {
      assert.notEqual(
        createPetFingerprint({ name: 'x', categoryId: 1n }),
        createPetFingerprint({ name: 'x', categoryId: 1n, status: 'available' }),
      )
      const lower = await postWithKey(fx.testApp, fx.key, 'case-key', '{"name":"Case","categoryId":1}')
      const upper = await postWithKey(fx.testApp, fx.key, 'CASE-KEY', '{"name":"Case","categoryId":1}')
      assert.equal(lower.statusCode, 201)
      assert.equal(upper.statusCode, 201)
      assert.equal(upper.headers['idempotent-replayed'], undefined)
      assert.notEqual(lower.body, upper.body)
    })

    it('lets two API keys use the same Idempotency-Key independently', async () => {
      const otherKey = await fx.testApp.createKey({ name: 'other client' })
      const body = '{"name":"Two clients","categoryId":5}'
      const mine = await postWithKey(fx.testApp, fx.key, 'shared-key', body)
      const theirs = await postWithKey(fx.testApp, otherKey, 'shared-key', body)
      assert.equal(mine.statusCode, 201)
      assert.equal(theirs.statusCode, 201)
      assert.equal(theirs.headers['idempotent-replayed'], undefined)
      assert.notEqual(mine.body, theirs.body)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Two clients'), 2)
      // And a different body under the other API key is no reuse of mine.
      const different = await postWithKey(fx.testApp, otherKey, 'shared-key', '{"name":"Two clients","categoryId":6}')
      assert.equal(different.statusCode, 422)
      assert.equal((await postWithKey(fx.testApp, fx.key, 'shared-key', body)).body, mine.body)
    })

    it("replays to the rotated successor of the key that made the pet, and to the successor's successor", async () => {
      const first = await fx.testApp.createKey({ name: 'rotating client' })
      const body = '{"name":"Rotated","categoryId":4}'
      const created = await postWithKey(fx.testApp, first, 'rotate-1', body)
      assert.equal(created.statusCode, 201, created.body)

      const second = await rotate(fx.testApp, first)
      const third = await rotate(fx.testApp, second)
      for (const successor of [second, third]) {
        const again = await postWithKey(fx.testApp, successor, 'rotate-1', body)
        assert.equal(again.statusCode, 201, again.body)
        assert.equal(again.headers['idempotent-replayed'], 'true')
        assert.equal(again.body, created.body)
        assert.equal(again.headers.location, created.headers.location)
        const reused = await postWithKey(fx.testApp, successor, 'rotate-1', '{"name":"Rotated","categoryId":5}')
        assert.equal(reused.statusCode, 422, reused.body)
        assert.equal(errorBody(reused).code, 'idempotency_key_reused')
      }
      // A key still in its grace period sees what its successor made: a retry may go out with either.
      const bySuccessor = await postWithKey(fx.testApp, third, 'rotate-2', '{"name":"Rotated later","categoryId":4}')
      const byPredecessor = await postWithKey(fx.testApp, second, 'rotate-2', '{"name":"Rotated later","categoryId":4}')
      assert.equal(byPredecessor.headers['idempotent-replayed'], 'true')
      assert.equal(byPredecessor.body, bySuccessor.body)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Rotated'), 1)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Rotated later'), 1)

      // Another client, even one named alike, shares nothing with the line.
      const unrelated = await postWithKey(fx.testApp, await fx.testApp.createKey({ name: 'rotating client' }), 'rotate-1', body)
      assert.equal(unrelated.statusCode, 201, unrelated.body)
      assert.equal(unrelated.headers['idempotent-replayed'], undefined)
      assert.notEqual(unrelated.body, created.body)
    })

    it('replays to the successor once the key that made the pet is revoked', async () => {
      const first = await fx.testApp.createKey({ name: 'revoked after rotation' })
      const body = '{"name":"Revoked after rotation","categoryId":1}'
      const created = await postWithKey(fx.testApp, first, 'revoked-1', body)
      assert.equal(created.statusCode, 201, created.body)
      const successor = await rotate(fx.testApp, first)
      // What the CLI suggests to end the grace period at once.
      const service = createApiKeysService({ apiKeys: fx.testApp.storage.apiKeys, clock: fx.testApp.clock, environment: fx.testApp.config.environment })
      assert.ok(await service.revoke(await apiKeyIdOf(fx.testApp, first)))
      const again = await postWithKey(fx.testApp, successor, 'revoked-1', body)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.equal(again.body, created.body)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Revoked after rotation'), 1)
    })

    it('passes on the Idempotency-Keys of a key an older release inserted during an upgrade, without a lineage', async () => {
      const first = await fx.testApp.createKey({ name: 'older release' })
      // As an older release, which knows no lineage, would leave the key.
      await execute(fx.testApp.config.database, 'UPDATE api_keys SET lineage = NULL WHERE id = $1', [await apiKeyIdOf(fx.testApp, first)])
      const body = '{"name":"Older release","categoryId":1}'
      const created = await postWithKey(fx.testApp, first, 'older-1', body)
      assert.equal(created.statusCode, 201, created.body)
      const again = await postWithKey(fx.testApp, await rotate(fx.testApp, first), 'older-1', body)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.equal(again.body, created.body)
    })

    it('answers concurrent requests with one key with one 201, and 409 or the replay for the others', async () => {
      const body = '{"name":"Racing","categoryId":11}'
      const responses = await Promise.all(
        Array.from({ length: 12 }, () => postWithKey(fx.testApp, fx.key, 'race-1', body)),
      )
      const fresh = responses.filter((r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined)
      assert.equal(fresh.length, 1, responses.map((r) => `${r.statusCode} ${r.body}`).join('\n'))
      for (const response of responses) {
        if (response.statusCode === 409) {
          assert.equal(errorBody(response).code, 'idempotency_key_in_use')
        } else {
          assert.equal(response.statusCode, 201, response.body)
          assert.equal(response.body, fresh[0]?.body)
        }
      }
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Racing'), 1)
      const after = await postWithKey(fx.testApp, fx.key, 'race-1', body)
      assert.equal(after.headers['idempotent-replayed'], 'true')
    })

    it('refuses invalid Idempotency-Key values with 400 naming the header, and records nothing', async () => {
      const invalid: (string | string[])[] = ['', 'x'.repeat(256), 'with space', 'tab\there', 'é', 'ключ', ['a', 'b']]
      for (const value of invalid) {
        const response = await postWithKey(fx.testApp, fx.key, value, '{"name":"Bad key","categoryId":1}')
        assert.equal(response.statusCode, 400, JSON.stringify(value))
        const error = errorBody(response)
        assert.equal(error.code, 'invalid_request')
        // Sent twice, the header is refused as ambiguous before it is validated.
        const expected = Array.isArray(value) ? /idempotency-key header was sent more than once/ : /'idempotency-key' must be 1 to 255 visible ASCII characters/
        assert.match(error.message, expected)
      }
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Bad key'), 0)

      const longest = '~'.repeat(255)
      const visible = '!"#$%&\'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~'
      for (const value of [longest, visible]) {
        const response = await postWithKey(fx.testApp, fx.key, value, '{"name":"Good key","categoryId":1}')
        assert.equal(response.statusCode, 201, response.body)
      }
      const keys = await recordedKeys(fx.testApp.config.database)
      assert.ok(keys.includes(longest) && keys.includes(visible))
      assert.ok(!keys.some((key) => key === '' || key.includes(' ')))
    })

    it('does not record a request refused by validation: the key stays free', async () => {
      const invalid = await postWithKey(fx.testApp, fx.key, 'after-400', '{"name":"After 400","categoryId":"1"}')
      assert.equal(invalid.statusCode, 400)
      const valid = await postWithKey(fx.testApp, fx.key, 'after-400', '{"name":"After 400","categoryId":2}')
      assert.equal(valid.statusCode, 201, valid.body)
      assert.equal(valid.headers['idempotent-replayed'], undefined)
    })

    it('creates a pet per request without the header, as before', async () => {
      const body = '{"name":"No key","categoryId":1}'
      const first = await postWithKey(fx.testApp, fx.key, undefined, body)
      const second = await postWithKey(fx.testApp, fx.key, undefined, body)
      assert.equal(first.statusCode, 201)
      assert.equal(second.statusCode, 201)
      assert.notEqual(first.body, second.body)
      assert.equal(second.headers['idempotent-replayed'], undefined)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'No key'), 2)
    })

    it('takes over an in-progress record an earlier release left behind, after the timeout', async () => {
      const scope = await apiKeyIdOf(fx.testApp, fx.key)
      const now = fx.testApp.clock.now()
      await insertInProgressRecord(fx.testApp.config.database, scope, 'crashed-1', createPetFingerprint({ name: 'Crashed', categoryId: 1n }), now)
      const body = '{"name":"Crashed","categoryId":1}'
      const blocked = await postWithKey(fx.testApp, fx.key, 'crashed-1', body)
      assert.equal(blocked.statusCode, 409)
      assert.equal(errorBody(blocked).code, 'idempotency_key_in_use')
      const other = await postWithKey(fx.testApp, fx.key, 'crashed-1', '{"name":"Crashed","categoryId":2}')
      assert.equal(other.statusCode, 422, 'a different body is refused whatever the state of the record')

      fx.testApp.clock.advance(IDEMPOTENCY_ABANDONED_AFTER_MS)
      assert.equal((await postWithKey(fx.testApp, fx.key, 'crashed-1', body)).statusCode, 409, 'taken over too early')
      fx.testApp.clock.advance(1)
      const retried = await postWithKey(fx.testApp, fx.key, 'crashed-1', body)
      assert.equal(retried.statusCode, 201, retried.body)
      assert.equal(retried.headers['idempotent-replayed'], undefined)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Crashed'), 1)
      assert.equal((await postWithKey(fx.testApp, fx.key, 'crashed-1', body)).body, retried.body)
    })

    it('lets exactly one of many simultaneous retries take over an abandoned record', async () => {
      const scope = await apiKeyIdOf(fx.testApp, fx.key)
      const now = fx.testApp.clock.now()
      const fingerprint = createPetFingerprint({ name: 'Crashed twice', categoryId: 1n })
      await insertInProgressRecord(fx.testApp.config.database, scope, 'crashed-2', fingerprint, now)
      fx.testApp.clock.advance(IDEMPOTENCY_ABANDONED_AFTER_MS + 1)
      const body = '{"name":"Crashed twice","categoryId":1}'
      const responses = await Promise.all(Array.from({ length: 8 }, () => postWithKey(fx.testApp, fx.key, 'crashed-2', body)))
      const fresh = responses.filter((r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined)
      assert.equal(fresh.length, 1, responses.map((r) => `${r.statusCode} ${r.body}`).join('\n'))
      assert.ok(responses.every((r) => r.body === fresh[0]?.body), 'every retry is answered with the one pet')
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Crashed twice'), 1)
    })

    it('keeps records 24 hours, then prunes them and the key may be used afresh', async () => {
      const old = await postWithKey(fx.testApp, fx.key, 'expiry-old', '{"name":"Expiry old","categoryId":1}')
      assert.equal(old.statusCode, 201)
      fx.testApp.clock.advance(IDEMPOTENCY_RETENTION_MS - 60 * 60_000)
      const young = await postWithKey(fx.testApp, fx.key, 'expiry-young', '{"name":"Expiry young","categoryId":1}')
      assert.equal(young.statusCode, 201)

      // Exactly 24 hours old: still kept and replayed.
      fx.testApp.clock.advance(60 * 60_000)
      const kept = await postWithKey(fx.testApp, fx.key, 'expiry-old', '{"name":"Expiry old","categoryId":1}')
      assert.equal(kept.headers['idempotent-replayed'], 'true')
      assert.equal(kept.body, old.body)

      // Older: the next keyed request prunes it (and only it) from the database.
      fx.testApp.clock.advance(IDEMPOTENCY_RETENTION_MS / 24)
      const trigger = await postWithKey(fx.testApp, fx.key, 'expiry-trigger', '{"name":"Expiry trigger","categoryId":1}')
      assert.equal(trigger.statusCode, 201)
      const keys = await recordedKeys(fx.testApp.config.database)
      assert.ok(!keys.includes('expiry-old'), `expiry-old was not pruned: ${keys.join(', ')}`)
      assert.ok(keys.includes('expiry-young') && keys.includes('expiry-trigger'))

      const afresh = await postWithKey(fx.testApp, fx.key, 'expiry-old', '{"name":"Expiry old","categoryId":2}')
      assert.equal(afresh.statusCode, 201, afresh.body)
      assert.equal(afresh.headers['idempotent-replayed'], undefined)
      assert.notEqual(afresh.body, old.body)
      const replayedYoung = await postWithKey(fx.testApp, fx.key, 'expiry-young', '{"name":"Expiry young","categoryId":1}')
      assert.equal(replayedYoung.body, young.body)
    })

    it('uses an expired key afresh even before a prune has removed its record', async () => {
      const first = await postWithKey(fx.testApp, fx.key, 'expiry-exact', '{"name":"Expiry exact","categoryId":1}')
      assert.equal(first.statusCode, 201)
      // A prune 30 s before expiry keeps the record, and the next is not due when it expires.
      fx.testApp.clock.advance(IDEMPOTENCY_RETENTION_MS - 30_000)
      assert.equal((await postWithKey(fx.testApp, fx.key, 'expiry-prune', '{"name":"Expiry prune","categoryId":1}')).statusCode, 201)
      fx.testApp.clock.advance(30_001)
      assert.ok((await recordedKeys(fx.testApp.config.database)).includes('expiry-exact'))
      const afresh = await postWithKey(fx.testApp, fx.key, 'expiry-exact', '{"name":"Expiry exact","categoryId":2}')
      assert.equal(afresh.statusCode, 201, afresh.body)
      assert.equal(afresh.headers['idempotent-replayed'], undefined)
    })

    it('replays after a restart: records are in the database, not in the process', async (t) => {
      const body = '{"name":"Restart","categoryId":3}'
      const first = await postWithKey(fx.testApp, fx.key, 'restart-1', body)
      assert.equal(first.statusCode, 201)

      const storage = await openStorage(fx.testApp.config.database)
      await storage.migrate()
      const app = await buildApp({
        config: fx.testApp.config,
        storage,
        clock: fx.testApp.clock,
        logger: createLogger(fx.testApp.config, discard),
      })
      // One hook, as the app must close before its storage: t.after runs hooks in the order they were added.
      t.after(async () => {
        await app.close()
        await storage.close()
      })
      const again = await app.inject({
        method: 'POST',
        url: '/v1/pets',
        headers: { authorization: `Bearer ${fx.key}`, 'content-type': 'application/json', 'idempotency-key': 'restart-1' },
        payload: body,
      })
      assert.equal(again.statusCode, 201)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.equal(again.body, first.body)
      assert.equal(again.headers.location, first.headers.location)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Restart'), 1)
    })
  })

  describe(`Idempotency-Key while the first request runs on ${engine}`, () => {
    const { gate, wrap } = gateCreates()
    const fx = useTestApp(engine, { storage: wrap })

    it('answers the first request and a concurrent retry with the one pet, whichever commits first', async () => {
      const body = '{"name":"Slow","categoryId":1}'
      const first = postWithKey(fx.testApp, fx.key, 'slow-1', body)
      let during: LightMyRequestResponse
      try {
        // The first request is held before its transaction: the retry's commits first.
        await gate.entered
        during = await postWithKey(fx.testApp, fx.key, 'slow-1', body)
        assert.equal(during.statusCode, 201, during.body)
      } finally {
        gate.open()
      }
      const done = await first
      assert.equal(done.statusCode, 201, done.body)
      assert.equal(done.body, during.body)
      assert.deepEqual([during.headers['idempotent-replayed'], done.headers['idempotent-replayed']], [undefined, 'true'])
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Slow'), 1)
      const other = await postWithKey(fx.testApp, fx.key, 'slow-1', '{"name":"Slow","categoryId":2}')
      assert.equal(other.statusCode, 422)
      assert.equal(errorBody(other).code, 'idempotency_key_reused')
    })
  })

  if (engine !== 'sqlite') {
    describe(`Idempotency-Key while another transaction holds the key on ${engine}`, () => {
      const fx = useTestApp(engine)

      /** Another instance's keyed create, caught between taking the key and committing. */
      async function holdKey(key: string, body: { name: string; categoryId: bigint }) {
        const database = fx.testApp.config.database
        assert.equal(database.engine, 'postgres')
        const client = new pg.Client({ connectionString: database.url })
        await client.connect()
        await client.query('BEGIN')
        const scope = await apiKeyIdOf(fx.testApp, fx.key)
        const { rows } = await client.query<{ id: string }>(
          'INSERT INTO pets (name, category_id, created_at) VALUES ($1, $2, $3) RETURNING id',
          [body.name, body.categoryId.toString(), fx.testApp.clock.now()],
        )
        const id = rows[0]?.id ?? ''
        const response = `{"id":${id},"name":"${body.name}","categoryId":${body.categoryId}}`
        await client.query(
          `INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, attempt_id, created_at, response_status, response_location, response_body)
           VALUES ($1, $2, $3, $4, $5, 201, $6, $7)`,
          [scope, key, createPetFingerprint(body), randomUUID(), fx.testApp.clock.now(), `http://localhost/v1/pets/${id}`, response],
        )
        return {
          response,
          end: async (outcome: 'COMMIT' | 'ROLLBACK') => {
            await client.query(outcome)
            await client.end()
          },
        }
      }

      /** Whether `promise` is still pending once the server has had time to answer (no answer must come). */
      async function stillWaiting(promise: Promise<unknown>): Promise<boolean> {
        const pending = Symbol('pending')
        return (await Promise.race([promise, new Promise((resolve) => setTimeout(resolve, 300, pending))])) === pending
      }

      it('waits for the other transaction and replays its pet once it commits', async () => {
        const held = await holdKey('held-commit', { name: 'Held', categoryId: 1n })
        const retry = postWithKey(fx.testApp, fx.key, 'held-commit', '{"name":"Held","categoryId":1}')
        const other = postWithKey(fx.testApp, fx.key, 'held-commit', '{"name":"Held","categoryId":2}')
        assert.ok(await stillWaiting(retry), 'answered before the holder committed')
        await held.end('COMMIT')
        const [replayed, refused] = await Promise.all([retry, other])
        assert.equal(replayed.statusCode, 201, replayed.body)
        assert.equal(replayed.headers['idempotent-replayed'], 'true')
        assert.equal(replayed.body, held.response)
        assert.equal(refused.statusCode, 422, refused.body)
        assert.equal(await petsNamed(fx.testApp, fx.key, 'Held'), 1)
      })

      it('creates the pet itself when the other transaction rolls back', async () => {
        const held = await holdKey('held-rollback', { name: 'Rolled back', categoryId: 1n })
        const retry = postWithKey(fx.testApp, fx.key, 'held-rollback', '{"name":"Rolled back","categoryId":1}')
        assert.ok(await stillWaiting(retry), 'answered before the holder rolled back')
        await held.end('ROLLBACK')
        const created = await retry
        assert.equal(created.statusCode, 201, created.body)
        assert.equal(created.headers['idempotent-replayed'], undefined)
        assert.equal(await petsNamed(fx.testApp, fx.key, 'Rolled back'), 1)
      })

      it('answers 409 idempotency_key_in_use when the other transaction outlasts the wait', async () => {
        const held = await holdKey('held-long', { name: 'Held long', categoryId: 1n })
        try {
          const refused = await postWithKey(fx.testApp, fx.key, 'held-long', '{"name":"Held long","categoryId":1}')
          assert.equal(refused.statusCode, 409, refused.body)
          assert.equal(errorBody(refused).code, 'idempotency_key_in_use')
        } finally {
          await held.end('ROLLBACK')
        }
        assert.equal(await petsNamed(fx.testApp, fx.key, 'Held long'), 0)
      })
    })
  }

  describe(`Idempotency-Key after a failed first attempt on ${engine}`, () => {
    let failNext = true
    // The failure strikes inside the real transaction, after the pet's INSERT: it must be rolled back.
    const failing = (storage: Storage): Storage => ({
      ...storage,
      pets: {
        ...storage.pets,
        createOnce: (pet, createdAt, claim, respond) =>
          storage.pets.createOnce(pet, createdAt, claim, (created) => {
            if (!failNext) return respond(created)
            failNext = false
            throw outageError(engine)
          }),
      },
    })
    const fx = useTestApp(engine, { storage: failing })

    it('answers the 503 and frees the key: a retry with it creates the pet once', async () => {
      const body = '{"name":"Outage","categoryId":1}'
      const failed = await postWithKey(fx.testApp, fx.key, 'outage-1', body)
      assert.equal(failed.statusCode, 503, failed.body)
      assert.equal(errorBody(failed).code, 'unavailable')
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Outage'), 0, 'the pet of the failed attempt was kept')
      assert.deepEqual(await recordedKeys(fx.testApp.config.database), [])

      const retried = await postWithKey(fx.testApp, fx.key, 'outage-1', body)
      assert.equal(retried.statusCode, 201, retried.body)
      assert.equal(retried.headers['idempotent-replayed'], undefined)
      const replayed = await postWithKey(fx.testApp, fx.key, 'outage-1', body)
      assert.equal(replayed.headers['idempotent-replayed'], 'true')
      assert.equal(replayed.body, retried.body)
      assert.equal(await petsNamed(fx.testApp, fx.key, 'Outage'), 1)
    })
  })
}
