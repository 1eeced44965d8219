import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import {
  type Pet,
  type PetstoreClient,
  PetstoreError,
  UnexpectedResponseError,
  createPetstoreClient,
  parseLinkHeader,
} from '@petstore/client'
import { SCHEMA_FILE, currentOpenApiDocument, generateSchemaTypes } from '../clients/typescript/src/codegen.js'
import { parseRetryAfter } from '../clients/typescript/src/errors.js'
import { DIRECT_ENGINES, ROOT, type TestDatabase, createTestDatabase } from './helper.js'
import { type ServerProcess, cleanupProcesses, freePort, runCli, runCommand, startServer, stopServer, trackedTempDir } from './processes.js'

// The typed client in clients/typescript: its generated types against the document the service
// serves now, its Link and Retry-After parsing, and every method against real `petstore serve`
// processes on both engines.

after(cleanupProcesses)

describe('generated client types', () => {
  it('match the current OpenAPI document byte for byte', { timeout: 60_000 }, async () => {
    const expected = await generateSchemaTypes(await currentOpenApiDocument())
    const committed = fs.readFileSync(SCHEMA_FILE, 'utf8')
    if (committed !== expected) {
      const committedLines = committed.split('\n')
      const line = expected.split('\n').findIndex((text, i) => text !== committedLines[i])
      assert.fail(
        `${SCHEMA_FILE} is stale against the OpenAPI document (first difference at line ${line + 1}): ` +
          'run npm run generate:client and commit the result.',
      )
    }
  })

  it('come out different when the document changes, so the check above can fail', { timeout: 60_000 }, async () => {
    const document = await currentOpenApiDocument()
    document.components = {
      ...document.components,
      schemas: { ...document.components?.schemas, Colour: { type: 'string', enum: ['red', 'blue'] } },
    }
    const changed = await generateSchemaTypes(document)
    assert.notEqual(changed, fs.readFileSync(SCHEMA_FILE, 'utf8'))
    assert.match(changed, /Colour: "red" \| "blue";/)
  })

  it('name PetStatus as the document does, and Pet, NewPet and the status filter (of listPets and its HEAD) use it', () => {
    const text = fs.readFileSync(SCHEMA_FILE, 'utf8')
    assert.match(text, /\bPetStatus: "available" \| "pending" \| "sold";/)
    assert.equal(text.match(/\bstatus\?: components\["schemas"\]\["PetStatus"\];/g)?.length, 4)
    assert.doesNotMatch(text, /status\?: "available"/)
  })

  it('types int64 integers as bigint and other integers as number', () => {
    const text = fs.readFileSync(SCHEMA_FILE, 'utf8')
    assert.match(text, /\bid: bigint;/)
    assert.match(text, /\bcategoryId: bigint;/)
    assert.match(text, /\bpetId: bigint;/)
    assert.match(text, /\blimit\?: number;/)
  })
})

describe('Link header parsing', () => {
  it('finds each link of a header with several, whatever the commas and semicolons inside quotes and targets', () => {
    const links = parseLinkHeader(
      '</v1/pets?a=1,2>; rel="prev"; title="one, two; three", <https://x.test/v1/pets?cursor=Q1>; REL=next,' +
        '</v1/pets>; rel="successor-version"',
    )
    assert.deepEqual(
      links.map((link) => [link.target, Object.fromEntries(link.params)]),
      [
        ['/v1/pets?a=1,2', { rel: 'prev', title: 'one, two; three' }],
        ['https://x.test/v1/pets?cursor=Q1', { rel: 'next' }],
        ['/v1/pets', { rel: 'successor-version' }],
      ],
    )
  })

  it('unescapes quoted-pair characters and keeps the first of a repeated parameter', () => {
    const [link] = parseLinkHeader('<a>; title="say \\"hi\\""; rel="next prev"; rel=other')
    assert.equal(link?.params.get('title'), 'say "hi"')
    assert.equal(link?.params.get('rel'), 'next prev')
  })

  it('skips a malformed link and still reads the ones after it', () => {
    const links = parseLinkHeader('garbage; rel="next", <b>; rel=next')
    assert.deepEqual(
      links.map((link) => link.target),
      ['b'],
    )
  })
})

