// The HTTP half of every baseline of the benchmark: bare `node:http`, the same routes, query rules,
// bearer check, status codes and body bytes as `petstore serve`. Where the pets live is the store's
// business (baseline.ts: memory; baseline-postgres.ts: PostgreSQL with node-postgres or postgres.js),
// so the baselines differ in their storage only. Nothing but Node's own HTTP stack and JSON stands
// between the socket and the store. Not a product. The floor (floor.ts) takes its contract parts from
// here too: statuses, getPet's headers, the bearer check, the body limit, and the store's interface.
import http from 'node:http'
import { GET_PET_SUNSET } from '../src/deprecations/deprecations.policy.js'

export type PetStatus = 'available' | 'pending' | 'sold'

export interface NewPet {
  name: string
  categoryId: number
  status?: PetStatus
}

/** A value now (memory) or later (a database); answered without a promise when there is none. */
type Maybe<T> = T | Promise<T>

/** `then` applied to a value at once, or to a promise's value once it settles: no promise where there was none. */
export function andThen<T, R>(value: Maybe<T>, then: (result: T) => R): Maybe<R> {
  return value instanceof Promise ? value.then(then) : then(value)
}

/** Where a baseline keeps its pets; every answer is the JSON body, serialised by the store. */
export interface BaselineStore {
  /** The first page: `limit` pets in id order, of one status if given. */
  list(limit: number, status: PetStatus | undefined): Maybe<string>
  /** The pet of this id (decimal text, already checked), or undefined. */
  get(id: string): Maybe<string | undefined>
  create(pet: NewPet): Maybe<{ id: string; body: string }>
}

export const STATUSES: readonly PetStatus[] = ['available', 'pending', 'sold']
export const BODY_LIMIT_BYTES = 16 * 1024
export const JSON_TYPE = 'application/json; charset=utf-8'
// The headers the API contract puts on getPet (the service's defaults; the successor under the server's
// own public base URL, as the service's default PUBLIC_BASE_URL is), so both answers weigh the same on
// the wire. Per-request extras of the service (request id, rate-limit headers) are its own cost.
export function getPetHeaders(publicBaseUrl: string): Record<string, string> {
  return {
    deprecation: `@${Date.parse('2026-11-22T00:00:00Z') / 1000}`,
    sunset: GET_PET_SUNSET.toUTCString(),
    link: `<${publicBaseUrl}/v1/pets>; rel="successor-version"`,
  }
}

export function required(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`baseline: ${name} is not set`)
  return value
}

function send(response: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  response.writeHead(status, { ...headers, 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) })
  response.end(body)
}

/** The service's error body. */
export const errorBody = (status: number, code: string, message: string) => JSON.stringify({ code, message, status })

/** The word Bearer in any case, then exactly the key: a string compare, no lookup. */
export function bearerCheck(key: string): (header: string | undefined) => boolean {
  const expected = `bearer ${key}`
  return (header) =>
    header !== undefined && header.length === expected.length && header.slice(7) === expected.slice(7) && header.slice(0, 7).toLowerCase() === 'bearer '
}

function fail(response: http.ServerResponse, status: number, code: string, message: string): void {
  send(response, status, errorBody(status, code, message))
}

/** Calls `then` at once for a value, or once a promise settles; a failed store answers 500. */
function settle<T>(value: Maybe<T>, response: http.ServerResponse, then: (result: T) => void): void {
  if (!(value instanceof Promise)) return then(value)
  value.then(then, (error: unknown) => {
    console.error(error)
    fail(response, 500, 'internal_error', 'Something went wrong.')
  })
}

function listPets(store: BaselineStore, query: string, response: http.ServerResponse): void {
  let limit = 20
  let status: PetStatus | undefined
  const seen = new Set<string>()
  for (const [name, value] of new URLSearchParams(query)) {
    if (seen.has(name)) return fail(response, 400, 'invalid_request', `query parameter "${name}" is repeated`)
    seen.add(name)
    if (name === 'limit' && /^[1-9][0-9]{0,2}$/.test(value) && Number(value) <= 100) limit = Number(value)
    else if (name === 'status' && (STATUSES as readonly string[]).includes(value)) status = value as PetStatus
    else return fail(response, 400, 'invalid_request', `query parameter "${name}" is not valid`)
  }
  settle(store.list(limit, status), response, (body) => send(response, 200, body))
}

