import { createHash } from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import { OPENAPI_PATH } from './openapi.js'

const DOCS_PATH = '/docs'

/**
 * Everything the page may load, and nothing from another host: the service runs on networks
 * without internet, and a page that can reach nowhere else cannot leak a pasted key either.
 * swagger-ui sets inline `style` attributes and draws icons from `data:` URIs in its CSS.
 */
const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

/*
 * The page's own script (served as a file: the CSP allows no inline script). The document lists
 * the deployments' public origins as servers, but the CSP allows only this origin (whatever
 * CORS_ORIGINS another server has), so "Try it out" must call the server that served the page:
 * its origin goes first. Keys stay in memory (persistAuthorization off): a key left in localStorage
 * outlives the tab and is readable by any script on the origin.
 */
const INIT_SCRIPT = `'use strict'
;(async function () {
  var root = document.getElementById('swagger-ui')
  try {
    var response = await fetch(${JSON.stringify(OPENAPI_PATH)}, { headers: { accept: 'application/json' } })
    if (!response.ok) throw new Error('GET ${OPENAPI_PATH} answered ' + response.status)
    var spec = await response.json()
    var here = location.origin + '/v1'
    var servers = Array.isArray(spec.servers) ? spec.servers : []
    var listed = servers.filter(function (server) { return server.url.replace(/\\/$/, '') === here })
    var others = servers.filter(function (server) { return server.url.replace(/\\/$/, '') !== here })
    spec.servers = (listed.length > 0 ? listed : [{ url: here, description: 'This server' }]).concat(others)
    window.ui = SwaggerUIBundle({
      spec: spec,
      domNode: root,
      presets: [SwaggerUIBundle.presets.apis],
      layout: 'BaseLayout',
      deepLinking: true,
      persistAuthorization: false,
      tryItOutEnabled: false,
      displayRequestDuration: true,
      validatorUrl: null
    })
  } catch (error) {
    root.textContent = 'The API description could not be loaded: ' + error.message
  }
})()
`

const HTML_HEAD = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pet Store API reference</title>`

interface Asset {
  /** Path under /docs/assets/, named after its content so that browsers may keep it forever. */
  url: string
  /** The content: in memory (the init script), or a file sent from disk at each request. */
  body: Buffer | { file: string }
  contentType: string
}

function asset(name: string, content: Buffer, body: Asset['body'], contentType: string): Asset {
  const hash = createHash('sha256').update(content).digest('hex').slice(0, 12)
  const extension = path.extname(name)
  return { url: `${DOCS_PATH}/assets/${path.basename(name, extension)}.${hash}${extension}`, body, contentType }
}

/**
 * The assets: swagger-ui-dist's files, located through Node's own resolution, and the init script.
 * The files are read once to name them, then sent from disk: kept in memory, swagger-ui's bundle
 * would cost every process its size for a page few ever open (docs/decisions/0007-docs-page.md).
 */
function loadAssets(): { css: Asset; bundle: Asset; init: Asset; favicon: Asset } {
  const folder = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  const fromDisk = (name: string, file: string, contentType: string) => {
    const location = path.join(folder, file)
    return asset(name, fs.readFileSync(location), { file: location }, contentType)
  }
  const init = Buffer.from(INIT_SCRIPT, 'utf8')
  return {
    css: fromDisk('swagger-ui.css', 'swagger-ui.css', 'text/css; charset=utf-8'),
    bundle: fromDisk('swagger-ui-bundle.js', 'swagger-ui-bundle.js', 'text/javascript; charset=utf-8'),
    init: asset('docs.js', init, init, 'text/javascript; charset=utf-8'),
    favicon: fromDisk('favicon.png', 'favicon-32x32.png', 'image/png'),
  }
}

/**
 * The interactive API reference at GET /docs: swagger-ui, rendered from the OpenAPI document,
 * served entirely by this process. No authentication (the page holds no data; the reader pastes a
 * key to call operations), and hidden from the OpenAPI document.
 */
export function registerDocsRoutes(app: FastifyInstance): void {
  const { css, bundle, init, favicon } = loadAssets()
  const html = Buffer.from(
    `${HTML_HEAD}
<link rel="icon" type="image/png" href="${favicon.url}">
<link rel="stylesheet" href="${css.url}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${bundle.url}"></script>
<script src="${init.url}"></script>
</body>
</html>
`,
    'utf8',
  )
  const hidden = { schema: { hide: true } }

  app.get(DOCS_PATH, hidden, async (_request, reply) =>
    reply
      .headers({
        'content-type': 'text/html; charset=utf-8',
        // Small, and it names the current assets: always revalidated.
        'cache-control': 'no-cache',
        'content-security-policy': DOCS_CONTENT_SECURITY_POLICY,
        'referrer-policy': 'no-referrer',
        'x-content-type-options': 'nosniff',
      })
      .send(html),
  )
  app.get(`${DOCS_PATH}/`, hidden, async (_request, reply) => reply.redirect(DOCS_PATH, 301))

  for (const { url, body, contentType } of [css, bundle, init, favicon]) {
    app.get(url, hidden, async (_request, reply) =>
      reply
        .headers({
          'content-type': contentType,
          // The name changes whenever the content does (a new swagger-ui-dist, a new init script).
          'cache-control': 'public, max-age=31536000, immutable',
          'x-content-type-options': 'nosniff',
        })
        .send(Buffer.isBuffer(body) ? body : fs.createReadStream(body.file)),
    )
  }
}
