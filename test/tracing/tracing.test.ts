import assert from 'node:assert/strict'
import { hash } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import type net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, describe, it } from 'node:test'
import { createKey } from '../../scripts/petstore-process.js'
import { ENGINES, createTestDatabase } from '../helper.js'
import { cleanupProcesses, freePort, recordModules, startServer, stopServer, trackedTempDir } from '../processes.js'

after(cleanupProcesses)

// A real `petstore serve` exports to an OTLP/HTTP receiver started here. The receiver asks for the
// JSON encoding (OTEL_EXPORTER_OTLP_PROTOCOL=http/json), which it can read with JSON.parse; one test
// checks that the default, protobuf, reaches it too. Spans are read after SIGTERM, which flushes them,
// rather than after the batch processor's 5 s delay.

interface ExportedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  kind: number
  scope: string
  attributes: Record<string, unknown>
  resource: Record<string, unknown>
}

interface Receiver {
  endpoint: string
  spans: ExportedSpan[]
  /** Every export request as received: path, content type and raw body. */
  requests: { path: string; contentType: string; body: Buffer }[]
  close(): Promise<void>
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number }
type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined

function attributes(list: OtlpAttributes): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue]))
}

/** An OTLP/HTTP receiver on 127.0.0.1 that answers every export 200 and keeps what it got. */
async function startReceiver(): Promise<Receiver> {
  const receiver: Receiver = { endpoint: '', spans: [], requests: [], close: () => Promise.resolve() }
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const body = Buffer.concat(chunks)
      const contentType = request.headers['content-type'] ?? ''
      receiver.requests.push({ path: request.url ?? '', contentType, body })
      if (contentType.startsWith('application/json')) {
        const payload = JSON.parse(body.toString('utf8')) as {
          resourceSpans: {
            resource: { attributes: OtlpAttributes }
            scopeSpans: {
              scope: { name: string }
              spans: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes: OtlpAttributes }[]
            }[]
          }[]
        }
        for (const { resource, scopeSpans } of payload.resourceSpans) {
          for (const { scope, spans } of scopeSpans) {
            for (const span of spans) {
              receiver.spans.push({
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId ?? '',
                name: span.name,
                kind: span.kind,
                scope: scope.name,
                attributes: attributes(span.attributes),
                resource: attributes(resource.attributes),
              })
            }
          }
        }
      }
      response.writeHead(200, { 'content-type': contentType }).end(contentType.startsWith('application/json') ? '{}' : '')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  receiver.endpoint = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`
  receiver.close = async () => {
    server.closeAllConnections()
    server.close()
    await once(server, 'close')
  }
  return receiver
}

/** A collector that accepts connections and never answers: the slowest there is. */
async function startSilentCollector(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const server = http.createServer(() => {})
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    async close() {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

const SPAN_KIND_SERVER = 2
const SPAN_KIND_CLIENT = 3
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT_ID = '00f067aa0ba902b7'

for (const engine of ENGINES) {
  describe(`tracing on ${engine}`, () => {
    it('exports a server span per request with route and status, continuing a client traceparent, with database child spans, and logs the trace id', { timeout: 60_000 }, async (t) => {
      const receiver = await startReceiver()
      t.after(() => receiver.close())
      const dir = trackedTempDir('petstore-tracing-')
      const database = await createTestDatabase(engine, dir)
      t.after(() => database.drop())
      const key = await createKey({ PATH: process.env.PATH ?? '', ...database.env }, 'tracing')
      const metricsPort = await freePort()
      const server = await startServer(
        {
          ...database.env,
          LOG_LEVEL: 'info',
          METRICS_PORT: String(metricsPort),
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        },
        dir,
      )
      const auth = { authorization: `Bearer ${key}` }
      const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      assert.equal(scrape.status, 200)
      await scrape.arrayBuffer()

      const created = await fetch(`${server.baseUrl}/v1/pets`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` },
        body: JSON.stringify({ name: 'Traced secret-body-name', categoryId: 7 }),
      })
      assert.equal(created.status, 201)
      const { id } = (await created.json()) as { id: number }
      const fetched = await fetch(`${server.baseUrl}/v1/pets/${id}`, { headers: auth })
      assert.equal(fetched.status, 200)
      await fetched.arrayBuffer()
      // A key where none belongs, and a wrong key: neither may reach a span.
      const misplaced = await fetch(`${server.baseUrl}/v1/pets/${key}?cursor=${key}`, { headers: { authorization: `Bearer ${key}x` } })
      assert.equal(misplaced.status, 401)
      await misplaced.arrayBuffer()

      const exit = await stopServer(server)
      assert.deepEqual(exit, { code: 0, signal: null }, server.output())

      const servers = receiver.spans.filter((span) => span.kind === SPAN_KIND_SERVER)
      const continued = servers.find((span) => span.traceId === TRACE_ID)
      assert.ok(continued, `no server span in trace ${TRACE_ID}: ${JSON.stringify(servers)}`)
      assert.equal(continued.parentSpanId, PARENT_ID)
      assert.equal(continued.attributes['http.route'], '/v1/pets')
      assert.equal(continued.attributes['http.response.status_code'], 201)
      assert.equal(continued.resource['service.name'], 'petstore')

      // Scrapes of the metrics listener are not traced.
      assert.deepEqual(servers.filter((span) => span.attributes['url.path'] === '/metrics'), [])

      // Without a traceparent, a trace of its own, named by the route template.
      const own = servers.find((span) => span.attributes['http.route'] === '/v1/pets/:petId' && span.attributes['http.response.status_code'] === 200)
      assert.ok(own, `no server span for getPet: ${JSON.stringify(servers)}`)
      assert.notEqual(own.traceId, TRACE_ID)
      assert.equal(own.parentSpanId, '')
      assert.equal(own.name, 'GET /v1/pets/:petId')

      // The database work of each request, as children within its trace.
      const system = engine === 'sqlite' ? 'sqlite' : 'postgresql'
      for (const trace of [continued.traceId, own.traceId]) {
        const database = receiver.spans.filter((span) => span.traceId === trace && span.kind === SPAN_KIND_CLIENT)
        assert.ok(
          database.some((span) => span.attributes['db.system.name'] === system && span.parentSpanId !== ''),
          `no ${system} span in trace ${trace}: ${JSON.stringify(receiver.spans.filter((span) => span.traceId === trace))}`,
        )
      }

      // The request lines carry the trace of their request.
      const lines = server
        .output()
        .split('\n')
        .filter((line) => line.includes('"msg":"request"'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
      const createLine = lines.find((line) => line.route === '/v1/pets' && line.status === 201)
      assert.equal(createLine?.traceId, TRACE_ID)
      assert.equal(createLine?.spanId, continued.spanId)
      assert.equal(lines.find((line) => line.route === '/v1/pets/:petId' && line.status === 200)?.traceId, own.traceId)

      // No key, no Authorization, no body, anywhere in what was exported.
      const exported = receiver.requests.map(({ body }) => body.toString('utf8')).join('\n')
      assert.ok(exported.includes(TRACE_ID))
      assert.doesNotMatch(exported, new RegExp(key.slice(8)))
      assert.doesNotMatch(exported, /Bearer|authorization/i)
      assert.doesNotMatch(exported, /secret-body-name/)
      // Nor a statement's parameters: the key's hash is the lookup's.
      assert.ok(!exported.includes(hash('sha256', key, 'hex')), 'a span carries the hash of the key')
      const statements = receiver.spans.filter((span) => span.attributes['db.system.name'] === 'postgresql' && span.attributes['db.query.text'] !== undefined)
      if (engine !== 'sqlite') assert.ok(statements.length > 0, 'no PostgreSQL statement recorded')
      for (const span of statements) assert.deepEqual(Object.keys(span.attributes).filter((name) => /parameter|values/.test(name)), [])
    })
  })
}

