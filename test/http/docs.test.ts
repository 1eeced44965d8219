import assert from 'node:assert/strict'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { describe, it } from 'node:test'
import { errorBody, useTestApp } from '../helper.js'

// The page is static and touches no storage: one engine is enough. The browser test
// (docs-browser.test.ts) proves it works; these prove what it is made of.

const SWAGGER_UI_DIST = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))

const TYPES: Record<string, RegExp> = {
  '.css': /^text\/css; charset=utf-8$/,
  '.js': /^text\/javascript; charset=utf-8$/,
  '.png': /^image\/png$/,
}

/** Every `src` and `href` in the page, in order. */
function references(html: string): string[] {
  return [...html.matchAll(/\b(?:src|href)="([^"]*)"/g)].map((match) => match[1] ?? '')
}

/** Every absolute http(s) URL in `text`. */
function absoluteUrls(text: string): string[] {
  return [...text.matchAll(/https?:\/\/[^\s"'`)]*/g)].map((match) => match[0])
}

describe('GET /docs', () => {
  const fixture = useTestApp('sqlite')
  const get = (url: string) => fixture.testApp.app.inject({ method: 'GET', url })

  it('answers the HTML page without an API key', async () => {
    const response = await get('/docs')
    assert.equal(response.statusCode, 200)
    assert.equal(response.headers['content-type'], 'text/html; charset=utf-8')
    assert.match(response.body, /<div id="swagger-ui"><\/div>/)
    assert.equal(response.headers['cache-control'], 'no-cache')
  })

  it('redirects /docs/ to /docs', async () => {
    const response = await get('/docs/')
    assert.equal(response.statusCode, 301)
    assert.equal(response.headers.location, '/docs')
  })

  it('sends a Content-Security-Policy that allows nothing but this origin', async () => {
    const csp = String((await get('/docs')).headers['content-security-policy'])
    const directives = new Map(csp.split('; ').map((directive) => [directive.split(' ')[0], directive]))
    assert.equal(directives.get('default-src'), "default-src 'none'")
    assert.equal(directives.get('script-src'), "script-src 'self'")
    assert.equal(directives.get('connect-src'), "connect-src 'self'")
    assert.equal(directives.get('img-src'), "img-src 'self' data:")
    assert.equal(directives.get('style-src'), "style-src 'self' 'unsafe-inline'")
    assert.equal(directives.get('frame-ancestors'), "frame-ancestors 'none'")
    assert.doesNotMatch(csp, /https?:|\*|unsafe-eval/)
  })

  it('has no inline script: every script element loads a file', async () => {
    const html = (await get('/docs')).body
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)]
    assert.equal(scripts.length, 2)
    for (const [, attributes, content] of scripts) {
      assert.match(attributes ?? '', /\bsrc="\/docs\/assets\//)
      assert.equal(content, '')
    }
  })

  it('serves every asset the page references, with its type and a long-lived cache', async () => {
    const urls = references((await get('/docs')).body)
    assert.equal(urls.length, 4, urls.join(', '))
    for (const url of urls) {
      assert.match(url, /^\/docs\/assets\/[a-z-]+\.[0-9a-f]{12}\.(css|js|png)$/)
      const response = await get(url)
      assert.equal(response.statusCode, 200, url)
      assert.match(String(response.headers['content-type']), TYPES[path.extname(url)] ?? /^$/, url)
      assert.equal(response.headers['cache-control'], 'public, max-age=31536000, immutable', url)
      assert.equal(response.headers['x-content-type-options'], 'nosniff', url)
      assert.ok(response.rawPayload.length > 0, url)
    }
  })

  it("serves swagger-ui-dist's own files, byte for byte", async () => {
    const urls = references((await get('/docs')).body)
    const served: Record<string, string> = { 'swagger-ui.css': 'swagger-ui.', 'swagger-ui-bundle.js': 'swagger-ui-bundle.', 'favicon-32x32.png': 'favicon.' }
    for (const [file, prefix] of Object.entries(served)) {
      const url = urls.find((candidate) => path.basename(candidate).startsWith(prefix))
      assert.ok(url !== undefined, `no reference to ${file} in ${urls.join(', ')}`)
      const response = await get(url)
      assert.ok(response.rawPayload.equals(fs.readFileSync(path.join(SWAGGER_UI_DIST, file))), file)
    }
  })

  it('names no other host in the page or its init script', async () => {
    const html = (await get('/docs')).body
    const init = references(html).find((url) => /\/docs\.[0-9a-f]+\.js$/.test(url))
    assert.ok(init !== undefined, 'no init script referenced')
    const script = (await get(init)).body
    assert.match(script, /\/v1\/openapi\.json/)
    assert.deepEqual(absoluteUrls(html), [])
    assert.deepEqual(absoluteUrls(script), [])
    assert.deepEqual(references(html).filter((url) => !url.startsWith('/docs/')), [])
  })

  it('keeps keys out of localStorage and calls the origin that served the page', async () => {
    const html = (await get('/docs')).body
    const init = references(html).find((url) => /\/docs\.[0-9a-f]+\.js$/.test(url)) ?? ''
    const script = (await get(init)).body
    assert.match(script, /persistAuthorization: false/)
    assert.match(script, /location\.origin \+ '\/v1'/)
    // swagger-ui would otherwise send the document to validator.swagger.io.
    assert.match(script, /validatorUrl: null/)
  })

  it('answers another method with 405 in the error shape, naming the allowed ones', async () => {
    for (const url of ['/docs', (references((await get('/docs')).body)[1] ?? '')]) {
      const response = await fixture.testApp.app.inject({ method: 'POST', url, payload: {} })
      assert.equal(response.statusCode, 405, url)
      assert.equal(errorBody(response).code, 'method_not_allowed')
      assert.equal(response.headers.allow, 'GET, HEAD')
    }
  })

  it('answers an unknown asset with 404 in the error shape', async () => {
    const response = await get('/docs/assets/swagger-ui.000000000000.css')
    assert.equal(response.statusCode, 404)
    assert.equal(errorBody(response).code, 'not_found')
  })

  it('is not part of the OpenAPI document', async () => {
    const document = JSON.parse((await get('/v1/openapi.json')).body) as { paths: Record<string, unknown> }
    assert.deepEqual(Object.keys(document.paths).sort(), ['/pets', '/pets/{petId}'])
    assert.doesNotMatch(JSON.stringify(document), /\/docs/)
  })
})
