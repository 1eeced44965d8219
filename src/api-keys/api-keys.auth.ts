import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify'
import { ApiError } from '../errors.js'
import type { ApiKey } from './api-keys.repository.js'
import type { RateLimits } from './api-keys.rate-limit.js'
import type { Scope } from './api-keys.scopes.js'
import { type ApiKeysService, hashSecret } from './api-keys.service.js'

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

// RFC 6750 §3.1: the key is good, but not for this; the challenge names the scope it lacks.
const insufficientScope = (scope: Scope) =>
  new ApiError('forbidden', `This API key does not have the ${scope} scope this operation needs.`, {
    'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
  })

/** An `Authorization: Bearer` header and the key in it, with the key's SHA-256 (hashSecret); none if it holds no b64token. */
interface Credentials {
  header: string
  presented: { secret: string; secretHash: string } | undefined
}

/**
 * The last credentials a connection sent: a keep-alive client sends the same header with every request,
 * parsed and hashed once (1-2 µs of a cached read's 30). A header is only ever compared with the one its own
 * connection sent before, so the comparison's timing tells a client nothing it did not send itself. The
 * key stays in memory as long as its connection, as it stays in the client's.
 */
const LAST_CREDENTIALS = Symbol('petstore.lastCredentials')
type RememberingSocket = Socket & { [LAST_CREDENTIALS]?: Credentials }

/** The credentials of `header`, from its connection's memory when it sent the same header last. */
function credentialsOf(socket: RememberingSocket, header: string): Credentials {
  const last = socket[LAST_CREDENTIALS]
  if (last?.header === header) return last
  const secret = BEARER.exec(header)?.[1]
  const credentials = { header, presented: secret === undefined ? undefined : { secret, secretHash: hashSecret(secret) } }
  socket[LAST_CREDENTIALS] = credentials
  return credentials
}

/** Counts a failed authentication for the metrics; the reason names nothing the caller sent. */
export type CountAuthFailure = (reason: 'missing' | 'invalid') => void

/**
 * The onRequest hook of every API route: it runs before parsing and validation. It also applies
 * the rate limits: an address that failed authentication too often is refused before any key
 * lookup, but for a key this process already knows, and each key has its own budget, which a
 * request later refused for its scope spends too. A callback hook: a key known from memory
 * (api-keys.service.ts) and an address that never failed cost no promise; only the key's limit,
 * which @fastify/rate-limit answers asynchronously, waits.
 */
export function createAuthenticate(
  apiKeys: ApiKeysService,
  limits: RateLimits,
  countAuthFailure: CountAuthFailure = () => {},
): onRequestHookHandler {
  const admit = (request: FastifyRequest, reply: FastifyReply, key: ApiKey | undefined, done: HookHandlerDoneFunction) => {
    if (key === undefined) {
      countAuthFailure('invalid')
      limits.recordFailedAuth(request).then((refusal) => done(refusal ?? invalid()), done)
      return
    }
    request.apiKey = key
    limits.limitKey(request, reply).then(() => done(), done)
  }
  const identify = (request: FastifyRequest, reply: FastifyReply, { presented }: Credentials, done: HookHandlerDoneFunction) => {
    const found = presented === undefined ? undefined : apiKeys.authenticate(presented.secret, presented.secretHash)
    if (found instanceof Promise) found.then((key) => admit(request, reply, key, done), done)
    else admit(request, reply, found, done)
  }
  return (request, reply, done) => {
    const header = request.headers.authorization
    // `Bearer` with no token after it sends no key, so it is answered as a missing one.
    if (header === undefined || !/^bearer\s+\S/i.test(header)) {
      countAuthFailure('missing')
      // Answered after the bytes already received are parsed, as every other answer of this hook is: a
      // request that is also malformed HTTP (a bad chunk in the same packet) gets that 400, not a 401.
      queueMicrotask(() => done(missing()))
      return
    }
    const credentials = credentialsOf(request.raw.socket, header)
    const { presented } = credentials
    // An address over the failed-authentication limit is still served with a key this process has seen
    // authenticate: behind NAT, or a proxy TRUST_PROXY does not name, one client's bad keys would
    // otherwise lock every caller of that address out. Any other key is refused before its lookup, which
    // is what the limit saves (guessing a key is hopeless either way), but for one lookup a second per
    // address, so that a new key gets in (api-keys.rate-limit.ts): ADR 6.
    const guarded = limits.guardFailedAuth(request, () => presented !== undefined && apiKeys.isKnown(presented.secret, presented.secretHash))
    if (guarded === undefined) identify(request, reply, credentials, done)
    else guarded.then(() => identify(request, reply, credentials, done), done)
  }
}

/**
 * The onRequest hook that refuses, with 403, a key without `scope`. It comes after `authenticate`
 * (an invalid key is 401 whatever it asks for) and before the body or query is read (a key without
 * the scope is 403 whatever it sends).
 */
export function requireScope(scope: Scope): onRequestHookHandler {
  const refusal = insufficientScope(scope)
  return (request, _reply, done) => {
    done(request.apiKey?.scopes.includes(scope) === true ? undefined : refusal)
  }
}
