import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import { chromiumSkip, launchChromium } from '../browser.js'
import { ROOT, sqliteDatabaseEnv } from '../helper.js'
import { type ServerProcess, cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

// /docs in a real browser against a real `petstore serve`: the page renders the three operations,
// and a reader who pastes a key gets a live answer from the server that served the page. Nothing
// may be fetched from any other host: the service runs on networks without internet.

after(cleanupProcesses)

const SCREENSHOT = path.join(ROOT, 'test', 'artifacts', 'docs-page.png')

describe('the API reference in Chromium', { skip: chromiumSkip, timeout: 60_000 }, () => {
  let server: ServerProcess | undefined
  let browser: Browser | undefined
  let page: Page
  let key = ''
  const petName = `Docs Rex ${process.pid}`
  /** Every request the page tried to send elsewhere; each was aborted. */
  const elsewhere: string[] = []
  /** Console errors and uncaught exceptions, CSP violations included. */
  const pageErrors: string[] = []

  before(async () => {
    const dir = trackedTempDir('petstore-docs-')
    const env = sqliteDatabaseEnv(dir)
    server = await startServer(env, dir)
    const created = await runCli(['keys', 'create', '--name', 'docs page', '--json'], env, dir, { rejectOnFailure: true })
    key = (JSON.parse(created.stdout) as { key: string }).key
    const response = await fetch(`${server.baseUrl}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: petName, categoryId: 1, status: 'available' }),
    })
    assert.equal(response.status, 201, await response.text())

    browser = await launchChromium()
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    const origin = server.baseUrl
    await context.route('**/*', async (route) => {
      const url = route.request().url()
      if (new URL(url).origin === origin) return route.continue()
      elsewhere.push(url)
      return route.abort('blockedbyclient')
    })
    page = await context.newPage()
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text())
    })
    page.on('pageerror', (error) => pageErrors.push(error.message))
    await page.goto(`${origin}/docs`)
    await page.locator('.opblock').first().waitFor({ timeout: 10_000 })
  })

  after(async () => {
    await browser?.close()
    if (server !== undefined) await stopServer(server)
  })

  it('shows the three operations, getPet marked deprecated', async () => {
    for (const id of ['listPets', 'createPet', 'getPet']) {
      assert.equal(await operation(page, id).isVisible(), true, id)
    }
    assert.match(String(await operation(page, 'getPet').getAttribute('class')), /\bopblock-deprecated\b/)
    assert.doesNotMatch(String(await operation(page, 'listPets').getAttribute('class')), /\bopblock-deprecated\b/)
  })

  it('offers the server that served the page first', async () => {
    assert.equal(await page.locator('.servers select').inputValue(), `${server?.baseUrl}/v1`)
  })

  it('calls listPets with the pasted key on its own origin and shows the 200 with the pet', async () => {
    await page.locator('.auth-wrapper button.authorize').click()
    const dialog = page.locator('.dialog-ux')
    await dialog.locator('input').fill(key)
    await dialog.locator('button.authorize').click()
    await dialog.locator('button.btn-done').click()

    const listPets = operation(page, 'listPets')
    await listPets.locator('.opblock-summary').click()
    await listPets.locator('button.try-out__btn').click()
    const [request] = await Promise.all([
      page.waitForRequest((sent) => sent.method() === 'GET' && new URL(sent.url()).pathname === '/v1/pets'),
      listPets.locator('button.execute').click(),
    ])
    assert.equal(new URL(request.url()).origin, server?.baseUrl)
    assert.equal(await request.headerValue('authorization'), `Bearer ${key}`)

    const live = listPets.locator('.live-responses-table .response')
    await live.waitFor()
    assert.equal((await live.locator('.response-col_status').innerText()).trim(), '200')
    assert.match(await live.locator('.response-col_description pre').first().innerText(), new RegExp(petName))

    // From the top of the page to the live answer; the curl line repeats the key, so it is masked.
    // Both boxes are relative to the viewport, which Execute scrolled.
    const [row, top] = await Promise.all([live.boundingBox(), page.locator('html').boundingBox()])
    assert.ok(row !== null && top !== null)
    const bottom = row.y + row.height - top.y
    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true })
    await page.screenshot({
      path: SCREENSHOT,
      fullPage: true,
      clip: { x: 0, y: 0, width: 1280, height: Math.ceil(bottom + 4) },
      mask: [page.locator('.curl-command')],
      maskColor: '#333333',
    })
  })

  it('fetched nothing from any other host, and nothing failed on the page', () => {
    assert.deepEqual(elsewhere, [])
    assert.deepEqual(pageErrors, [])
  })
})

/** The block of one operation, by swagger-ui's id for it (tag `pets`). */
function operation(page: Page, operationId: string) {
  return page.locator(`#operations-pets-${operationId}`)
}
