import assert from 'node:assert/strict'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { isUnavailable, lostPreparedStatement } from '../../src/storage/postgres/errors.js'
import { ENGINES, buildTestApp, createTestDatabase, errorBody } from '../helper.js'
import { cleanupProcesses, runCli, trackedTempDir } from '../processes.js'

// PostgreSQL behind a pooler in transaction mode (docs/decisions/0020-postgres-behind-a-pooler.md): the
// `pgbouncer` engine runs every PostgreSQL suite with DATABASE_PREPARED_STATEMENTS=false; this file
// covers a pooler nobody declared, and `petstore copy` (whose transactions hold a cursor) through one.

after(cleanupProcesses)

/** A PostgreSQL error as node-postgres raises it, with its SQLSTATE. */
function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code })
}

describe('PostgreSQL errors of a pooler and of a server that cannot write', () => {
  const cases: [string, string, boolean][] = [
    ['26000', 'prepared statement "pets-insert" does not exist', true],
    ['42P05', 'prepared statement "pets-insert" already exists', true],
    ['08P01', 'server conn crashed?', true],
    ['08P01', 'query_wait_timeout', true],
    ['25006', 'cannot execute INSERT in a read-only transaction', true],
    ['57P01', 'terminating connection due to administrator command', true],
    ['23514', 'new row violates check constraint', false],
    ['42601', 'syntax error', false],
  ]
  for (const [code, message, unavailable] of cases) {
    it(`counts ${code} (${message}) as ${unavailable ? 'the database unavailable: 503' : 'not the database: no 503'}`, () => {
      assert.equal(isUnavailable(pgError(code, message)), unavailable)
      assert.equal(lostPreparedStatement(pgError(code, message)), code === '26000' || code === '42P05')
    })
  }
})

describe('prepared statements left on behind a pooler in transaction mode', { skip: !ENGINES.includes('pgbouncer') && 'no PgBouncer in this run' }, () => {
  it('answers every request, turns them off at the first lost one, and warns once naming DATABASE_PREPARED_STATEMENTS', async (t) => {
    const testApp = await buildTestApp('pgbouncer', { env: { DATABASE_PREPARED_STATEMENTS: 'true', RATE_LIMIT_PER_KEY: '0' } })
    t.after(() => testApp.close())
    const key = await testApp.createKey()
    const warnings = () => testApp.logs.filter((line) => String(line.msg).includes('DATABASE_PREPARED_STATEMENTS'))
    // Bursts of every statement the service names, many connections over the pooler's few server
    // connections, until the server has lost one; none of them may fail.
    for (let burst = 0; burst < 20 && warnings().length === 0; burst++) {
      const answers = await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const headers: Record<string, string> = { 'content-type': 'application/json' }
          if (i % 4 === 1) headers['idempotency-key'] = `burst-${burst}-${i}`
          if (i % 4 < 2) return testApp.request(key, { method: 'POST', url: '/v1/pets', headers, payload: `{"name":"n${i}","categoryId":${i + 1}}` })
          return testApp.request(key, { method: 'GET', url: i % 4 === 2 ? '/v1/pets?limit=5&status=available' : '/v1/pets/1' })
        }),
      )
      for (const answer of answers) {
        if (answer.statusCode >= 400 && answer.statusCode !== 404) assert.fail(`${answer.statusCode} ${JSON.stringify(errorBody(answer))}`)
      }
    }
    assert.equal(warnings().length, 1, 'one warning, naming the variable')
    assert.equal(warnings()[0]?.level, 40)
    // From then on every statement goes unnamed: a burst more, all answered.
    const after = await Promise.all(
      Array.from({ length: 40 }, (_, i) => testApp.request(key, { method: 'POST', url: '/v1/pets', headers: { 'content-type': 'application/json' }, payload: `{"name":"after${i}","categoryId":1}` })),
    )
    assert.deepEqual([...new Set(after.map((answer) => answer.statusCode))], [201])
    assert.equal(warnings().length, 1)
  })
})

describe('petstore copy through PgBouncer in transaction mode', { skip: !ENGINES.includes('pgbouncer') && 'no PgBouncer in this run' }, () => {
  it('copies a SQLite database into PostgreSQL through the pooler and back, verified on both sides', async (t) => {
    const dir = trackedTempDir('petstore-pooler-copy-')
    const source = await buildTestApp('sqlite')
    const key = await source.createKey()
    for (let i = 1; i <= 30; i++) {
      const headers = { 'content-type': 'application/json', ...(i % 3 === 0 ? { 'idempotency-key': `copy-${i}` } : {}) }
      const created = await source.request(key, { method: 'POST', url: '/v1/pets', headers, payload: `{"name":"pet ${i}","categoryId":${i}}` })
      assert.equal(created.statusCode, 201)
    }
    await source.app.close()
    const from = `sqlite://${source.config.database.engine === 'sqlite' ? source.config.database.path : ''}`
    const pooled = await createTestDatabase('pgbouncer', dir)
    t.after(async () => {
      await pooled.drop()
      await source.close()
    })
    const env = { DATABASE_PREPARED_STATEMENTS: 'false' }
    const into = await runCli(['copy', '--from', from, '--to', pooled.env.DATABASE_URL ?? ''], env, dir, { timeoutMs: 60_000 })
    assert.equal(into.code, 0, into.stderr)
    assert.match(into.stdout, /Verified: every table has the same rows and checksum on both sides\./)
    const back = await runCli(['copy', '--from', pooled.env.DATABASE_URL ?? '', '--to', `sqlite://${path.join(dir, 'back.db')}`], env, dir, { timeoutMs: 60_000 })
    assert.equal(back.code, 0, back.stderr)
    assert.match(back.stdout, /^pets +30 /m)
    assert.match(back.stdout, /Verified: every table has the same rows and checksum on both sides\./)
  })
})
