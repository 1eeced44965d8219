import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { sql } from 'kysely'
import type { Scope } from '../../src/api-keys/api-keys.scopes.js'
import { GET_PET_SUNSET } from '../../src/deprecations/deprecations.policy.js'
import { createMetrics } from '../../src/http/metrics.js'
import { createApiKeysService, hashSecret } from '../../src/api-keys/api-keys.service.js'
import { loadConfig } from '../../src/config.js'
import { MIGRATION_NAMES } from '../../src/storage/migrations/names.js'
import { runMigrations } from '../../src/storage/migrations/run-migrations.js'
import { openStorage } from '../../src/repositories.js'
import { migrationsOf, withKysely } from '../migrations.js'
import { CONTRACT_ENGINES, ManualClock, createTestDatabase, errorBody, postPet, storageEngine, useTestApp } from '../helper.js'

const FORBIDDEN_CHALLENGE = (scope: Scope) => `Bearer realm="petstore", error="insufficient_scope", scope="${scope}"`
const NEW_PET = '{"name":"Scoped","categoryId":1}'

/** The key sets a key may hold, by name. */
const KEY_SETS = { 'pets:read': ['pets:read'], 'pets:write': ['pets:write'], 'pets:read,pets:write': ['pets:read', 'pets:write'] } as const

