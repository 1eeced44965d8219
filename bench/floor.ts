// The floor: the baseline's store served by Fastify with what the project's rules mandate on every
// request, each library used the cheapest way it supports, as the service uses it (bench/README.md):
// routes with JSON schemas (Fastify's default ajv), a bearer check in an onRequest hook, one info line per
// request in pino's format, serialised as the service serialises its own (src/logger.ts, infoLines) and
// written asynchronously to a file by sonic-boom in its buffer mode (floorDestination), the service's
// request counter and histogram (prom-client told at scrape time), @fastify/rate-limit per key (a max it
// never reaches), 201 on create. Nothing of the service's own: no request id header, ETag, idempotency,
// deprecation recording, load shedding or failed-auth limit. Its req/s is what the service could reach if
// its own code cost nothing: floor ÷ baseline is the libraries' price, service ÷ floor what is left to
// win. Same bytes as the service and the baselines for the four scenarios (checked).
// The store is the run's baseline's, the same module: on SQLite the seeded pets in memory
// (memory-store.ts), on PostgreSQL the service's tables through node-postgres with the baseline's
// prepared statements and pool (postgres-store.ts).
// Compiled to plain JavaScript and run without a loader by bench/setup.ts.
// Env: PORT, BENCH_KEY, BENCH_LOG_FILE (the request log), and BENCH_PETS_FILE (JSON array of the seeded
// pets) or BENCH_DATABASE_URL.
import rateLimit from '@fastify/rate-limit'
import Fastify, { type FastifyError, LogController } from 'fastify'
import pino from 'pino'
import { createMetrics } from '../src/http/metrics.js'
import { infoLines } from '../src/logger.js'
import {
  BODY_LIMIT_BYTES,
  type BaselineStore,
  JSON_TYPE,
  type NewPet,
  type PetStatus,
  STATUSES,
  andThen,
  bearerCheck,
  errorBody,
  getPetHeaders,
  required,
} from './baseline-http.js'
import { loadMemoryStore } from './memory-store.js'

const port = Number(required('PORT'))
const authorized = bearerCheck(required('BENCH_KEY'))
const publicBaseUrl = `http://localhost:${port}`
const GETPET_HEADERS = getPetHeaders(publicBaseUrl)

/** The run's store, what it is (for the log), and how to close it. */
async function openStore(): Promise<{ store: BaselineStore; describe: string; end: () => Promise<void> }> {
  const url = process.env.BENCH_DATABASE_URL
  if (url === undefined || url === '') {
    const store = loadMemoryStore(required('BENCH_PETS_FILE'))
    return { store, describe: `${store.size} pets in memory`, end: async () => {} }
  }
  // Imported here, so the SQLite floor's memory holds no database driver.
  const { POOL_SIZE, nodePostgresStore } = await import('./postgres-store.js')
  return { ...nodePostgresStore(url), describe: `PostgreSQL through node-postgres, a pool of ${POOL_SIZE}` }
}

/**
 * pino's asynchronous destination, each line handed to sonic-boom as a Buffer: the floor's cheapest. The
 * service's destination (src/logger.ts: a turn's lines written together, from the main thread) cost the
 * floor 1-3 % of its rate in the same rounds, and saved the service 10-13 % of its CPU per request.
 */
function floorDestination(file: string) {
  const destination = pino.destination({ dest: file, sync: false, contentMode: 'buffer' })
  const writeBuffer = destination.write.bind(destination) as unknown as (data: Buffer) => boolean
  destination.write = (line: string) => writeBuffer(Buffer.from(line))
  return destination
}

const logger = pino({ level: 'info' }, floorDestination(required('BENCH_LOG_FILE')))
// The request line as the service writes its own: it cost the floor less than pino's `info`.
const logRequest = infoLines(logger, 'request')

const app = Fastify({
  loggerInstance: logger,
  // Fastify's own request logging writes two lines per request; the service writes one, below.
  logController: new LogController({ disableRequestLogging: true }),
  // pino's cheapest use, as the service's: no child logger per request; the line names its reqId.
  childLoggerFactory: (logger) => logger,
  bodyLimit: BODY_LIMIT_BYTES,
  // The service's defaults, so idle connections are treated alike.
  keepAliveTimeout: 5_000,
  requestTimeout: 10_000,
})

