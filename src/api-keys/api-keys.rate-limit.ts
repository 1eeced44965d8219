import rateLimit from '@fastify/rate-limit'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { Config } from '../config.js'
import { ApiError } from '../errors.js'
import { type Clock, systemClock } from '../shared/clock.js'

const WINDOW_MS = 60_000

interface Outcome {
  remaining: number
  ttlInSeconds: number
  isExceeded: boolean
}

/** What the authentication hook asks of the limits. */
export interface RateLimits {
  /**
   * Refuses, before any key lookup, an address that failed authentication too often, unless `exempt()`
   * (asked only then) or the address has not had its one lookup of LIMITED_LOOKUP_MS: undefined when the
   * address is known not to have failed (nothing to wait for), else a promise that rejects over the limit.
   */
  guardFailedAuth(request: FastifyRequest, exempt: () => boolean): Promise<void> | undefined
  /** Counts a failed authentication; the 429 to send instead of 401 once over the limit. */
  recordFailedAuth(request: FastifyRequest): Promise<ApiError | undefined>
  /** Counts a request of the authenticated key, sets the RateLimit headers, throws 429 over the limit. */
  limitKey(request: FastifyRequest, reply: FastifyReply): Promise<void>
  /** Where counters live, for /readyz: `unavailable` means Redis is down and limits are not enforced. */
  storeStatus(): 'memory' | 'redis' | 'unavailable'
}

/** The limiter's options: made once, not per request. */
const COUNT = { increment: true }
const READ = { increment: false }
const NOT_LIMITED: Outcome = { remaining: 0, ttlInSeconds: 0, isExceeded: false }
const NO_WAIT = Promise.resolve()
/** Only an allow-list (none here) yields `isAllowed`; it is then never over the limit. */
const outcomeOf = (result: Outcome | { isAllowed: true }): Outcome => ('isAllowed' in result && result.isAllowed ? NOT_LIMITED : (result as Outcome))

/** Counts a request refused with 429, by limit, for the metrics; the limits never see the registry. */
export type CountRateLimited = (limit: 'per-key' | 'failed-auth') => void

/** IETF draft-ietf-httpapi-ratelimit-headers: the policy, which never changes. */
const policyHeader = (policy: string, quota: number) => `"${policy}";q=${quota};w=${WINDOW_MS / 1000}`

/** What is left of the policy; undefined when the store did not answer (ttl 0: Redis down, failing open). */
const remainingHeader = (policy: string, outcome: Outcome) =>
  outcome.ttlInSeconds > 0 ? `"${policy}";r=${outcome.remaining};t=${outcome.ttlInSeconds}` : undefined

/** Both RateLimit headers of an answer. */
function headers(policy: string, quota: number, outcome: Outcome): Record<string, string> {
  const remaining = remainingHeader(policy, outcome)
  const policyValue = policyHeader(policy, quota)
  return remaining === undefined ? { 'ratelimit-policy': policyValue } : { 'ratelimit-policy': policyValue, ratelimit: remaining }
}

function tooMany(policy: string, quota: number, outcome: Outcome, message: string): ApiError {
  return new ApiError('rate_limited', message, {
    ...headers(policy, quota, outcome),
    'retry-after': String(Math.max(1, outcome.ttlInSeconds)),
  })
}

/**
 * Rate limits with @fastify/rate-limit's counters (fixed one-minute windows): per API key, and
 * per client address for failed authentication. Counters are in memory, or in Redis when
 * REDIS_URL is set so that instances share them. If Redis is down the service fails open: it
 * keeps serving without enforcing limits (an outage of the limiter must not become an outage of
 * the API) and /readyz reports it.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  { perKeyPerMinute, failedAuthPerMinute, redisUrl }: Config['rateLimits'],
  logger: FastifyBaseLogger,
  countRateLimited: CountRateLimited = () => {},
  clock: Clock = systemClock,
): Promise<RateLimits> {
  const redis = redisUrl === undefined ? undefined : await connectRedis(redisUrl, logger)
  if (redis !== undefined) {
    app.addHook('onClose', async () => {
      await redis.quit().catch(() => {
        redis.disconnect()
      })
    })
  }

  await app.register(rateLimit, {
    global: false,
    skipOnError: true,
    ...(redis === undefined ? {} : { redis, nameSpace: 'petstore-ratelimit:' }),
  })
  const perKey = app.createRateLimit({
    max: perKeyPerMinute,
    timeWindow: WINDOW_MS,
    keyGenerator: (request) => `key:${request.apiKey?.id ?? ''}`,
  })
  const failedAuth = app.createRateLimit({
    max: failedAuthPerMinute,
    timeWindow: WINDOW_MS,
    keyGenerator: (request) => `failed-auth:${request.ip}`,
  })
  const failedAuthMessage = 'Too many failed authentications from this address; wait before trying again.'
  // With the counters in memory, only this process counts failures, so an address that has not
  // failed here within a window has nothing to check: the guard skips its store read, one of the two
  // on every authenticated request. With Redis, other instances count too, and the store is always asked.
  const failing = redis === undefined ? createFailingAddresses() : undefined
  const lookups = createLimitedLookups(clock)
  type Limiter = typeof perKey
  const check = async (limiter: Limiter, request: FastifyRequest, increment: boolean): Promise<Outcome> =>
    outcomeOf(await limiter(request, increment ? COUNT : READ))

  const perKeyPolicy = policyHeader('per-key', perKeyPerMinute)

  return {
    guardFailedAuth(request, exempt) {
      if (failedAuthPerMinute === 0 || failing?.clean(request.ip) === true) return undefined
      return check(failedAuth, request, false).then((outcome) => {
        // After `max` failures the next one counts as over; an address already over is refused.
        if (outcome.isExceeded && !exempt() && !lookups.take(request.ip)) {
          countRateLimited('failed-auth')
          throw tooMany('failed-auth', failedAuthPerMinute, outcome, failedAuthMessage)
        }
      })
    },
    async recordFailedAuth(request) {
      if (failedAuthPerMinute === 0) return undefined
      failing?.add(request.ip)
      const outcome = await check(failedAuth, request, true)
      if (!outcome.isExceeded) return undefined
      countRateLimited('failed-auth')
      return tooMany('failed-auth', failedAuthPerMinute, outcome, failedAuthMessage)
    },
    // Not async: the limiter's promise is the only one a request waits for here.
    limitKey(request, reply) {
      if (perKeyPerMinute === 0) return NO_WAIT
      return perKey(request, COUNT).then((result) => {
        const outcome = outcomeOf(result)
        if (outcome.isExceeded) {
          countRateLimited('per-key')
          throw tooMany('per-key', perKeyPerMinute, outcome, `Rate limit of ${perKeyPerMinute} requests per minute for this API key exceeded.`)
        }
        // Set one by one: the policy's text is made once, and no object per request.
        reply.header('ratelimit-policy', perKeyPolicy)
        const remaining = remainingHeader('per-key', outcome)
        if (remaining !== undefined) reply.header('ratelimit', remaining)
      })
    },
    storeStatus: () => (redis === undefined ? 'memory' : redis.status === 'ready' ? 'redis' : 'unavailable'),
  }
}

/** Addresses remembered as having failed authentication for longer than any window that counts it. */
const MAX_FAILING_ADDRESSES = 10_000