for (const engine of CONTRACT_ENGINES) {
  describe(`scoped keys on ${engine}`, () => {
    const fx = useTestApp(engine)
    const keyOf = (scopes: readonly Scope[]) => fx.testApp.createKey({ name: scopes.join(','), scopes })
    let petId = ''

    const operations = [
      { name: 'listPets', needs: 'pets:read', send: (key: string) => fx.testApp.request(key, { method: 'GET', url: '/v1/pets' }), ok: 200 },
      { name: 'getPet', needs: 'pets:read', send: (key: string) => fx.testApp.request(key, { method: 'GET', url: `/v1/pets/${petId}` }), ok: 200 },
      { name: 'createPet', needs: 'pets:write', send: (key: string) => postPet(fx.testApp, key, NEW_PET), ok: 201 },
    ] as const

    it('a key made without scopes holds both', async () => {
      const [key] = await fx.testApp.storage.apiKeys.list()
      assert.deepEqual(key?.scopes, ['pets:read', 'pets:write'])
      const created = await postPet(fx.testApp, fx.key, NEW_PET)
      assert.equal(created.statusCode, 201, created.body)
      petId = (JSON.parse(created.body) as { id: string | number }).id.toString()
    })

    for (const [label, scopes] of Object.entries(KEY_SETS)) {
      for (const operation of operations) {
        const allowed = (scopes as readonly Scope[]).includes(operation.needs)
        it(`${allowed ? 'serves' : 'refuses with 403'} ${operation.name} for a key with ${label}`, async () => {
          const key = await keyOf(scopes)
          const response = await operation.send(key)
          if (allowed) {
            assert.equal(response.statusCode, operation.ok, response.body)
            return
          }
          assert.equal(response.statusCode, 403, response.body)
          assert.deepEqual(JSON.parse(response.body), {
            code: 'forbidden',
            message: `This API key does not have the ${operation.needs} scope this operation needs.`,
            status: 403,
          })
          assert.equal(response.headers['www-authenticate'], FORBIDDEN_CHALLENGE(operation.needs))
          assert.match(String(response.headers['content-type']), /^application\/json/)
          // The key authenticated and its request was counted: it says where the key stands.
          assert.match(String(response.headers['ratelimit']), /^"per-key";r=\d+;t=\d+$/)
          assert.ok(response.headers['x-request-id'])
        })
      }
    }

    it('refuses a read-only create without writing anything', async () => {
      const reader = await keyOf(['pets:read'])
      const before = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=100' })
      const refused = await postPet(fx.testApp, reader, '{"name":"Never","categoryId":2}')
      assert.equal(refused.statusCode, 403)
      const after = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=100' })
      assert.equal(after.body, before.body)
    })

    it('authenticates first: an invalid or missing key is 401 whatever scope the operation needs', async () => {
      for (const operation of operations) {
        const invalid = await operation.send('ps_live_00000000000000000000000000000000')
        assert.equal(invalid.statusCode, 401, operation.name)
        assert.equal(invalid.headers['www-authenticate'], 'Bearer realm="petstore", error="invalid_token"')
      }
      const missing = await fx.testApp.app.inject({ method: 'POST', url: '/v1/pets', headers: { 'content-type': 'application/json' }, payload: NEW_PET })
      assert.equal(missing.statusCode, 401)
    })

    it('checks the scope before validation: a read-only key sending a broken create gets 403, not 400, 413 or 415', async () => {
      const reader = await keyOf(['pets:read'])
      const broken = [
        { headers: { 'content-type': 'application/json' }, payload: '{"name":' },
        { headers: { 'content-type': 'application/json' }, payload: '{"name":"","categoryId":0,"extra":1}' },
        { headers: { 'content-type': 'text/plain' }, payload: NEW_PET },
        { headers: { 'content-type': 'application/json' }, payload: `{"name":"${'x'.repeat(20_000)}","categoryId":1}` },
        { headers: { 'content-type': 'application/json', 'idempotency-key': '' }, payload: NEW_PET },
      ]
      for (const request of broken) {
        const response = await fx.testApp.request(reader, { method: 'POST', url: '/v1/pets', ...request })
        assert.equal(response.statusCode, 403, JSON.stringify(request.headers))
        assert.equal(errorBody(response).code, 'forbidden')
      }
      const writer = await keyOf(['pets:write'])
      for (const url of ['/v1/pets/abc', '/v1/pets?limit=0', '/v1/pets?unknown=1']) {
        const response = await fx.testApp.request(writer, { method: 'GET', url })
        assert.equal(response.statusCode, 403, url)
      }
      // With the scope, the same mistakes are the client's to fix.
      assert.equal((await fx.testApp.request(reader, { method: 'GET', url: '/v1/pets/abc' })).statusCode, 400)
      assert.equal((await postPet(fx.testApp, writer, '{"name":')).statusCode, 400)
    })

    it('stores no idempotency record for a refused create: the same key then creates with a key that may write', async () => {
      const reader = await keyOf(['pets:read'])
      const headers = { 'content-type': 'application/json', 'idempotency-key': 'scoped-once' }
      const refused = await fx.testApp.request(reader, { method: 'POST', url: '/v1/pets', headers, payload: NEW_PET })
      assert.equal(refused.statusCode, 403)
      const writer = await keyOf(['pets:write'])
      const created = await fx.testApp.request(writer, { method: 'POST', url: '/v1/pets', headers, payload: NEW_PET })
      assert.equal(created.statusCode, 201)
      assert.equal(created.headers['idempotent-replayed'], undefined)
    })

    it('logs a refused request with its key id, like any other', async () => {
      const reader = await fx.testApp.createKey({ name: 'logged', scopes: ['pets:read'] })
      const id = (await fx.testApp.storage.apiKeys.list()).find(({ name }) => name === 'logged')?.id
      assert.ok(id)
      await postPet(fx.testApp, reader, NEW_PET)
      const line = fx.testApp.logs.findLast((entry) => entry.msg === 'request')
      assert.equal(line?.status, 403)
      assert.equal(line?.keyId, id)
    })

    it('lists and rotates keys with their scopes', async () => {
      const service = createApiKeysService({ apiKeys: fx.testApp.storage.apiKeys, clock: fx.testApp.clock, environment: 'production' })
      const { key } = await service.create({ name: 'dashboard', scopes: ['pets:read'] })
      const listed = (await service.list()).find(({ id }) => id === key.id)
      assert.deepEqual(listed?.scopes, ['pets:read'])
      const rotated = await service.rotate(key.id, 0)
      assert.ok('secret' in rotated)
      assert.deepEqual(rotated.key.scopes, ['pets:read'])
      assert.equal((await postPet(fx.testApp, rotated.secret, NEW_PET)).statusCode, 403)
      assert.equal((await fx.testApp.request(rotated.secret, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
    })
  })

  describe(`getPet, deprecated, with a key without pets:read on ${engine}`, () => {
    const metrics = createMetrics({ processMetrics: false })
    const fx = useTestApp(engine, { metrics })

    it('counts the call as a call of the deprecated operation, then refuses it with 403; after the sunset it is 410 for every key', async () => {
      const writer = await fx.testApp.createKey({ name: 'writer', scopes: ['pets:write'] })
      const id = (await fx.testApp.storage.apiKeys.list()).find(({ name }) => name === 'writer')?.id ?? ''
      const refused = await fx.testApp.request(writer, { method: 'GET', url: '/v1/pets/1' })
      assert.equal(refused.statusCode, 403)
      assert.ok(refused.headers.deprecation, 'the deprecation headers come first')
      const exposition = await metrics.registry.metrics()
      assert.match(exposition, new RegExp(`^petstore_deprecated_calls_total\\{[^}]*key_id="${id}"[^}]*\\} 1$`, 'm'), exposition)
      fx.testApp.clock.ms = GET_PET_SUNSET.getTime()
      const gone = await fx.testApp.request(writer, { method: 'GET', url: '/v1/pets/1' })
      assert.equal(gone.statusCode, 410)
    })
  })

  describe(`the scopes migration on ${engine}`, () => {
    it('gives every existing key both scopes', async (t) => {
      const database = await createTestDatabase(engine)
      t.after(() => database.drop())
      const secret = 'ps_live_ExistingKeyMadeBeforeScopes0001'
      await withKysely(database.env, async (db) => {
        const before = Object.fromEntries(Object.entries(migrationsOf(engine)).filter(([name]) => name < '0005'))
        await runMigrations(db, before, [])
        await sql`INSERT INTO api_keys (id, name, prefix, environment, created_at, secret_hash)
          VALUES ('key_old', 'old', 'ps_live_Exis', 'production', 1, ${hashSecret(secret)})`.execute(db)
      })
      const storage = await openStorage(loadConfig(database.env).database)
      t.after(() => storage.close())
      assert.deepEqual((await storage.migrate()).applied, MIGRATION_NAMES[storageEngine(engine)].filter((name) => name >= '0005'))
      const service = createApiKeysService({ apiKeys: storage.apiKeys, clock: new ManualClock(), environment: 'production' })
      assert.deepEqual((await service.authenticate(secret))?.scopes, ['pets:read', 'pets:write'])
    })
  })
}

