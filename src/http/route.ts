import type { FastifyInstance, FastifyRequest } from 'fastify'

declare module 'fastify' {
  interface FastifyRequest {
    /** The matched route's template as `routeOf` read it; null until then. Read it through `routeOf`. */
    matchedRoute: string | false | null
  }
}

/** Lets `routeOf` remember a request's route. Call it before any hook uses `routeOf`. */
export function decorateMatchedRoute(app: FastifyInstance): void {
  app.decorateRequest('matchedRoute', null)
}

/**
 * The template of the route `request` matched (`/v1/pets/:petId`), undefined when it matched none. Fastify's
 * `request.routeOptions` builds an object of every route option at each read, so the request log and
 * the metrics, which both want the template of every request, read it once between them.
 */
export function routeOf(request: FastifyRequest): string | undefined {
  if (request.matchedRoute === null) request.matchedRoute = request.routeOptions.url ?? false
  return request.matchedRoute === false ? undefined : request.matchedRoute
}