/**
 * The addresses that failed authentication in this process within the last window. `clean` is true
 * only for an address surely not among them. The memory stays bounded: a failure that finds
 * MAX_FAILING_ADDRESSES addresses within their window is not remembered, and until its own window
 * ends no address is clean (the store is asked for every one).
 */
function createFailingAddresses(): { add(address: string): void; clean(address: string): boolean } {
  // In the order their windows end: each failure moves its address to the back.
  const until = new Map<string, number>()
  let checkEveryoneUntil = 0
  return {
    add(address) {
      const now = Date.now()
      until.delete(address)
      if (until.size >= MAX_FAILING_ADDRESSES) {
        for (const [known, end] of until) {
          if (end > now) break
          until.delete(known)
        }
      }
      if (until.size < MAX_FAILING_ADDRESSES) until.set(address, now + WINDOW_MS)
      else checkEveryoneUntil = now + WINDOW_MS
    },
    clean(address) {
      const now = Date.now()
      if (now < checkEveryoneUntil) return false
      const end = until.get(address)
      return end === undefined || end <= now
    },
  }
}

/**
 * How often an address over the failed-authentication limit may have a key looked up that this process
 * does not know: a client whose key was revoked and retried it, or a neighbour behind the same NAT, gets
 * a new key in within about this long, while a flood of bad keys costs one lookup per address this often.
 */
export const LIMITED_LOOKUP_MS = 1_000

/** Addresses remembered for their last lookup; past it, a limited address gets none until some age out. */
const MAX_LIMITED_ADDRESSES = 10_000

/** The lookups of addresses over the limit: `take` is true at most once per LIMITED_LOOKUP_MS per address. */
function createLimitedLookups(clock: Clock): { take(address: string): boolean } {
  // In the order of their last lookup.
  const lastLookup = new Map<string, number>()
  return {
    take(address) {
      const now = clock.now()
      const last = lastLookup.get(address)
      if (last !== undefined && now - last < LIMITED_LOOKUP_MS && now >= last) return false
      lastLookup.delete(address)
      for (const [known, at] of lastLookup) {
        if (lastLookup.size < MAX_LIMITED_ADDRESSES && now - at < LIMITED_LOOKUP_MS) break
        if (now - at < LIMITED_LOOKUP_MS) return false
        lastLookup.delete(known)
      }
      lastLookup.set(address, now)
      return true
    },
  }
}

/** Connects, waiting up to a second for Redis: the service starts (failing open) without it. */
async function connectRedis(url: string, logger: FastifyBaseLogger): Promise<Redis> {
  // Loaded only when configured: a service without Redis does not carry the client in memory.
  const { Redis } = await import('ioredis')
  const redis = new Redis(url, {
    // Fail fast while Redis is away instead of queueing: a request never waits on the limiter.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 1_000,
    commandTimeout: 250,
  })
  // ioredis reports every failed reconnection; say each change of state once.
  let healthy: boolean | undefined
  redis.on('ready', () => {
    if (healthy !== true) logger.info('rate-limit store (Redis) is ready')
    healthy = true
  })
  redis.on('error', (error: Error) => {
    if (healthy !== false) logger.warn({ err: error }, 'rate-limit store (Redis) unavailable: limits not enforced')
    healthy = false
  })
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 1_000)
    redis.once('ready', () => {
      clearTimeout(timer)
      resolve()
    })
  })
  return redis
}
