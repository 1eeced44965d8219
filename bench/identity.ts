// The byte-identity check: before anything is measured, both servers must answer the same requests
// with the same status and the same bytes, or the ratio between them would compare two different things.
import { SCENARIOS, petBody } from './scenarios.js'

/** getOne bodies compared between the servers before measuring, spread over the seeded ids. */
const IDENTITY_SAMPLE = 50

interface Answer {
  status: number
  body: Buffer
}

/** The GET answers of both servers must be the same bytes, or the comparison measures two different things. */
export async function assertIdenticalBodies(service: string, baseline: string, key: string, ids: string[]): Promise<void> {
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
      [service, baseline].map(async (origin) => {
        const response = await fetch(origin + requestPath, { headers })
        return { status: response.status, body: Buffer.from(await response.arrayBuffer()) }
      }),
    )
    if (fromService === undefined || fromBaseline === undefined) continue
    if (fromService.status !== 200 || fromBaseline.status !== 200 || !fromService.body.equals(fromBaseline.body)) {
      differences.push(describeDifference(`GET ${requestPath}`, fromService, fromBaseline))
    }
  }
  // One create on each: the ids match too, since both continue from the same last id.
  const body = petBody(0, 'identity')
  const [created, createdBaseline] = await Promise.all(
    [service, baseline].map(async (origin) => {
      const response = await fetch(`${origin}/v1/pets`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body })
      return { status: response.status, body: Buffer.from(await response.arrayBuffer()), location: response.headers.get('location') ?? '' }
    }),
  )
  if (created !== undefined && createdBaseline !== undefined) {
    const samePath = new URL(created.location, service).pathname === new URL(createdBaseline.location, baseline).pathname
    if (created.status !== 201 || createdBaseline.status !== 201 || !created.body.equals(createdBaseline.body) || !samePath) {
      differences.push(
        describeDifference('POST /v1/pets', created, createdBaseline) + `\n  Location: service ${created.location}, baseline ${createdBaseline.location}`,
      )
    }
  }
  if (differences.length > 0) {
    throw new Error(`the baseline does not answer with the service's bytes, so the ratio would mean nothing:\n${differences.slice(0, 5).join('\n')}`)
  }
  console.log(`bench: bodies byte-identical on both servers for ${paths.length} GETs and 1 POST`)
}

function describeDifference(what: string, service: Answer, baseline: Answer): string {
  let at = 0
  while (at < service.body.length && service.body[at] === baseline.body[at]) at++
  const excerpt = (body: Buffer) => JSON.stringify(body.subarray(Math.max(0, at - 40), at + 60).toString('utf8'))
  return `${what}: service ${service.status} (${service.body.length} bytes), baseline ${baseline.status} (${baseline.body.length} bytes); first difference at byte ${at}:\n  service  ${excerpt(service.body)}\n  baseline ${excerpt(baseline.body)}`
}
