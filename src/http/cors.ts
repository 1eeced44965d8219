import cors, { type FastifyCorsOptions } from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import { watchServedRoutes } from './error-handler.js'
import { IDEMPOTENCY_KEY_HEADER } from './header-names.js'
import { http } from './node-http.js'

/** What a browser app may send: the key, the JSON body's type and createPet's retry key. */
const ALLOWED_HEADERS = ['Authorization', 'Content-Type', IDEMPOTENCY_KEY_HEADER]

/**
 * The response headers the service sends that a browser app needs and could not read otherwise (beyond
 * `Cache-Control`, `Content-Type` and the other CORS-safelisted ones): revalidation, pages, the created
 * pet, where it stands with the rate limit (IETF draft names, as api-keys.rate-limit.ts sends them)
 * and how long to wait after a 429 or 503.
 */
const EXPOSED_HEADERS = ['ETag', 'Link', 'Location', 'RateLimit', 'RateLimit-Policy', 'Retry-After']

/**
 * How long a browser may reuse a preflight answer, in seconds: two hours, Chromium's ceiling (Firefox
 * allows a day, Safari ten minutes). Without it Chromium keeps one for 5 s, and every API call, all of
 * them carrying `Authorization`, would cost a second round trip. Caching it weakens nothing: the actual
 * response still has to carry `Access-Control-Allow-Origin`, so an origin removed from CORS_ORIGINS
 * can no longer read answers at once, cached preflight or not.
 */
const PREFLIGHT_MAX_AGE_S = 7200

/**
 * Lets the pages of `origins` (CORS_ORIGINS) call the service from a browser, with @fastify/cors; with
 * none, nothing is registered and no response carries a CORS header. The methods it allows are those of
 * the routes added after it, known once the app is ready: every method the service serves. Register it
 * before the load shedding, the routes and `collectRouteMethods`:
 * - its onRequest hook answers a preflight (OPTIONS with `Access-Control-Request-Method` from a listed
 *   origin) with 204 before shedding, authentication, rate limits and the 405 route: a preflight never
 *   carries the key, and the browser refuses the actual request unless its preflight got a 2xx;
 * - it gives every other answer to a listed origin, errors included, `Access-Control-Allow-Origin` and
 *   the exposed headers before anything can refuse the request, so a browser app can read a 401, a 429
 *   or a 503 with its body and `Retry-After`;
 * - the plugin's own catch-all `OPTIONS *` route is added before `collectRouteMethods` watches the
 *   routes, so that it never makes every unknown path answer 405.
 * Any other request, a preflight from an origin not listed or an OPTIONS that is no preflight, gets no
 * `Access-Control-*` header and is answered as without CORS (405 with `Allow` for OPTIONS on a known
 * path). Every response carries `Vary: Origin`: whether it has CORS headers depends on that header.
 * No credentials mode: keys travel in `Authorization`, never in cookies.
 */
export async function registerCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return
  // Made once per origin, once the routes are known, not per request: the delegator runs on every request.
  let listed = new Map<string, { preflight: FastifyCorsOptions; other: FastifyCorsOptions }>()
  const notListed: FastifyCorsOptions = Object.freeze({ origin: false })
  await app.register(cors, {
    hook: 'onRequest',
    delegator: (request, callback) => {
      // An exact comparison: CORS_ORIGINS holds origins as browsers serialise them (see loadConfig).
      const options = listed.get(request.headers.origin ?? '')
      if (options === undefined) {
        callback(null, notListed)
        return
      }
      // An OPTIONS without Access-Control-Request-Method is no preflight: the 405 route answers it.
      callback(null, request.headers['access-control-request-method'] === undefined ? options.other : options.preflight)
    },
  })
  // Watched from after the plugin's own `OPTIONS *`, which only answers preflights.
  const served = new Set<string>()
  watchServedRoutes(app, (methods) => {
    for (const method of methods) served.add(method)
  })
  app.addHook('onReady', async () => {
    // In the order of Node's list of methods, as `Allow` has them.
    const methods = http.METHODS.filter((method) => served.has(method))
    const optionsOf = (origin: string, preflight: boolean): FastifyCorsOptions =>
      Object.freeze({
        origin,
        methods,
        allowedHeaders: ALLOWED_HEADERS,
        exposedHeaders: EXPOSED_HEADERS,
        maxAge: PREFLIGHT_MAX_AGE_S,
        preflight,
      })
    listed = new Map(origins.map((origin) => [origin, { preflight: optionsOf(origin, true), other: optionsOf(origin, false) }]))
  })
}
