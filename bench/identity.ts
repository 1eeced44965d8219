// The byte-identity check: before anything is measured, the service and every server it is compared with
// must answer the same requests with the same status and the same bytes, or the ratio between them would
// compare two different things.
import { SCENARIOS, petBody } from './scenarios.js'

/** getOne bodies compared between the servers before measuring, spread over the seeded ids. */
const IDENTITY_SAMPLE = 50

interface Answer {
  status: number
  body: Buffer
}

/** The headers the contract puts on getPet, which both servers must send alike. */
const GETPET_CONTRACT_HEADERS = ['deprecation', 'sunset', 'link'] as const

/** A server whose answers must be the service's bytes: a baseline or the floor. */
interface Reference {
  name: string
  url: string
}

/**
 * The answers of the service and of every reference must be the same bytes, or a comparison measures two
 * different things. The service answers each request once and makes one pet, so references with a store of
 * their own all continue from the same last id. `sharedDatabase`: all write to the same tables (PostgreSQL),
 * so their creates get different ids.
 */
export async function assertIdenticalBodies(service: string, references: Reference[], key: string, ids: string[], sharedDatabase: boolean): Promise<void> {
  const headers = { authorization: `Bearer ${key}` }
  const step = Math.max(1, Math.floor(ids.length / IDENTITY_SAMPLE))
  const sampleIds = ids.filter((_, index) => index % step === 0).slice(0, IDENTITY_SAMPLE)
  const paths = [
    ...SCENARIOS.filter((scenario) => scenario.method === 'GET' && !scenario.path.includes('{id}')).map((scenario) => scenario.path),
    ...sampleIds.map((id) => `/v1/pets/${id}`),
  ]
  const differences = new Map<Reference, string[]>(references.map((reference) => [reference, []]))
  for (const requestPath of paths) {
    const [fromService, ...fromReferences] = await Promise.all(
      [service, ...references.map((reference) => reference.url)].map(async (origin) => {
        const response = await fetch(origin + requestPath, { headers })
        return { status: response.status, body: Buffer.from(await response.arrayBuffer()), headers: response.headers }
      }),
    )
    if (fromService === undefined) continue
    references.forEach((reference, index) => {
      const fromReference = fromReferences[index]
      const found = differences.get(reference)
      if (fromReference === undefined || found === undefined) return
      if (fromService.status !== 200 || fromReference.status !== 200 || !fromService.body.equals(fromReference.body)) {
        found.push(describeDifference(`GET ${requestPath}`, fromService, fromReference, reference.name))
      }
      for (const name of requestPath.includes('?') ? [] : GETPET_CONTRACT_HEADERS) {
        // Each server names its successor under its own origin, as each names its creates' Location.
        const [inService, inReference] = [ownOrigin(fromService.headers.get(name), service), ownOrigin(fromReference.headers.get(name), reference.url)]
        if (inService !== inReference) found.push(`GET ${requestPath}: header ${name}: service ${String(inService)}, ${reference.name} ${String(inReference)}`)
      }
    })
  }
  const created = await create(service, headers, petBody(0, 'identity'))
  for (const reference of references) differences.get(reference)?.push(...(await compareCreates(service, created, reference, headers, sharedDatabase)))
  const failed = [...differences].filter(([, found]) => found.length > 0)
  if (failed.length > 0) {
    throw new Error(
      failed
        .map(([reference, found]) => `the ${reference.name} does not answer with the service's bytes, so the ratio would mean nothing:\n${found.slice(0, 5).join('\n')}`)
        .join('\n'),
    )
  }
  for (const reference of references) console.log(`bench: the service and the ${reference.name} send the same bytes for ${paths.length} GETs and 1 POST`)
}

/** A header with the server's own origin (as http://localhost:<port>) written as `<origin>`. */
function ownOrigin(value: string | null, url: string): string | null {
  return value?.replaceAll(`http://localhost:${new URL(url).port}`, '<origin>') ?? null
}

interface Created extends Answer {
  location: string
  id: string
}

async function create(origin: string, headers: Record<string, string>, body: string): Promise<Created> {
  const response = await fetch(`${origin}/v1/pets`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body })
  const bytes = Buffer.from(await response.arrayBuffer())
  const location = response.headers.get('location') ?? ''
  return { status: response.status, body: bytes, location, id: /^\{"id":(\d+),/.exec(bytes.toString('utf8'))?.[1] ?? '' }
}

/**
 * The reference's create against the service's. On separate stores the ids match too, since both continue
 * from the same last id. On one shared database the reference's create gets a later id: then each server
 * must answer a GET of the other's new pet with exactly the bytes of the other's 201, and each Location must
 * name its own id.
 */
async function compareCreates(
  service: string,
  created: Created,
  reference: Reference,
  headers: Record<string, string>,
  sharedDatabase: boolean,
): Promise<string[]> {
  const createdReference = await create(reference.url, headers, petBody(0, 'identity'))
  const differences: string[] = []
  const locationPath = (answer: Created, origin: string) => new URL(answer.location, origin).pathname
  const location = `\n  Location: service ${created.location}, ${reference.name} ${createdReference.location}`
  if (created.status !== 201 || createdReference.status !== 201) return [describeDifference('POST /v1/pets', created, createdReference, reference.name) + location]
  if (!sharedDatabase) {
    if (!created.body.equals(createdReference.body) || locationPath(created, service) !== locationPath(createdReference, reference.url)) {
      differences.push(describeDifference('POST /v1/pets', created, createdReference, reference.name) + location)
    }
    return differences
  }
  if (locationPath(created, service) !== `/v1/pets/${created.id}` || locationPath(createdReference, reference.url) !== `/v1/pets/${createdReference.id}`) {
    differences.push(`POST /v1/pets: a Location does not name the new pet:${location}`)
  }
  for (const [pet, reader, readerName] of [
    [created, reference.url, reference.name],
    [createdReference, service, 'service'],
  ] as const) {
    const response = await fetch(`${reader}/v1/pets/${pet.id}`, { headers })
    const read = { status: response.status, body: Buffer.from(await response.arrayBuffer()) }
    if (read.status !== 200 || !read.body.equals(pet.body)) {
      const [fromService, fromReference] = readerName === 'service' ? [read, pet] : [pet, read]
      differences.push(describeDifference(`POST /v1/pets then GET /v1/pets/${pet.id} from the ${readerName}`, fromService, fromReference, reference.name))
    }
  }
  return differences
}

function describeDifference(what: string, service: Answer, reference: Answer, name: string): string {
  let at = 0
  while (at < service.body.length && service.body[at] === reference.body[at]) at++
  const excerpt = (body: Buffer) => JSON.stringify(body.subarray(Math.max(0, at - 40), at + 60).toString('utf8'))
  return `${what}: service ${service.status} (${service.body.length} bytes), ${name} ${reference.status} (${reference.body.length} bytes); first difference at byte ${at}:\n  service: ${excerpt(service.body)}\n  ${name}: ${excerpt(reference.body)}`
}
