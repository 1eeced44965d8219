import assert from 'node:assert/strict'
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import { chromiumSkip, launchChromium } from '../browser.js'
import { sqliteDatabaseEnv } from '../helper.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

// A browser app on another origin, in a real Chromium against a real `petstore serve`: a page served
// from one local origin calls the service on another. Listed in CORS_ORIGINS, its calls succeed and it
// reads what the service exposes; from an origin not listed, the browser itself blocks them.

after(cleanupProcesses)

/** The key the browser app holds, made as an operator would: read-only, as a dashboard's should be. */
const BROWSER_APP_KEY_ARGS = ['keys', 'create', '--name', 'browser app', '--scope', 'pets:read', '--json']

/** What the page's `fetch` gave: the answer as the page can read it, or the error it threw. */
type Outcome =
  | { ok: true; status: number; body: string; headers: Record<string, string | null> }
  | { ok: false; error: string }

/** The headers the page tries to read: the exposed ones, and one that is not (`X-Request-Id`). */
const READ_HEADERS = ['etag', 'link', 'ratelimit', 'ratelimit-policy', 'retry-after', 'x-request-id', 'content-type']

/** A page server: one blank HTML page at `/`, on its own origin. */
interface PageServer {
  origin: string
  close(): Promise<void>
}

async function servePage(): Promise<PageServer> {
  const server = http.createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Pet app</title><p>Pet app</p>')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

/** `fetch(url)` from inside `page`, with the key, as the app's own script would call it. */
/** `body`: POSTed as JSON (a request that needs a preflight, as every call with a key does). */
function fetchFromPage(page: Page, url: string, key: string, body?: string): Promise<Outcome> {
  return page.evaluate(
    async ({ url, key, body, names }): Promise<Outcome> => {
      try {
        const response = await fetch(
          url,
          body === undefined
            ? { headers: { authorization: `Bearer ${key}` } }
            : { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body },
        )
        const headers = Object.fromEntries(names.map((name) => [name, response.headers.get(name)]))
        return { ok: true, status: response.status, body: await response.text(), headers }
      } catch (error) {
        return { ok: false, error: String(error) }
      }
    },
    { url, key, body, names: READ_HEADERS },
  )
}

function answered(outcome: Outcome, what: string): Extract<Outcome, { ok: true }> {
  assert.ok(outcome.ok, `${what}: ${outcome.ok ? '' : outcome.error}`)
  return outcome
}

describe('a browser app on another origin', { skip: chromiumSkip, timeout: 90_000 }, () => {
  let server: ServerProcess | undefined
  let browser: Browser | undefined
  const pageServers: PageServer[] = []
  let listed: PageServer
  let unlisted: PageServer
  let listedPage: Page
  let unlistedPage: Page
  let key = ''
  const petIds: string[] = []
  /** Console errors of each page, by origin: the browser says there why it blocked a call. */
  const consoleErrors = new Map<string, string[]>()

  async function openPage(at: PageServer): Promise<Page> {
    if (browser === undefined) throw new Error('no browser')
    const page = await (await browser.newContext()).newPage()
    const errors: string[] = []
    consoleErrors.set(at.origin, errors)
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text())
    })
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(`${at.origin}/`)
    return page
  }

  before(async () => {
    listed = await servePage()
    unlisted = await servePage()
    pageServers.push(listed, unlisted)
    const dir = trackedTempDir('petstore-cors-')
    const env = { ...sqliteDatabaseEnv(dir), CORS_ORIGINS: listed.origin }
    server = await startServer(env, dir)

    // The pets are made with a key of their own: the browser app's key only reads.
    const seeding = await runCli(['keys', 'create', '--name', 'seeding', '--json'], env, dir, { rejectOnFailure: true })
    const writer = (JSON.parse(seeding.stdout) as { key: string }).key
    for (const name of ['Rex', 'Tom']) {
      const response = await fetch(`${server.baseUrl}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `Cors ${name}`, categoryId: 1 }),
      })
      const text = await response.text()
      assert.equal(response.status, 201, text)
      petIds.push(String(/"id":(\d+)/.exec(text)?.[1]))
    }
    const created = await runCli(BROWSER_APP_KEY_ARGS, env, dir, { rejectOnFailure: true })
    key = (JSON.parse(created.stdout) as { key: string }).key

    browser = await launchChromium()
    listedPage = await openPage(listed)
    unlistedPage = await openPage(unlisted)
  })

  after(async () => {
    await browser?.close()
    if (server !== undefined) await stopServer(server)
    await Promise.all(pageServers.map((page) => page.close()))
  })

  it('lists pets from a listed origin and reads the exposed headers, and only those', async () => {
    const list = answered(await fetchFromPage(listedPage, `${server?.baseUrl}/v1/pets?limit=1`, key), 'listPets')
    assert.equal(list.status, 200, list.body)
    assert.match(list.body, /"name":"Cors Rex"/)
    assert.match(String(list.headers.etag), /^"[^"]+"$/)
    assert.match(String(list.headers.link), /rel="next"/)
    assert.match(String(list.headers.ratelimit), /^"per-key";r=\d+;t=\d+$/)
    assert.match(String(list.headers['ratelimit-policy']), /^"per-key";q=\d+;w=60$/)
    assert.match(String(list.headers['content-type']), /^application\/json/)
    // Sent, but not exposed: the browser hides it from the page.
    assert.equal(list.headers['x-request-id'], null)
  })

  it('gets a pet from a listed origin, and reads an error answer with its body', async () => {
    const pet = answered(await fetchFromPage(listedPage, `${server?.baseUrl}/v1/pets/${petIds[1]}`, key), 'getPet')
    assert.equal(pet.status, 200, pet.body)
    assert.match(pet.body, /"name":"Cors Tom"/)
    assert.match(String(pet.headers.etag), /^"[^"]+"$/)

    const missing = answered(await fetchFromPage(listedPage, `${server?.baseUrl}/v1/pets/999999`, key), 'getPet of no pet')
    assert.equal(missing.status, 404)
    assert.equal((JSON.parse(missing.body) as { code: string }).code, 'not_found')

    const refused = answered(await fetchFromPage(listedPage, `${server?.baseUrl}/v1/pets`, 'ps_live_not-a-key'), 'wrong key')
    assert.equal(refused.status, 401)
    assert.equal((JSON.parse(refused.body) as { code: string }).code, 'unauthorized')
    assert.deepEqual(consoleErrors.get(listed.origin)?.filter((line) => /CORS/.test(line)), [])
  })

  it('reads the 403 forbidden of a create made with its read-only key', async () => {
    const refused = answered(await fetchFromPage(listedPage, `${server?.baseUrl}/v1/pets`, key, '{"name":"Never","categoryId":1}'), 'createPet')
    assert.equal(refused.status, 403, refused.body)
    assert.deepEqual(JSON.parse(refused.body), {
      code: 'forbidden',
      message: 'This API key does not have the pets:write scope this operation needs.',
      status: 403,
    })
    assert.deepEqual(consoleErrors.get(listed.origin)?.filter((line) => /CORS/.test(line)), [])
  })

  it('is blocked by the browser from an origin that is not listed, and the page learns nothing', async () => {
    for (const path of ['/v1/pets', `/v1/pets/${petIds[0]}`]) {
      const outcome = await fetchFromPage(unlistedPage, `${server?.baseUrl}${path}`, key)
      assert.equal(outcome.ok, false, `${path} was readable: ${JSON.stringify(outcome)}`)
      if (!outcome.ok) assert.match(outcome.error, /TypeError: Failed to fetch/)
    }
    const said = consoleErrors.get(unlisted.origin) ?? []
    assert.ok(
      said.some((line) => line.includes(`from origin '${unlisted.origin}' has been blocked by CORS policy`)),
      `Chromium did not say it blocked the calls for CORS: ${JSON.stringify(said)}`,
    )
  })

  it('answers the preflight of createPet for the listed origin only', async () => {
    const ask = (origin: string) =>
      fetch(`${server?.baseUrl}/v1/pets`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization,content-type,idempotency-key',
        },
      })
    const allowed = await ask(listed.origin)
    assert.equal(allowed.status, 204)
    assert.equal(allowed.headers.get('access-control-allow-origin'), listed.origin)
    assert.equal(allowed.headers.get('access-control-allow-methods'), 'GET, HEAD, POST')
    assert.equal(allowed.headers.get('access-control-allow-headers'), 'Authorization, Content-Type, Idempotency-Key')
    assert.equal(allowed.headers.get('access-control-max-age'), '7200')
    assert.equal(await allowed.text(), '')

    const refused = await ask(unlisted.origin)
    assert.equal(refused.status, 405)
    assert.equal(refused.headers.get('allow'), 'GET, HEAD, POST')
    assert.deepEqual([...refused.headers.keys()].filter((name) => name.startsWith('access-control-')), [])
    assert.equal(((await refused.json()) as { code: string }).code, 'method_not_allowed')
  })
})
