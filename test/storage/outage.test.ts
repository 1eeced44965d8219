import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { type EmbeddedServer, TEST_POSTGRES_URL, startEmbeddedPostgres } from '../postgres.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir, until } from '../processes.js'

// A running service whose PostgreSQL server stops and starts again: it must say "unavailable"
// quickly meanwhile, stay alive, and serve again on its own once the database is back. The
// database is a server of this file alone: the shared one of the other suites is never stopped.

after(cleanupProcesses)

// The pool waits 5 s for a connection; an answer during the outage may take that, and a little more.
const OUTAGE_ANSWER_MS = 6_000
const RECOVERY_LIMIT_MS = 20_000

interface Answer {
  status: number
  headers: Headers
  body: string
  ms: number
}

const skip = TEST_POSTGRES_URL === undefined || TEST_POSTGRES_URL === '' ? 'PETSTORE_TEST_DATABASE_URL is not set: these tests are of the PostgreSQL engine only' : false

describe('a server whose PostgreSQL stops and starts again', { skip, timeout: 40_000 }, () => {
  let database: EmbeddedServer | undefined
  let service: ServerProcess | undefined
  let key = ''
  /** Every 201 body the service sent. */
  const acknowledged: string[] = []
  /** The name of every create sent, whatever its answer. */
  const sentNames = new Set<string>()
  let before201: string | undefined
  let outagePostName = ''
  let stoppedAt = 0

  function running(): ServerProcess {
    assert.ok(service !== undefined, 'the service did not start')
    return service
  }

  async function send(method: 'GET' | 'POST', url: string, body?: object): Promise<Answer> {
    const started = Date.now()
    const response = await fetch(`${running().baseUrl}${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(OUTAGE_ANSWER_MS + 2_000),
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, body: text, ms: Date.now() - started }
  }

  async function createPet(name: string, status?: 'available' | 'pending' | 'sold'): Promise<Answer> {
    sentNames.add(name)
    const answer = await send('POST', '/v1/pets', { name, categoryId: 42, ...(status === undefined ? {} : { status }) })
    if (answer.status === 201) acknowledged.push(answer.body)
    return answer
  }

  /** The answer a request gets while the database is gone: the catalogue's 503, with a hint when to retry. */
  function assertUnavailable(answer: Answer, what: string): void {
    assert.equal(answer.status, 503, `${what}: ${answer.status} ${answer.body}`)
    assert.match(answer.headers.get('content-type') ?? '', /^application\/json/, what)
    assert.match(answer.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/, `${what}: Retry-After`)
    const body = JSON.parse(answer.body) as { code: unknown; message: unknown; status: unknown }
    assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'], what)
    assert.equal(body.code, 'unavailable', what)
    assert.equal(body.status, 503, what)
    assert.ok(typeof body.message === 'string' && body.message !== '', what)
    // 5xx messages never carry internals: no driver error, no address of the database.
    assert.doesNotMatch(body.message, /ECONNREFUSED|127\.0\.0\.1|postgres|terminat/i, what)
    assert.ok(answer.ms < OUTAGE_ANSWER_MS, `${what} took ${answer.ms} ms`)
  }

  interface Writer {
    /** How many of its creates were answered `status` so far. */
    answered(status: number): number
    stop(): Promise<{ answers: Answer[]; problems: string[] }>
  }
  let writer: Writer | undefined

  /** One create after another, every 50 ms, until stopped: traffic that meets the outage at whatever moment. */
  function startWriter(): Writer {
    const answers: Answer[] = []
    const problems: string[] = []
    let stopping = false
    const loop = (async () => {
      // Once told to stop, it still runs until it is answered 201: a request sent just before
      // PostgreSQL came back may be answered 503 after the recovery was seen elsewhere.
      for (let n = 0; n < 200 && !(stopping && answers.at(-1)?.status === 201); n++) {
        const what = `writer create #${n}`
        try {
          const answer = await createPet(what)
          answers.push(answer)
          if (answer.status !== 201) assertUnavailable(answer, what)
        } catch (error) {
          problems.push(`${what}: ${(error as Error).message}`)
        }
        await sleep(50)
      }
    })()
    return {
      answered: (status) => answers.filter((answer) => answer.status === status).length,
      async stop() {
        stopping = true
        await loop
        return { answers, problems }
      },
    }
  }

  /** The id of a pet body; the ids of this file stay far below 2^53. */
  function idOf(body: string | undefined): number {
    assert.ok(body !== undefined, 'no pet was created before the outage')
    return (JSON.parse(body) as { id: number }).id
  }

  function assertAlive(): void {
    assert.equal(running().child.exitCode, null, running().output())
    assert.equal(running().child.signalCode, null, running().output())
  }

  before(async () => {
    database = await startEmbeddedPostgres()
    const env = { DATABASE_URL: database.url }
    const dir = trackedTempDir('petstore-outage-')
    const created = await runCli(['keys', 'create', '--name', 'outage test'], env, dir, { rejectOnFailure: true })
    key = created.stdout.trimEnd().split('\n').at(-1) ?? ''
    service = await startServer(env, dir)
  })

  after(async () => {
    await writer?.stop()
    if (service !== undefined) await stopServer(service).catch(() => undefined)
    await database?.destroy()
  })

  it('creates a pet while PostgreSQL is up', async () => {
    const answer = await createPet('Before the outage', 'available')
    assert.equal(answer.status, 201, answer.body)
    before201 = answer.body
  })

  it('answers listPets, createPet and getPet with 503 unavailable and Retry-After, readyz with 503 and healthz with 200, while PostgreSQL is down', async (t) => {
    const steady = startWriter()
    writer = steady
    await until(() => steady.answered(201) > 0, 10_000, () => 'the writer created nothing before the outage')
    await database?.stop()
    stoppedAt = Date.now()
    const petId = idOf(before201)

    assertUnavailable(await send('GET', '/v1/pets'), 'GET /v1/pets')
    outagePostName = 'Sent during the outage'
    assertUnavailable(await createPet(outagePostName, 'pending'), 'POST /v1/pets')
    assertUnavailable(await send('GET', `/v1/pets/${petId}`), `GET /v1/pets/${petId}`)
    assertUnavailable(await send('GET', '/readyz'), 'GET /readyz')

    const health = await send('GET', '/healthz')
    assert.equal(health.status, 200, health.body)
    assert.deepEqual(JSON.parse(health.body), { status: 'ok' })

    // The first requests may have met pooled connections from before the outage; this one must try a new one.
    const again = await send('GET', '/v1/pets')
    assertUnavailable(again, 'GET /v1/pets, again')
    t.diagnostic(`503 during the outage after ${again.ms} ms`)
    assertAlive()
    // Down for a while, not an instant: the steady writer must meet the outage more than once.
    await until(() => steady.answered(503) >= 2, 10_000, () => 'the writer did not meet the outage twice')
  })

  it('serves again without a restart once PostgreSQL is back, with the pet from before the outage unchanged', async (t) => {
    await database?.start()
    const readyAt = Date.now()
    let answer = await send('GET', '/v1/pets')
    while (answer.status !== 200 && Date.now() - readyAt < RECOVERY_LIMIT_MS) {
      assertUnavailable(answer, 'GET /v1/pets while PostgreSQL starts')
      await sleep(100)
      answer = await send('GET', '/v1/pets')
    }
    const recoveredAfter = Date.now() - readyAt
    assert.equal(answer.status, 200, `still ${answer.status} ${recoveredAfter} ms after PostgreSQL started: ${answer.body}`)
    t.diagnostic(`listPets answered 200 again ${recoveredAfter} ms after PostgreSQL was ready, ${Date.now() - stoppedAt} ms after it stopped`)

    const ready = await send('GET', '/readyz')
    assert.equal(ready.status, 200, ready.body)
    const petId = idOf(before201)
    const fetched = await send('GET', `/v1/pets/${petId}`)
    assert.equal(fetched.status, 200, fetched.body)
    assert.equal(fetched.body, before201)

    const created = await createPet('After the outage', 'sold')
    assert.equal(created.status, 201, created.body)
    assertAlive()
  })

  it('answers a steady stream of creates across the outage with 201 or 503 only, and 201 again once PostgreSQL is back', async (t) => {
    const { answers, problems } = await (writer?.stop() ?? Promise.resolve({ answers: [], problems: ['the writer never ran'] }))
    assert.deepEqual(problems, [])
    const count = (status: number) => answers.filter((answer) => answer.status === status).length
    t.diagnostic(`a steady writer got ${count(201)} × 201 and ${count(503)} × 503 across the outage`)
    assert.ok(count(503) > 0, 'the writer met no outage')
    assert.equal(answers[0]?.status, 201, 'the writer started after the outage began')
    assert.equal(answers.at(-1)?.status, 201, 'the writer stopped before PostgreSQL was back')
  })

  it('loses no create that was answered 201, and keeps none sent while PostgreSQL was down', async () => {
    assert.ok(acknowledged.length >= 2, `only ${acknowledged.length} creates were acknowledged`)
    for (const body of acknowledged) {
      const id = idOf(body)
      const fetched = await send('GET', `/v1/pets/${id}`)
      assert.equal(fetched.status, 200, `acknowledged pet ${id} is gone: ${fetched.body}`)
      assert.equal(fetched.body, body, `acknowledged pet ${id} changed`)
    }
    const list = await send('GET', '/v1/pets?limit=100')
    assert.equal(list.status, 200, list.body)
    const stored = (JSON.parse(list.body) as { id: number; name: string }[]).map((pet) => ({ ...pet, body: JSON.stringify(pet) }))
    assert.ok(stored.length < 100, 'the list may be cut short: the check below needs every pet in it')
    const storedBodies = new Set(stored.map((pet) => pet.body))
    assert.deepEqual(acknowledged.filter((body) => !storedBodies.has(body)), [], 'acknowledged but not listed')
    // A create answered 503 at the instant PostgreSQL stopped may have committed; one sent while it was down may not.
    const names = stored.map((pet) => pet.name)
    assert.equal(new Set(names).size, names.length, `a create was stored twice: ${list.body}`)
    assert.deepEqual(names.filter((name) => !sentNames.has(name)), [], 'stored but never sent')
    assert.ok(!names.includes(outagePostName), `"${outagePostName}" was answered 503 yet stored`)
  })
})