describe('Retry-After parsing', () => {
  it('reads delay-seconds', () => assert.equal(parseRetryAfter('5'), 5))
  it('reads an HTTP-date as the seconds until it, never negative', () => {
    const now = Date.parse('2026-11-22T12:00:00Z')
    assert.equal(parseRetryAfter('Sun, 22 Nov 2026 12:00:30 GMT', now), 30)
    assert.equal(parseRetryAfter('Sun, 22 Nov 2026 11:00:00 GMT', now), 0)
  })
  it('ignores an absent or unreadable value', () => {
    assert.equal(parseRetryAfter(null), undefined)
    assert.equal(parseRetryAfter('soon'), undefined)
  })
})

describe('client failures that are not the service', () => {
  it('lets a network failure through as what fetch throws, not as a PetstoreError', async () => {
    const port = await freePort()
    const client = createPetstoreClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'ps_live_x' })
    await assert.rejects(client.pets.listPage(), (error) => error instanceof TypeError && !(error instanceof PetstoreError))
  })

  it('reports an error response not in the service shape as UnexpectedResponseError with its body', async () => {
    const client = createPetstoreClient({
      baseUrl: 'http://proxy.invalid/v1',
      apiKey: 'ps_live_x',
      fetch: () => Promise.resolve(new Response('<html>Bad gateway</html>', { status: 502, headers: { 'content-type': 'text/html' } })),
    })
    await assert.rejects(client.pets.listPage(), (error) => {
      assert.ok(error instanceof UnexpectedResponseError)
      assert.equal(error.status, 502)
      assert.equal(error.body, '<html>Bad gateway</html>')
      return true
    })
  })

  it('does not pass an error code outside the documented enum off as a PetstoreError', async () => {
    const body = JSON.stringify({ code: 'brand_new_code', message: 'New.', status: 400 })
    const client = createPetstoreClient({
      baseUrl: 'http://proxy.invalid/v1',
      apiKey: 'ps_live_x',
      fetch: () => Promise.resolve(new Response(body, { status: 400, headers: { 'content-type': 'application/json' } })),
    })
    await assert.rejects(client.pets.listPage(), UnexpectedResponseError)
  })

  it('reports a success body that is not JSON as UnexpectedResponseError', async () => {
    const client = createPetstoreClient({
      baseUrl: 'http://proxy.invalid/v1',
      apiKey: 'ps_live_x',
      fetch: () => Promise.resolve(new Response('<html>Welcome</html>', { status: 200 })),
    })
    await assert.rejects(client.pets.listPage(), (error) => error instanceof UnexpectedResponseError && error.status === 200)
  })

  it('refuses a next link to anything but the list of pets rather than send the key there', async () => {
    const client = createPetstoreClient({
      baseUrl: 'http://proxy.invalid/v1',
      apiKey: 'ps_live_x',
      fetch: () =>
        Promise.resolve(new Response('[]', { status: 200, headers: { link: '<https://elsewhere.invalid/collect?k=1>; rel="next"' } })),
    })
    await assert.rejects(client.pets.listPage(), UnexpectedResponseError)
  })
})

/** Every pet `iterable` yields, in order. */
async function collect(iterable: AsyncIterable<Pet>): Promise<Pet[]> {
  const pets: Pet[] = []
  for await (const pet of iterable) pets.push(pet)
  return pets
}

/** The PetstoreError `promise` rejects with; fails if it resolves or rejects with anything else. */
async function petstoreError(promise: Promise<unknown>): Promise<PetstoreError> {
  try {
    await promise
  } catch (error) {
    if (error instanceof PetstoreError) return error
    throw error
  }
  assert.fail('expected a PetstoreError')
}

const BEYOND_2_53 = 9007199254740993n
// The service announces this origin in its links; nothing listens there, so following a link
// works only if the client keeps to its own baseUrl.
const PUBLIC_BASE_URL = 'https://api.petstore.invalid'
const FAILED_AUTH_PER_MINUTE = 3

