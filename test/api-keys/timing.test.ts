import assert from 'node:assert/strict'
import { createHash, randomInt } from 'node:crypto'
import { describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import pg from 'pg'
import type { Config } from '../../src/config.js'
import type { Storage } from '../../src/repositories.js'
import { DIRECT_ENGINES, type TestAppFixture, useTestApp } from '../helper.js'

/*
 * Can response times tell an attacker how much of a key is right?
 *
 * The design: the service never compares a presented key with a stored one. It computes
 * SHA-256(presented key) and looks that up (an index lookup in SQL). Whatever time the lookup
 * takes depends only on the hash, and changing one character of the key changes about half the
 * bits of the hash, unpredictably. So the most a timing attacker could learn is how many leading
 * characters of SHA-256(guess) match some stored hash, and that brings the guess no closer to the
 * key: producing a guess whose hash matches a little further is a preimage search, and even a full
 * match of the hash prefix says nothing about the key's characters. The public prefix of a key
 * (its first 12 characters, shown by `keys list`) is not a lookup path: a key with the right prefix
 * and a wrong secret costs what any wrong key costs.
 *
 * The tests check both halves: the design (one lookup, by the hash of the whole key, and no key
 * stored), and its outcome (a wrong key and a right-prefix wrong key take the same time).
 * In-process timings cannot see nanosecond differences of a string comparison; they do catch a
 * design that does more work for a key with a known prefix (a lookup by prefix, then a slow hash
 * or a second query), which is the leak that matters in practice.
 */

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const randomBase62 = (length: number): string => Array.from({ length }, () => BASE62[randomInt(62)]).join('')
const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex')

const WARM_UP = 100
const TRIES = 300
const ATTEMPTS = 3
const RELATIVE_BOUND = 0.25
const ABSOLUTE_BOUND_US = 50

// Hundreds of failed authentications from one address: the failed-auth limit would answer 429.
const NO_RATE_LIMITS = { LOG_LEVEL: 'warn', RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_FAILED_AUTH_PER_IP: '0' }

/** Wrong keys of each kind an attacker would compare, made fresh for every try. */
const WRONG_KEYS = {
  'an unknown key': (key: string) => key.slice(0, 8) + randomBase62(key.length - 8),
  'the right prefix with a wrong secret': (key: string) => key.slice(0, 12) + randomBase62(key.length - 12),
  'the key with its last character changed': (key: string) => {
    const last = key.at(-1) ?? ''
    return key.slice(0, -1) + (last === 'x' ? 'y' : 'x')
  },
}
type Kind = keyof typeof WRONG_KEYS
const KINDS = Object.keys(WRONG_KEYS) as Kind[]

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

/** Microseconds for one refused request with `key`. */
async function timeRefusal(fx: TestAppFixture, key: string): Promise<number> {
  const headers = { authorization: `Bearer ${key}` }
  const started = process.hrtime.bigint()
  const response = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets', headers })
  const elapsed = Number(process.hrtime.bigint() - started) / 1000
  assert.equal(response.statusCode, 401, response.body)
  return elapsed
}

/** Median microseconds per kind of wrong key, the kinds interleaved in a new random order each round. */
async function measure(fx: TestAppFixture): Promise<Record<Kind, number>> {
  const samples = Object.fromEntries(KINDS.map((kind) => [kind, [] as number[]])) as Record<Kind, number[]>
  for (let round = 0; round < WARM_UP + TRIES; round++) {
    const order = [...KINDS]
    for (let i = order.length - 1; i > 0; i--) {
      const j = randomInt(i + 1)
      ;[order[i], order[j]] = [order[j] as Kind, order[i] as Kind]
    }
    for (const kind of order) {
      const elapsed = await timeRefusal(fx, WRONG_KEYS[kind](fx.key))
      if (round >= WARM_UP) samples[kind].push(elapsed)
    }
  }
  return Object.fromEntries(KINDS.map((kind) => [kind, median(samples[kind])])) as Record<Kind, number>
}

interface Recorded {
  method: string
  args: unknown[]
}

/** The storage, with every call to its API-key repository recorded. */
function recordingApiKeys(storage: Storage, calls: Recorded[]): Storage {
  const apiKeys = new Proxy(storage.apiKeys, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver)
      if (typeof value !== 'function') return value
      return (...args: unknown[]): unknown => {
        calls.push({ method: String(property), args })
        return (value as (...args: unknown[]) => unknown).apply(target, args)
      }
    },
  })
  return new Proxy(storage, {
    get: (target, property, receiver): unknown => (property === 'apiKeys' ? apiKeys : Reflect.get(target, property, receiver)),
  })
}

