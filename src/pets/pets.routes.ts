import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { LIMIT_DEFAULT, createPetSchema, getPetSchema, listPetsSchema } from './pets.schemas.js'
import type { PetsService } from './pets.service.js'

export const PETS_PATH = '/v1/pets'

export interface PetsRoutesDeps {
  pets: PetsService
  authenticate: onRequestAsyncHookHandler
  /** Hooks of the deprecated getPet: headers on every response, 410 after the sunset. */
  getPetDeprecation: { headers: onRequestAsyncHookHandler; gate: onRequestAsyncHookHandler }
  publicBaseUrl: string
}

export function registerPetsRoutes(fastify: FastifyInstance, deps: PetsRoutesDeps): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>()
  const { pets, authenticate, getPetDeprecation, publicBaseUrl } = deps

  app.get(PETS_PATH, { schema: listPetsSchema, onRequest: authenticate }, async (request) => {
    const { limit, status } = request.query
    return pets.list({ limit: limit === undefined ? LIMIT_DEFAULT : Number(limit), status })
  })

  app.post(PETS_PATH, { schema: createPetSchema, onRequest: authenticate }, async (request, reply) => {
    const pet = await pets.create(request.body)
    return reply.code(201).header('location', `${publicBaseUrl}${PETS_PATH}/${pet.id}`).send(pet)
  })

  app.get(
    `${PETS_PATH}/:petId`,
    { schema: getPetSchema, onRequest: [getPetDeprecation.headers, authenticate, getPetDeprecation.gate] },
    async (request) => pets.get(BigInt(request.params.petId)),
  )
}