function getPet(store: BaselineStore, idText: string, headers: Record<string, string>, response: http.ServerResponse): void {
  if (!/^[1-9][0-9]{0,18}$/.test(idText)) return fail(response, 404, 'not_found', 'No pet has this id.')
  settle(store.get(idText), response, (body) => {
    if (body === undefined) fail(response, 404, 'not_found', 'No pet has this id.')
    else send(response, 200, body, headers)
  })
}

function newPet(body: unknown): NewPet | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined
  const { name, categoryId, status, ...unknown } = body as Record<string, unknown>
  if (Object.keys(unknown).length > 0) return undefined
  if (typeof name !== 'string' || name.length === 0 || name.length > 200 || name.trim() === '') return undefined
  if (typeof categoryId !== 'number' || !Number.isSafeInteger(categoryId) || categoryId < 1) return undefined
  if (status !== undefined && (typeof status !== 'string' || !(STATUSES as readonly string[]).includes(status))) return undefined
  return status === undefined ? { name, categoryId } : { name, categoryId, status: status as PetStatus }
}

function createPet(store: BaselineStore, publicBaseUrl: string, request: http.IncomingMessage, response: http.ServerResponse): void {
  if (!(request.headers['content-type'] ?? '').startsWith('application/json')) {
    request.resume()
    return fail(response, 415, 'unsupported_media_type', 'Send application/json.')
  }
  const chunks: Buffer[] = []
  let size = 0
  request.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size <= BODY_LIMIT_BYTES) chunks.push(chunk)
  })
  request.on('end', () => {
    if (size > BODY_LIMIT_BYTES) return fail(response, 413, 'payload_too_large', 'The body is larger than 16 KiB.')
    let fields: NewPet | undefined
    try {
      fields = newPet(JSON.parse(Buffer.concat(chunks).toString('utf8')))
    } catch {
      fields = undefined
    }
    if (fields === undefined) return fail(response, 400, 'invalid_request', 'The body is not a valid pet.')
    settle(store.create(fields), response, ({ id, body }) => send(response, 201, body, { location: `${publicBaseUrl}/v1/pets/${id}` }))
  })
}

/** Listens on PORT with the key BENCH_KEY; `describe` says what it serves, for its log. */
export function serveBaseline(store: BaselineStore, describe: string, onClose: () => Promise<void> = async () => {}): void {
  const port = Number(required('PORT'))
  const authorized = bearerCheck(required('BENCH_KEY'))
  const publicBaseUrl = `http://localhost:${port}`
  const getPetAnswerHeaders = getPetHeaders(publicBaseUrl)

  const server = http.createServer((request, response) => {
    const url = request.url ?? '/'
    const mark = url.indexOf('?')
    const path = mark === -1 ? url : url.slice(0, mark)
    const query = mark === -1 ? '' : url.slice(mark + 1)
    // Routing first, then authentication, as in the service.
    const collection = path === '/v1/pets'
    const item = !collection && path.startsWith('/v1/pets/')
    if (!collection && !item) return fail(response, 404, 'not_found', 'No such route.')
    if (!authorized(request.headers.authorization)) {
      request.resume()
      return fail(response, 401, 'unauthorized', 'An API key is required.')
    }
    if (collection && request.method === 'GET') return listPets(store, query, response)
    if (collection && request.method === 'POST') return createPet(store, publicBaseUrl, request, response)
    if (item && request.method === 'GET') return getPet(store, path.slice('/v1/pets/'.length), getPetAnswerHeaders, response)
    request.resume()
    fail(response, 405, 'method_not_allowed', 'Method not allowed.')
  })
  // The service's defaults, so idle connections are treated alike.
  server.keepAliveTimeout = 5_000
  server.headersTimeout = 5_000
  server.requestTimeout = 10_000
  server.listen(port, '127.0.0.1', () => console.log(`baseline listening on http://127.0.0.1:${port}: ${describe}`))
  process.on('SIGTERM', () => server.close(() => void onClose().then(() => process.exit(0))))
}