// prom-client's cheapest use, as the service's (src/http/metrics.ts): plain numbers per series, handed
// to prom-client when scraped.
const { countRequest } = createMetrics({ processMetrics: false })

app.addHook('onRequest', (request, reply, done) => {
  if (authorized(request.headers.authorization)) return done()
  void reply.code(401).type(JSON_TYPE).send(errorBody(401, 'unauthorized', 'An API key is required.'))
})
app.addHook('onResponse', (request, reply, done) => {
  const route = request.routeOptions.url
  logRequest({ reqId: request.id, method: request.method, route: route ?? null, status: reply.statusCode, durationMs: reply.elapsedTime })
  countRequest(request.method, route ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000)
  done()
})
// Fastify's default error shape would leak through otherwise; the bodies are the service's codes.
app.setNotFoundHandler((_request, reply) => reply.code(404).type(JSON_TYPE).send(errorBody(404, 'not_found', 'No such route.')))
app.setErrorHandler((error: FastifyError, _request, reply) => {
  const status = error.validation === undefined ? (error.statusCode ?? 500) : 400
  void reply
    .code(status)
    .type(JSON_TYPE)
    .send(errorBody(status, status === 500 ? 'internal_error' : 'invalid_request', status === 500 ? 'Something went wrong.' : 'The request is not valid.'))
})

// Fastify's default ajv coerces query strings to numbers (as it must for `limit`) and removes, rather than
// refuses, unknown members: not the service's contract, but the cost of validating is the same.
const statusSchema = { type: 'string', enum: STATUSES }

/**
 * The routes, once the rate limit is registered: it adds its hook to each route declared after it. Each
 * handler returns the body (a promise of it on PostgreSQL), which Fastify sends; a failed store answers 500.
 */
async function serve({ store, describe }: { store: BaselineStore; describe: string }): Promise<void> {
  // A route's hooks run after the instance's: only a request with the key reaches the limiter, which
  // counts per key.
  await app.register(rateLimit, { max: 1_000_000_000, timeWindow: 60_000, keyGenerator: (request) => request.headers.authorization ?? '' })

  app.get<{ Querystring: { limit: number; status?: PetStatus } }>(
    '/v1/pets',
    {
      schema: {
        querystring: {
          type: 'object',
          properties: { limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 }, status: statusSchema },
          additionalProperties: false,
        },
      },
    },
    (request, reply) => {
      reply.type(JSON_TYPE)
      return store.list(request.query.limit, request.query.status)
    },
  )

  app.get<{ Params: { petId: string } }>(
    '/v1/pets/:petId',
    { schema: { params: { type: 'object', properties: { petId: { type: 'string', pattern: '^[1-9][0-9]{0,18}$' } }, required: ['petId'] } } },
    (request, reply) => {
      reply.type(JSON_TYPE)
      return andThen(store.get(request.params.petId), (body) => {
        if (body === undefined) {
          reply.code(404)
          return errorBody(404, 'not_found', 'No pet has this id.')
        }
        reply.headers(GETPET_HEADERS)
        return body
      })
    },
  )

  app.post<{ Body: NewPet }>(
    '/v1/pets',
    {
      schema: {
        body: {
          type: 'object',
          properties: {
            // Not only white space, as the service requires.
            name: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' },
            categoryId: { type: 'integer', minimum: 1 },
            status: statusSchema,
          },
          required: ['name', 'categoryId'],
          additionalProperties: false,
        },
      },
    },
    (request, reply) => {
      // Key order as the service writes it, whatever the request's.
      const { name, categoryId, status } = request.body
      reply.type(JSON_TYPE)
      return andThen(store.create(status === undefined ? { name, categoryId } : { name, categoryId, status }), ({ id, body }) => {
        reply.code(201).header('location', `${publicBaseUrl}/v1/pets/${id}`)
        return body
      })
    },
  )

  await app.listen({ port, host: '127.0.0.1' })
  console.log(`floor listening on http://127.0.0.1:${port}: Fastify, pino, prom-client, @fastify/rate-limit; ${describe}`)
}

// Bundled as CommonJS (bench/setup.ts), which has no top-level await.
const opened = openStore()
opened.then(serve).catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
process.on('SIGTERM', () => void app.close().then(() => opened.then(({ end }) => end())).then(() => process.exit(0)))