/** Every row of the api_keys table, read with the engine's own client. */
async function apiKeyRows(database: Config['database']): Promise<Record<string, unknown>[]> {
  const sql = 'SELECT * FROM api_keys'
  if (database.engine === 'sqlite') {
    const db = new Sqlite(database.path, { readonly: true })
    try {
      return db.prepare<[], Record<string, unknown>>(sql).all()
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: database.url })
  await client.connect()
  try {
    return (await client.query<Record<string, unknown>>(sql)).rows
  } finally {
    await client.end()
  }
}

for (const engine of DIRECT_ENGINES) {
  describe(`API key timing on ${engine}`, () => {
    const fx = useTestApp(engine, { env: NO_RATE_LIMITS })

    it(`answers wrong keys, right prefix or not, in the same time (medians of ${TRIES} interleaved tries)`, async (context) => {
      // A loaded machine can disturb one measurement; a leak slows every one of them.
      const failures: string[] = []
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        const medians = await measure(fx)
        const baseline = medians['an unknown key']
        context.diagnostic(
          `attempt ${attempt}: ${KINDS.map((kind) => `${kind} ${medians[kind].toFixed(1)} µs`).join(', ')}`,
        )
        const excess = (kind: Kind): number =>
          Math.abs(medians[kind] - baseline) / Math.max(RELATIVE_BOUND * Math.min(baseline, medians[kind]), ABSOLUTE_BOUND_US)
        const outside = KINDS.filter((kind) => excess(kind) > 1)
        if (outside.length === 0) return
        failures.push(`attempt ${attempt}: ${outside.map((kind) => `${kind} ${medians[kind].toFixed(1)} µs`).join(', ')} vs ${baseline.toFixed(1)} µs`)
        // Noise does not triple the bound: such a difference is not worth measuring again.
        if (outside.some((kind) => excess(kind) > 3)) break
      }
      assert.fail(`timing tells wrong keys apart:\n${failures.join('\n')}`)
    })
  })

  describe(`API key lookup on ${engine}`, () => {
    const calls: Recorded[] = []
    const fx = useTestApp(engine, { env: NO_RATE_LIMITS, storage: (storage) => recordingApiKeys(storage, calls) })

    const present = async (key: string): Promise<number> => {
      calls.length = 0
      const response = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets', headers: { authorization: `Bearer ${key}` } })
      return response.statusCode
    }

    for (const kind of KINDS) {
      it(`looks ${kind} up once, by the SHA-256 of the whole key, never by its text or prefix`, async () => {
        const key = WRONG_KEYS[kind](fx.key)
        assert.equal(await present(key), 401)
        assert.deepEqual(calls, [{ method: 'findBySecretHash', args: [sha256(key)] }])
      })
    }

    it('looks the right key up the same way, and only records its use after that', async () => {
      assert.equal(await present(fx.key), 200)
      assert.deepEqual(calls[0], { method: 'findBySecretHash', args: [sha256(fx.key)] })
      assert.deepEqual(
        calls.slice(1).map((call) => call.method).filter((method) => method !== 'touch'),
        [],
        'a valid key caused another key lookup',
      )
      assert.ok(!JSON.stringify(calls).includes(fx.key.slice(12)), 'the secret reached the repository')
    })

    it('stores the SHA-256 of each key and nothing of its secret', async () => {
      const rows = await apiKeyRows(fx.testApp.config.database)
      assert.equal(rows.length, 1)
      const values = Object.values(rows[0] ?? {}).map(String)
      assert.ok(values.includes(sha256(fx.key)), 'no column holds the SHA-256 of the key')
      const secret = fx.key.slice(12)
      assert.deepEqual(values.filter((value) => value.includes(secret)), [], 'a column holds the secret')
    })
  })
}
