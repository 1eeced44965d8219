// The baseline of the benchmark: the same three operations on bare `node:http` with an in-memory
// array, the same bearer check and the same body bytes as `petstore serve`. Nothing but Node's own
// HTTP stack and JSON stands between the socket and the answer, so its throughput is the limit of Node
// on this machine, and the service is judged against it. Started by bench/run.ts; not a product.
// Env: PORT, BENCH_KEY (the one key it accepts), BENCH_PETS_FILE (JSON array of the seeded pets).
import fs from 'node:fs'
import http from 'node:http'

type PetStatus = 'available' | 'pending' | 'sold'

interface Pet {
  id: number
  name: string
  categoryId: number
  status?: PetStatus
}

const STATUSES: readonly string[] = ['available', 'pending', 'sold']
const BODY_LIMIT_BYTES = 16 * 1024
const JSON_TYPE = 'application/json; charset=utf-8'
// The headers the API contract puts on getPet (the service's defaults), so both answers weigh the same
// on the wire. Per-request extras of the service (request id, rate-limit headers) are its own cost.
const GETPET_HEADERS = {
  deprecation: `@${Date.parse('2026-11-22T00:00:00Z') / 1000}`,
  sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  link: '</v1/pets>; rel="successor-version"',
}

function required(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`baseline: ${name} is not set`)
  return value
}

const port = Number(required('PORT'))
const expectedAuthorization = `bearer ${required('BENCH_KEY')}`
const pets = JSON.parse(fs.readFileSync(required('BENCH_PETS_FILE'), 'utf8')) as Pet[]
const byId = new Map(pets.map((pet) => [pet.id, pet]))
let nextId = pets.reduce((max, pet) => Math.max(max, pet.id), 0) + 1
const publicBaseUrl = `http://localhost:${port}`

function send(response: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  response.writeHead(status, { ...headers, 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) })
  response.end(body)
}

function fail(response: http.ServerResponse, status: number, code: string, message: string): void {
  send(response, status, JSON.stringify({ code, message, status }))
}

/** The word Bearer in any case, then exactly the key. */
function authorized(request: http.IncomingMessage): boolean {
  const header = request.headers.authorization
  return (
    header !== undefined &&
    header.length === expectedAuthorization.length &&
    header.slice(7) === expectedAuthorization.slice(7) &&
    header.slice(0, 7).toLowerCase() === 'bearer '
  )
}

function listPets(query: string, response: http.ServerResponse): void {
  let limit = 20
  let status: string | undefined
  const seen = new Set<string>()
  for (const [name, value] of new URLSearchParams(query)) {
    if (seen.has(name)) return fail(response, 400, 'invalid_request', `query parameter "${name}" is repeated`)
    seen.add(name)
    if (name === 'limit' && /^[1-9][0-9]{0,2}$/.test(value) && Number(value) <= 100) limit = Number(value)
    else if (name === 'status' && STATUSES.includes(value)) status = value
    else return fail(response, 400, 'invalid_request', `query parameter "${name}" is not valid`)
  }
  const page: Pet[] = []
  for (const pet of pets) {
    if (page.length === limit) break
    if (status === undefined || pet.status === status) page.push(pet)
  }
  send(response, 200, JSON.stringify(page))
}

function getPet(idText: string, response: http.ServerResponse): void {
  const pet = /^[1-9][0-9]{0,15}$/.test(idText) ? byId.get(Number(idText)) : undefined
  if (pet === undefined) return fail(response, 404, 'not_found', 'No pet has this id.')
  send(response, 200, JSON.stringify(pet), GETPET_HEADERS)
}

function newPet(body: unknown): Omit<Pet, 'id'> | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined
  const { name, categoryId, status, ...unknown } = body as Record<string, unknown>
  if (Object.keys(unknown).length > 0) return undefined
  if (typeof name !== 'string' || name.length === 0 || name.length > 200 || name.trim() === '') return undefined
  if (typeof categoryId !== 'number' || !Number.isSafeInteger(categoryId) || categoryId < 1) return undefined
  if (status !== undefined && (typeof status !== 'string' || !STATUSES.includes(status))) return undefined
  return status === undefined ? { name, categoryId } : { name, categoryId, status: status as PetStatus }
}

function createPet(request: http.IncomingMessage, response: http.ServerResponse): void {
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
    let fields: Omit<Pet, 'id'> | undefined
    try {
      fields = newPet(JSON.parse(Buffer.concat(chunks).toString('utf8')))
    } catch {
      fields = undefined
    }
    if (fields === undefined) return fail(response, 400, 'invalid_request', 'The body is not a valid pet.')
    // Key order as the service writes it: id, name, categoryId, status.
    const pet: Pet = { id: nextId++, ...fields }
    pets.push(pet)
    byId.set(pet.id, pet)
    send(response, 201, JSON.stringify(pet), { location: `${publicBaseUrl}/v1/pets/${pet.id}` })
  })
}

const server = http.createServer((request, response) => {
  const url = request.url ?? '/'
  const mark = url.indexOf('?')
  const path = mark === -1 ? url : url.slice(0, mark)
  const query = mark === -1 ? '' : url.slice(mark + 1)
  // Routing first, then authentication, as in the service.
  const collection = path === '/v1/pets'
  const item = !collection && path.startsWith('/v1/pets/')
  if (!collection && !item) return fail(response, 404, 'not_found', 'No such route.')
  if (!authorized(request)) {
    request.resume()
    return fail(response, 401, 'unauthorized', 'An API key is required.')
  }
  if (collection && request.method === 'GET') return listPets(query, response)
  if (collection && request.method === 'POST') return createPet(request, response)
  if (item && request.method === 'GET') return getPet(path.slice('/v1/pets/'.length), response)
  request.resume()
  fail(response, 405, 'method_not_allowed', 'Method not allowed.')
})
// The service's defaults, so idle connections are treated alike.
server.keepAliveTimeout = 5_000
server.headersTimeout = 5_000
server.requestTimeout = 10_000
server.listen(port, '127.0.0.1', () => console.log(`baseline listening on http://127.0.0.1:${port} with ${pets.length} pets`))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