describe('tracing', () => {
  it('exports protobuf, the default protocol, to OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces', { timeout: 60_000 }, async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const dir = trackedTempDir('petstore-tracing-')
    const server = await startServer({ DATABASE_URL: `sqlite://${dir}/petstore.db`, OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.endpoint}/` }, dir)
    const response = await fetch(`${server.baseUrl}/v1/pets`, { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } })
    assert.equal(response.status, 401)
    await response.arrayBuffer()
    assert.deepEqual(await stopServer(server), { code: 0, signal: null }, server.output())

    assert.ok(receiver.requests.length > 0, 'nothing exported')
    for (const request of receiver.requests) {
      assert.equal(request.path, '/v1/traces')
      assert.equal(request.contentType, 'application/x-protobuf')
    }
    // A trace id is a 16-byte field of the message, written as is.
    assert.ok(receiver.requests.some(({ body }) => body.includes(Buffer.from(TRACE_ID, 'hex'))))
  })

  it('traces the requests of --workers workers', { timeout: 60_000 }, async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const dir = trackedTempDir('petstore-tracing-')
    const env = { DATABASE_URL: `sqlite://${dir}/petstore.db` }
    const key = await createKey({ PATH: process.env.PATH ?? '', ...env }, 'workers')
    const server = await startServer(
      { ...env, LOG_LEVEL: 'info', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      dir,
      ['--workers', '2'],
    )
    // /healthz answers once one worker listens; a worker stopped while it still starts exits 1.
    const deadline = Date.now() + 30_000
    while (server.output().split('Server listening at http://127.0.0.1').length - 1 < 2) {
      assert.ok(Date.now() < deadline, `both workers did not listen within 30 s:\n${server.output()}`)
      await sleep(100)
    }
    for (let i = 0; i < 10; i++) {
      const response = await fetch(`${server.baseUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      assert.equal(response.status, 200)
      await response.arrayBuffer()
    }
    assert.deepEqual(await stopServer(server, 'SIGTERM', 20_000), { code: 0, signal: null }, server.output())
    const served = receiver.spans.filter((span) => span.kind === SPAN_KIND_SERVER && span.attributes['http.route'] === '/v1/pets')
    assert.equal(served.length, 10, JSON.stringify(receiver.spans))
    // Served by the workers, not by the primary.
    assert.ok(served.every((span) => span.resource['process.pid'] !== undefined && Number(span.resource['process.pid']) !== server.pid))
  })

  for (const collector of ['unreachable (a closed port)', 'silent (never answers)'] as const) {
    it(`serves every request and shuts down promptly when the collector is ${collector}`, { timeout: 90_000 }, async (t) => {
      let endpoint: string
      if (collector === 'silent (never answers)') {
        const silent = await startSilentCollector()
        t.after(() => silent.close())
        endpoint = silent.endpoint
      } else {
        endpoint = `http://127.0.0.1:${await freePort()}`
      }
      const dir = trackedTempDir('petstore-tracing-')
      const env = { DATABASE_URL: `sqlite://${dir}/petstore.db` }
      const key = await createKey({ PATH: process.env.PATH ?? '', ...env }, 'unreachable')
      const server = await startServer({ ...env, RATE_LIMIT_PER_KEY: '0', OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }, dir)

      // 1,000 requests, of 4 or 5 spans each, fill the export queue (2,048 spans) and go on past it.
      let slowest = 0
      let next = 0
      const statuses = new Map<number, number>()
      const client = async () => {
        while (next < 1_000) {
          const i = next++
          const started = performance.now()
          const response = await fetch(`${server.baseUrl}/v1/pets`, {
            method: i % 5 === 0 ? 'POST' : 'GET',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: i % 5 === 0 ? JSON.stringify({ name: `pet ${i}`, categoryId: 1 }) : undefined,
          })
          await response.arrayBuffer()
          slowest = Math.max(slowest, performance.now() - started)
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
        }
      }
      await Promise.all(Array.from({ length: 10 }, client))
      assert.deepEqual([...statuses.keys()].sort(), [200, 201], JSON.stringify([...statuses]))
      // Generous: a request that waited for an export would wait its 5 s timeout.
      assert.ok(slowest < 2_000, `the slowest request took ${Math.round(slowest)} ms`)

      const stopping = performance.now()
      assert.deepEqual(await stopServer(server), { code: 0, signal: null }, server.output())
      // The drain (1 s) and at most 2 s of flushing, with room for a busy machine.
      const took = performance.now() - stopping
      assert.ok(took < 6_000, `shutdown took ${Math.round(took)} ms`)
    })
  }

  it('loads no OpenTelemetry module when no endpoint is set', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-tracing-')
    const modules = recordModules(dir)
    const env = { DATABASE_URL: `sqlite://${dir}/petstore.db` }
    const key = await createKey({ PATH: process.env.PATH ?? '', ...env }, 'untraced')
    const run = async (extra: Record<string, string>) => {
      modules.reset()
      const server = await startServer({ ...env, ...extra }, dir, [], { nodeArgs: modules.nodeArgs })
      for (const url of ['/v1/pets', '/v1/pets/1', '/nowhere']) {
        const response = await fetch(`${server.baseUrl}${url}`, { headers: { authorization: `Bearer ${key}` } })
        await response.arrayBuffer()
      }
      assert.deepEqual(await stopServer(server), { code: 0, signal: null }, server.output())
      return modules.read()
    }
    const opentelemetry = /@opentelemetry\/|@fastify\/otel\/|in-the-middle\/|\/dist\/tracing\//
    // prom-client has always required the API package (for exemplars, which the service does not use):
    // its no-op facade, which the SDK would be registered into, is all of OpenTelemetry that may load.
    const promClientsApi = /^file:\S+\/node_modules\/@opentelemetry\/api\/\S+ file:\S+\/node_modules\/(prom-client|@opentelemetry\/api)\//

    const untraced = await run({})
    // The hook saw the serving process load its modules: fastify and the SQLite driver.
    assert.ok(untraced.some((line) => line.includes('/node_modules/fastify/')))
    assert.ok(untraced.some((line) => line.includes('/node_modules/better-sqlite3/')))
    assert.deepEqual(untraced.filter((line) => opentelemetry.test(line) && !promClientsApi.test(line)), [])

    // And it would have seen them: with an endpoint (a closed port), they are there.
    const traced = await run({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` })
    assert.ok(traced.some((url) => url.includes('/node_modules/@opentelemetry/sdk-trace/')))
  })
})
