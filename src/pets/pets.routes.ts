import type { FastifyInstance, FastifyReply, onRequestHookHandler } from 'fastify'
import type { Registry } from 'prom-client'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { requireScope } from '../api-keys/api-keys.auth.js'
import type { Clock } from '../shared/clock.js'
import { EXACT_NUMBER_DIGITS } from '../shared/int64.js'
import { sendRepresentation } from './pets.conditional.js'
import { type CacheKey, READ_CACHE_BUDGET_BYTES, type Representation, createRepresentationCache, representation } from './pets.representation-cache.js'
import { watchReadCache } from './pets.metrics.js'
import type { DeprecationHooks } from '../deprecations/deprecations.hooks.js'
import { IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED_HEADER, JSON_CONTENT_TYPE } from '../http/header-names.js'
import type { IdempotencyService } from '../idempotency/idempotency.service.js'
import { LIMIT_DEFAULT, PetStatusSchema, createPetSchema, getPetSchema, listPetsSchema } from './pets.schemas.js'
import type { NewPet, Pet, PetsRepository } from './pets.repository.js'
import { type PetsService, createPetFingerprint } from './pets.service.js'

export const PETS_PATH = '/v1/pets'

export interface PetsRoutesDeps {
  pets: PetsService
  /** createPet with an `Idempotency-Key` header goes through it. */
  idempotency: IdempotencyService
  authenticate: onRequestHookHandler
  /** Hooks of the deprecated getPet: headers on every response; the gate counts the call and answers 410 after the sunset. */
  getPetDeprecation: DeprecationHooks
  publicBaseUrl: string
  clock: Clock
  /** Where the read cache's size and budget are exported. */
  registry: Registry
}

/**
 * The read cache below keeps a found pet for good: pets are never changed or deleted through the
 * API. So the pets repository only creates and reads, and this list fails to compile the day it
 * gets another method. An update or a delete must first make the cache forget what it changes
 * (createRepresentationCache's `final`), and only then be listed here. test/pets/read-cache.test.ts
 * checks that the engines' repositories have nothing else at run time.
 */
const CREATES_AND_READS: Record<keyof PetsRepository, true> = { create: true, createOnce: true, list: true, findById: true, version: true, rewrites: true }
export const PETS_REPOSITORY_METHODS: readonly string[] = Object.keys(CREATES_AND_READS)

/** A pet's key in the read cache, from its validated id: the number where it is exact, else a string no listing's key equals. */
const petKey = (petId: string): CacheKey => (petId.length <= EXACT_NUMBER_DIGITS ? Number(petId) : `pet ${petId}`)

/** The route's compiled 200 serializer: the bytes a cached answer holds are those Fastify would send. */
function serializer200(reply: FastifyReply): (payload: unknown) => string {
  const serialize = reply.getSerializationFunction('200')
  if (serialize === undefined) throw new Error(`${reply.request.routeOptions.url ?? ''}: no 200 serializer`)
  return serialize as (payload: unknown) => string
}

export function registerPetsRoutes(fastify: FastifyInstance, deps: PetsRoutesDeps): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()
  // Pet, NewPet and the status filter refer to it by name (see Named): the serializer and the document resolve it here.
  app.addSchema(PetStatusSchema)
  const { pets, idempotency, authenticate, getPetDeprecation, publicBaseUrl, clock, registry } = deps
  const petUrl = (pet: Pet) => `${publicBaseUrl}${PETS_PATH}/${pet.id}`
  // Reads are answered from serialised bytes, cached as long as they are known to be current (see
  // createRepresentationCache). A pet once found is final (CREATES_AND_READS says why); so is a page
  // that has a next page, since `list` waits for any lower id still being created (PetsRepository), so
  // no later create can enter it. The last page is not: creates extend it.
  const answers = createRepresentationCache({ version: pets.version, clock, maxBytes: READ_CACHE_BUDGET_BYTES, rewrites: pets.rewrites })
  watchReadCache(registry, answers, READ_CACHE_BUDGET_BYTES)
  // A cached answer is sent at once: the reads' handlers return a promise only when they read.
  const sendWhenRead = (reply: FastifyReply, answer: Representation | Promise<Representation>) =>
    answer instanceof Promise ? answer.then((read) => sendRepresentation(reply, read)) : sendRepresentation(reply, answer)

  app.get(PETS_PATH, { schema: listPetsSchema, onRequest: [authenticate, requireScope('pets:read')] }, (request, reply) => {
    const { status, cursor } = request.query
    const limit = request.query.limit === undefined ? LIMIT_DEFAULT : Number(request.query.limit)
    const answer = answers.get(`list ${limit} ${status ?? ''} ${cursor ?? ''}`, async () => {
      const { pets: found, next } = await pets.list({ limit, status, cursor })
      let link: string | undefined
      if (next !== undefined) {
        const query = new URLSearchParams({ limit: String(limit), ...(status === undefined ? {} : { status }), cursor: next })
        link = `<${publicBaseUrl}${PETS_PATH}?${query.toString()}>; rel="next"`
      }
      return { answer: representation(serializer200(reply)(found), link), final: next !== undefined }
    })
    return sendWhenRead(reply, answer)
  })

  const sendCreated = (reply: FastifyReply, pet: Pet) => reply.code(201).header('location', petUrl(pet)).send(pet)
  // The create of a request with an `Idempotency-Key`, answered once only.
  const createOnce = async (pet: NewPet, reply: FastifyReply, key: string) => {
    // The client's, not the key's: a retry sent with the key's rotated successor is the same request.
    const scope = reply.request.apiKey?.lineage
    const serialize = reply.getSerializationFunction('201')
    if (scope === undefined || serialize === undefined) throw new Error('createPet: no API key or no 201 serializer')
    // The body is serialised once, as the 201 schema says, and stored: a replay sends the same bytes.
    const { response, replayed } = await idempotency.once({ scope, key, fingerprint: createPetFingerprint(pet) }, (claim) =>
      pets.createOnce(pet, claim, (created) => ({ status: 201, location: petUrl(created), body: serialize({ ...created }) })),
    )
    if (replayed) reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true')
    return reply
      .code(response.status as 201) // respond() above is the only source of stored createPet responses
      .header('location', response.location)
      .type(JSON_CONTENT_TYPE)
      .send(response.body)
  }

  // Not an async function: a create without a key is one promise, the repository's.
  app.post(PETS_PATH, { schema: createPetSchema, onRequest: [authenticate, requireScope('pets:write')] }, (request, reply) => {
    const key = request.headers[IDEMPOTENCY_KEY]
    if (key === undefined) return pets.create(request.body).then((pet) => sendCreated(reply, pet))
    return createOnce(request.body, reply, key)
  })

  app.get(
    `${PETS_PATH}/:petId`,
    {
      schema: getPetSchema,
      // The gate counts every call of a valid key, one without the scope too, and answers 410 after the sunset to anyone.
      onRequest: [getPetDeprecation.headers, authenticate, getPetDeprecation.gate, requireScope('pets:read')],
    },
    (request, reply) => {
      const { petId } = request.params
      const answer = answers.get(petKey(petId), async () => {
        const serialize = serializer200(reply)
        const { pet, rewrites } = await pets.get(BigInt(petId))
        return { answer: representation(serialize(pet)), final: true, count: rewrites }
      })
      return sendWhenRead(reply, answer)
    },
  )
}