for (const engine of DIRECT_ENGINES) {
  describe(`typed client against petstore serve on ${engine}`, { timeout: 60_000 }, () => {
    let database: TestDatabase | undefined
    let server: ServerProcess | undefined
    let client: PetstoreClient
    /** A client with a read-only key (`--scope pets:read`). */
    let reader: PetstoreClient
    let baseUrl = ''
    let key = ''
    /** Every pet this suite created, in creation (so id) order. */
    const created: Pet[] = []

    before(async () => {
      const dir = trackedTempDir('petstore-client-')
      database = await createTestDatabase(engine, dir)
      const env = {
        ...database.env,
        PUBLIC_BASE_URL,
        RATE_LIMIT_FAILED_AUTH_PER_IP: String(FAILED_AUTH_PER_MINUTE),
      }
      const { stdout } = await runCli(['keys', 'create', '--name', 'client test', '--json'], env, dir, { rejectOnFailure: true })
      key = (JSON.parse(stdout) as { key: string }).key
      const readOnly = await runCli(['keys', 'create', '--name', 'reader', '--scope', 'pets:read', '--json'], env, dir, { rejectOnFailure: true })
      server = await startServer(env, dir)
      baseUrl = `${server.baseUrl}/v1`
      client = createPetstoreClient({ baseUrl, apiKey: key })
      reader = createPetstoreClient({ baseUrl, apiKey: (JSON.parse(readOnly.stdout) as { key: string }).key })
    })

    after(async () => {
      if (server !== undefined) await stopServer(server)
      await database?.drop()
    })

    it('creates, gets and lists a pet whose categoryId is beyond 2^53, keeping every digit', async () => {
      const pet = await client.pets.create({ name: 'Big', categoryId: BEYOND_2_53, status: 'available' })
      created.push(pet)
      assert.equal(typeof pet.id, 'bigint')
      assert.deepEqual(pet, { id: pet.id, name: 'Big', categoryId: BEYOND_2_53, status: 'available' })
      // getPet is deprecated (the method says so in its JSDoc) but served until the sunset.
      assert.deepEqual(await client.pets.get(pet.id), pet)
      assert.deepEqual(await collect(client.pets.list()), [pet])
    })

    it('runs under plain node, without a TypeScript loader, as its README shows', async () => {
      // What a user's own script does: import the package by name, from JavaScript, no tsx.
      const script = [
        "import { createPetstoreClient, PetstoreError } from '@petstore/client'",
        'const client = createPetstoreClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.KEY })',
        "const pet = await client.pets.create({ name: 'Plain node', categoryId: 9007199254740993n })",
        'const error = await client.pets.listPage({ limit: 0 }).catch((caught) => caught)',
        'console.log(JSON.stringify([typeof pet.id, String(pet.categoryId), error instanceof PetstoreError && error.code]))',
      ].join('\n')
      const run = await runCommand(process.execPath, ['--input-type=module', '--eval', script], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', BASE_URL: baseUrl, KEY: key },
        rejectOnFailure: true,
      })
      assert.equal(run.stdout, '["bigint","9007199254740993","invalid_request"]\n')
      const [pet] = (await client.pets.listPage({ limit: 100 })).pets.filter((one) => one.name === 'Plain node')
      assert.ok(pet !== undefined)
      created.push(pet)
    })

    it('creates a pet without status that comes back without a status member', async () => {
      const pet = await client.pets.create({ name: 'Plain', categoryId: 1n })
      created.push(pet)
      assert.deepEqual(Object.keys(pet).sort(), ['categoryId', 'id', 'name'])
    })

    it('answers a replayed idempotent create with the first pet and creates nothing more', async () => {
      const idempotencyKey = `client-test-${engine}-1`
      const first = await client.pets.create({ name: 'Once', categoryId: 7n, status: 'pending' }, { idempotencyKey })
      created.push(first)
      const replay = await client.pets.create({ name: 'Once', categoryId: 7n, status: 'pending' }, { idempotencyKey })
      assert.deepEqual(replay, first)
      assert.deepEqual(await collect(client.pets.list({ limit: 100 })), created)
    })

    it('surfaces a 400 as a PetstoreError with code invalid_request, the status and the request id', async () => {
      const error = await petstoreError(client.pets.create({ name: 'Zero', categoryId: 0n }))
      assert.equal(error.code, 'invalid_request')
      assert.equal(error.status, 400)
      assert.match(error.message, /categoryId/)
      assert.match(error.requestId ?? '', /^[0-9a-f-]{36}$/)
      const badLimit = await petstoreError(client.pets.listPage({ limit: 0 }))
      assert.deepEqual([badLimit.code, badLimit.status], ['invalid_request', 400])
    })

    it('surfaces a reused idempotency key with another body as idempotency_key_reused 422', async () => {
      const error = await petstoreError(
        client.pets.create({ name: 'Other', categoryId: 7n }, { idempotencyKey: `client-test-${engine}-1` }),
      )
      assert.deepEqual([error.code, error.status], ['idempotency_key_reused', 422])
    })

    it('surfaces a create with a read-only key as forbidden 403; the same key lists', async () => {
      const error = await petstoreError(reader.pets.create({ name: 'Never', categoryId: 1n }))
      assert.deepEqual([error.code, error.status], ['forbidden', 403])
      assert.match(error.message, /pets:write/)
      assert.ok(Array.isArray((await reader.pets.listPage()).pets))
    })

    it('surfaces a 404 from get as not_found', async () => {
      const error = await petstoreError(client.pets.get(BEYOND_2_53))
      assert.deepEqual([error.code, error.status], ['not_found', 404])
    })

    it('iterates five pets two at a time, following the Link pages, in id order', async () => {
      for (const [i, status] of (['sold', 'pending', 'sold', 'available', 'pending'] as const).entries()) {
        created.push(await client.pets.create({ name: `Paged ${i}`, categoryId: BigInt(i + 1), status }))
      }
      const first = await client.pets.listPage({ limit: 2 })
      assert.equal(first.pets.length, 2)
      assert.notEqual(first.next, undefined, 'the first page of several has a next link')
      assert.deepEqual(await collect(client.pets.list({ limit: 2 })), created)
    })

    it('iterates only the pets of a status, two at a time', async () => {
      const pending = created.filter((pet) => pet.status === 'pending')
      assert.equal(pending.length, 3)
      assert.deepEqual(await collect(client.pets.list({ status: 'pending', limit: 2 })), pending)
    })

    it('follows links to the service it talks to although they name PUBLIC_BASE_URL', async () => {
      const { response } = await client.raw.GET('/pets', { params: { query: { limit: 1 } }, parseAs: 'text' })
      assert.match(response.headers.get('link') ?? '', new RegExp(`^<${PUBLIC_BASE_URL}/v1/pets\\?`))
      assert.equal((await collect(client.pets.list({ limit: 1 }))).length, created.length)
    })

    it('stops at the last page: a page ending the list has no next', async () => {
      const page = await client.pets.listPage({ limit: 100 })
      assert.deepEqual(page, { pets: created, next: undefined })
    })

    it('surfaces a wrong key as unauthorized 401', async () => {
      const stranger = createPetstoreClient({ baseUrl, apiKey: 'ps_live_notakeynotakeynotakeynotakey' })
      const error = await petstoreError(stranger.pets.listPage())
      assert.deepEqual([error.code, error.status, error.retryAfter], ['unauthorized', 401, undefined])
    })

    // Last: once over the limit, this address is refused whatever key it sends, until the minute ends.
    it('surfaces too many failed authentications as rate_limited 429 with retryAfter seconds', async () => {
      const stranger = createPetstoreClient({ baseUrl, apiKey: 'ps_live_notakeynotakeynotakeynotakey' })
      let error: PetstoreError | undefined
      for (let i = 0; i <= FAILED_AUTH_PER_MINUTE && error?.status !== 429; i++) {
        error = await petstoreError(stranger.pets.listPage())
      }
      assert.deepEqual([error?.code, error?.status], ['rate_limited', 429])
      assert.ok((error?.retryAfter ?? 0) >= 1 && (error?.retryAfter ?? 0) <= 60, `retryAfter ${error?.retryAfter}`)
    })
  })
}
