import type { onRequestAsyncHookHandler } from 'fastify'
import { ApiError } from '../errors.js'
import type { ApiKey } from './api-keys.repository.js'
import type { ApiKeysService } from './api-keys.service.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The key that authenticated this request; null before authentication or on public routes. */
    apiKey: ApiKey | null
  }
}

const REALM = 'Bearer realm="petstore"'
// RFC 6750 §2.1: the scheme is case-insensitive; the token is a b64token.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i

const missing = () =>
  new ApiError('unauthorized', 'An API key is required: send it as "Authorization: Bearer <key>".', {
    'www-authenticate': REALM,
  })

// Unknown, revoked, expired and other-environment keys get this one answer, so that a caller
// cannot learn which keys exist or once existed.
const invalid = () =>
  new ApiError('unauthorized', 'The API key is not valid.', {
    'www-authenticate': `${REALM}, error="invalid_token"`,
  })

/** The onRequest hook of every API route: it runs before parsing and validation. */
export function createAuthenticate(apiKeys: ApiKeysService): onRequestAsyncHookHandler {
  return async (request) => {
    const header = request.headers.authorization
    if (header === undefined || !/^bearer(\s|$)/i.test(header)) throw missing()
    const token = BEARER.exec(header)?.[1]
    const key = token === undefined ? undefined : await apiKeys.authenticate(token)
    if (key === undefined) throw invalid()
    request.apiKey = key
  }
}
