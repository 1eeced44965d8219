// The byte-identity check: before anything is measured, both servers must answer the same requests
// with the same status and the same bytes, or the ratio between them would compare two different things.
import { SCENARIOS, petBody } from './scenarios.js'

/** getOne bodies compared between the servers before measuring, spread over the seeded ids. */
const IDENTITY_SAMPLE = 50

interface Answer {
  status: number
  body: Buffer
}

/** The headers the contract puts on getPet, which both servers must send alike. */
const GETPET_CONTRACT_HEADERS = ['deprecation', 'sunset', 'link'] as const

/**
 * The answers of both servers must be the same bytes, or the comparison measures two different things.
 * `sharedDatabase`: both write to the same tables (PostgreSQL), so their creates get different ids.
 */
export async function assertIdenticalBodies(
  service: string,
  baseline: { name: string; url: string },
  key: string,
  ids: string[],
  sharedDatabase: boolean,
): Promise<void> {
  const { url: baselineUrl, name: baselineName } = baseline
  const headers = { authorization: `Bearer ${key}` }
  const step = Math.max(1, Math.floor(ids.length / IDENTITY_SAMPLE))
  const sampleIds = ids.filter((_, index) => index % step === 0).slice(0, IDENTITY_SAMPLE)
  const paths = [
    ...SCENARIOS.filter((scenario) => scenario.method === 'GET' && !scenario.path.includes('{id}')).map((scenario) => scenario.path),
    ...sampleIds.map((id) => `/v1/pets/${id}`),
  ]
  const differences: string[] = []
  for (const requestPath of paths) {
    const [fromService, fromBaseline] = await Promise.all(
      [service, baselineUrl].map(async (origin) => {
        const response = await fetch(origin + requestPath, { headers })
        return { status: response.status, body: Buffer.from(await response.arrayBuffer()), headers: response.headers }
      }),
    )
    if (fromService === undefined || fromBaseline === undefined) continue
    if (fromService.status !== 200 || fromBaseline.status !== 200 || !fromService.body.equals(fromBaseline.body)) {
      differences.push(describeDifference(`GET ${requestPath}`, fromService, fromBaseline))
    }
    for (const name of requestPath.includes('?') ? [] : GETPET_CONTRACT_HEADERS) {
      const [inService, inBaseline] = [fromService.headers.get(name), fromBaseline.headers.get(name)]
      if (inService !== inBaseline) differences.push(`GET ${requestPath}: header ${name}: service ${String(inService)}, baseline ${String(inBaseline)}`)
    }
  }
  differences.push(...(await compareCreates(service, baselineUrl, headers, sharedDatabase)))
  if (differences.length > 0) {
    throw new Error(`the ${baselineName} does not answer with the service's bytes, so the ratio would mean nothing:\n${differences.slice(0, 5).join('\n')}`)
  }
  console.log(`bench: the service and the ${baselineName} send the same bytes for ${paths.length} GETs and 1 POST`)
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
 * One create on each. On separate stores the ids match too, since both continue from the same last id.
 * On one shared database the second create gets the next id: then each server must answer a GET of the
 * other's new pet with exactly the bytes of the other's 201, and each Location must name its own id.
 */
async function compareCreates(service: string, baseline: string, headers: Record<string, string>, sharedDatabase: boolean): Promise<string[]> {
  const body = petBody(0, 'identity')
  const created = await create(service, headers, body)
  const createdBaseline = await create(baseline, headers, body)
  const differences: string[] = []
  const locationPath = (answer: Created, origin: string) => new URL(answer.location, origin).pathname
  const location = `\n  Location: service ${created.location}, baseline ${createdBaseline.location}`
  if (created.status !== 201 || createdBaseline.status !== 201) return [describeDifference('POST /v1/pets', created, createdBaseline) + location]
  if (!sharedDatabase) {
    if (!created.body.equals(createdBaseline.body) || locationPath(created, service) !== locationPath(createdBaseline, baseline)) {
      differences.push(describeDifference('POST /v1/pets', created, createdBaseline) + location)
    }
    return differences
  }
  if (locationPath(created, service) !== `/v1/pets/${created.id}` || locationPath(createdBaseline, baseline) !== `/v1/pets/${createdBaseline.id}`) {
    differences.push(`POST /v1/pets: a Location does not name the new pet:${location}`)
  }
  for (const [pet, reader, readerName] of [
    [created, baseline, 'baseline'],
    [createdBaseline, service, 'service'],
  ] as const) {
    const response = await fetch(`${reader}/v1/pets/${pet.id}`, { headers })
    const read = { status: response.status, body: Buffer.from(await response.arrayBuffer()) }
    if (read.status !== 200 || !read.body.equals(pet.body)) {
      const [fromService, fromBaseline] = readerName === 'baseline' ? [pet, read] : [read, pet]
      differences.push(describeDifference(`POST /v1/pets then GET /v1/pets/${pet.id} from the ${readerName}`, fromService, fromBaseline))
    }
  }
  return differences
}

function describeDifference(what: string, service: Answer, baseline: Answer): string {
  let at = 0
  while (at < service.body.length && service.body[at] === baseline.body[at]) at++
  const excerpt = (body: Buffer) => JSON.stringify(body.subarray(Math.max(0, at - 40), at + 60).toString('utf8'))
  return `${what}: service ${service.status} (${service.body.length} bytes), baseline ${baseline.status} (${baseline.body.length} bytes); first difference at byte ${at}:\n  service  ${excerpt(service.body)}\n  baseline ${excerpt(baseline.body)}`
}
