import path from 'node:path'

export type Environment = 'production' | 'staging'
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'

export type DatabaseConfig =
  | { engine: 'sqlite'; path: string }
  | { engine: 'postgres'; url: string; poolSize: number }

export interface Config {
  readonly port: number
  readonly host: string
  readonly database: DatabaseConfig
  readonly environment: Environment
  /** Origin of this deployment, without the `/v1` prefix and without a trailing slash. */
  readonly publicBaseUrl: string
  /** Origins listed as `servers` in the OpenAPI document. */
  readonly servers: Readonly<Partial<Record<Environment, string>>>
  readonly logLevel: LogLevel
  /** When getPet was deprecated (sent as the `Deprecation` header). */
  readonly getPetDeprecatedAt: Date
  /** How long a graceful shutdown waits for in-flight requests. */
  readonly shutdownTimeoutMs: number
  /** How long the server keeps accepting, answering `/readyz` 503, before it stops listening. */
  readonly shutdownDrainMs: number
  readonly rateLimits: {
    /** Requests per minute per API key; 0 turns the limit off. */
    readonly perKeyPerMinute: number
    /** Failed authentications per minute per client address; 0 turns the limit off. */
    readonly failedAuthPerMinute: number
    /** Shared counters for many instances; unset keeps them in memory. */
    readonly redisUrl: string | undefined
  }
  /** Fastify's `trustProxy`: which proxies' X-Forwarded-For gives the client address. */
  readonly trustProxy: boolean | number | string
  readonly timeouts: {
    /** Whole request, headers and body, from its first byte. */
    readonly requestMs: number
    readonly headersMs: number
    /** An idle keep-alive connection is closed after this long. */
    readonly keepAliveMs: number
  }
  /** The listener of `GET /metrics`, apart from the API port; undefined when METRICS_PORT=off. */
  readonly metrics: Readonly<{ port: number; host: string }> | undefined
  /** Connections the kernel queues for the API port until the service accepts them (the listen backlog). */
  readonly listenBacklog: number
  /** When new requests are answered 503 `overloaded` instead of being queued; 0 turns a check off. */
  readonly overload: {
    /** Mean event-loop delay over one sample, in milliseconds. */
    readonly maxEventLoopDelayMs: number
    /** V8 heap in use, in MiB; undefined: 90 % of the heap limit of the process that serves. */
    readonly maxHeapUsedMb: number | undefined
  }
}

/** Thrown by `loadConfig` with the name of the variable at fault. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable} ${problem}`)
    this.name = 'ConfigError'
  }
}

/** Every variable the service reads, with its meaning and default, for the README and `.env.example`. */
export const CONFIG_VARIABLES = {
  PORT: 'TCP port to listen on (1-65535). Default 8080.',
  HOST: 'Address to listen on. Default 0.0.0.0 (all interfaces).',
  DATABASE_URL:
    'Unset: SQLite at ./data/petstore.db. `sqlite:///abs/path.db` for another SQLite file; `postgres://user:password@host:5432/db` (or `postgresql://`) for PostgreSQL.',
  DATABASE_POOL_SIZE: 'PostgreSQL connections per process (1-1000). Default 10.',
  PETSTORE_ENV: '`production` (keys `ps_live_…`) or `staging` (keys `ps_test_…`). Default production.',
  PUBLIC_BASE_URL: 'Public origin of this deployment, e.g. https://api.example.com. Default http://localhost:PORT.',
  PRODUCTION_BASE_URL: 'Origin of production, listed in the OpenAPI servers. Default PUBLIC_BASE_URL when PETSTORE_ENV=production.',
  STAGING_BASE_URL: 'Origin of staging, listed in the OpenAPI servers. Default PUBLIC_BASE_URL when PETSTORE_ENV=staging.',
  LOG_LEVEL: 'fatal, error, warn, info, debug, trace or silent. Default info.',
  GETPET_DEPRECATED_AT: 'ISO 8601 instant getPet was deprecated (the `Deprecation` header). Default 2026-11-22T00:00:00Z.',
  SHUTDOWN_TIMEOUT_MS: 'How long SIGTERM/SIGINT waits for in-flight requests before giving up. Default 10000.',
  SHUTDOWN_DRAIN_MS:
    'On SIGTERM/SIGINT, how long the server still accepts connections (answering /readyz 503, closing each connection after its response) before it stops listening (0-60000). Default 1000.',
  RATE_LIMIT_PER_KEY: 'Requests per minute per API key (0 = no limit). Default 1200.',
  RATE_LIMIT_FAILED_AUTH_PER_IP: 'Failed authentications per minute per client address (0 = no limit). Default 30.',
  REDIS_URL: 'Unset: rate-limit counters in memory, per process. `redis://host:6379` to share them between instances.',
  TRUST_PROXY:
    'Unset: the client address is the TCP peer. `true`, a hop count, or comma-separated proxy addresses/CIDRs whose X-Forwarded-For is trusted.',
  REQUEST_TIMEOUT_MS: 'Time allowed to receive a whole request, headers and body (1000-600000). Default 10000.',
  HEADERS_TIMEOUT_MS: 'Time allowed to receive the request headers (1000-600000, at most REQUEST_TIMEOUT_MS). Default 5000.',
  KEEP_ALIVE_TIMEOUT_MS: 'An idle keep-alive connection is closed after this long (1000-600000). Default 5000.',
  METRICS_PORT: 'TCP port of the Prometheus metrics listener (1-65535, not PORT), or `off`. Default 9464.',
  METRICS_HOST: 'Address the metrics listener listens on. Default HOST.',
  LISTEN_BACKLOG:
    'Connections the kernel queues for the API port until the service accepts them (1-65535; Linux caps it at net.core.somaxconn). Default 4096.',
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS:
    'New requests are answered 503 `overloaded` while the mean event-loop delay over the last sample is above this (0 = off, else 1-60000). Default 100.',
  OVERLOAD_MAX_HEAP_MB:
    'New requests are answered 503 `overloaded` while the V8 heap in use is above this many MiB (0 = off, else 1-1048576). Default 90 % of the heap limit (`--max-old-space-size`, or what Node derives from the memory available).',
} as const

type Env = Readonly<Record<string, string | undefined>>

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

/**
 * Reads and validates the configuration once; the result is frozen.
 * `cwd` anchors the default SQLite path.
 */
export function loadConfig(env: Env, cwd: string = process.cwd()): Config {
  const port = integerVar(env, 'PORT', 8080, 1, 65535)
  const environment = oneOf(env, 'PETSTORE_ENV', ['production', 'staging'] as const, 'production')
  const publicBaseUrl = originVar(env, 'PUBLIC_BASE_URL') ?? `http://localhost:${port}`
  const servers: Partial<Record<Environment, string>> = {}
  const production = originVar(env, 'PRODUCTION_BASE_URL') ?? (environment === 'production' ? publicBaseUrl : undefined)
  const staging = originVar(env, 'STAGING_BASE_URL') ?? (environment === 'staging' ? publicBaseUrl : undefined)
  if (production !== undefined) servers.production = production
  if (staging !== undefined) servers.staging = staging

  const host = nonEmpty(env, 'HOST') ?? '0.0.0.0'

  return Object.freeze({
    port,
    host,
    database: Object.freeze(databaseVar(env, cwd)),
    environment,
    publicBaseUrl,
    servers: Object.freeze(servers),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    getPetDeprecatedAt: instantVar(env, 'GETPET_DEPRECATED_AT', '2026-11-22T00:00:00Z'),
    shutdownTimeoutMs: integerVar(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 3_600_000),
    shutdownDrainMs: integerVar(env, 'SHUTDOWN_DRAIN_MS', 1_000, 0, 60_000),
    rateLimits: Object.freeze({
      perKeyPerMinute: integerVar(env, 'RATE_LIMIT_PER_KEY', 1200, 0, 1_000_000_000),
      failedAuthPerMinute: integerVar(env, 'RATE_LIMIT_FAILED_AUTH_PER_IP', 30, 0, 1_000_000_000),
      redisUrl: redisVar(env),
    }),
    trustProxy: trustProxyVar(env),
    timeouts: timeoutsVar(env),
    metrics: metricsVar(env, port, host),
    listenBacklog: integerVar(env, 'LISTEN_BACKLOG', 4096, 1, 65535),
    overload: Object.freeze({
      maxEventLoopDelayMs: integerVar(env, 'OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', 100, 0, 60_000),
      maxHeapUsedMb: nonEmpty(env, 'OVERLOAD_MAX_HEAP_MB') === undefined ? undefined : integerVar(env, 'OVERLOAD_MAX_HEAP_MB', 0, 0, 1_048_576),
    }),
  })
}

function metricsVar(env: Env, port: number, host: string): Config['metrics'] {
  const text = nonEmpty(env, 'METRICS_PORT') ?? '9464'
  if (text === 'off') return undefined
  const metricsPort = Number(text)
  if (!/^\d+$/.test(text) || metricsPort < 1 || metricsPort > 65535) {
    throw new ConfigError('METRICS_PORT', `must be an integer from 1 to 65535, or off, got "${text}"`)
  }
  if (metricsPort === port) throw new ConfigError('METRICS_PORT', `must differ from PORT (${port}), or be off`)
  return Object.freeze({ port: metricsPort, host: nonEmpty(env, 'METRICS_HOST') ?? host })
}

function redisVar(env: Env): string | undefined {
  const text = nonEmpty(env, 'REDIS_URL')
  if (text === undefined) return undefined
  if (!/^rediss?:\/\/[^/]/.test(text)) {
    throw new ConfigError('REDIS_URL', `must start with redis:// or rediss:// (got "${withoutPassword(text)}")`)
  }
  return text
}

function trustProxyVar(env: Env): boolean | number | string {
  const text = nonEmpty(env, 'TRUST_PROXY')
  if (text === undefined || text === 'false') return false
  if (text === 'true') return true
  if (/^[1-9][0-9]?$/.test(text)) return Number(text)
  if (/^[0-9a-fA-F.:/]+(\s*,\s*[0-9a-fA-F.:/]+)*$/.test(text)) return text
  throw new ConfigError('TRUST_PROXY', `must be true, false, a hop count or a list of addresses/CIDRs, got "${text}"`)
}

function timeoutsVar(env: Env): Config['timeouts'] {
  const requestMs = integerVar(env, 'REQUEST_TIMEOUT_MS', 10_000, 1_000, 600_000)
  const headersMs = integerVar(env, 'HEADERS_TIMEOUT_MS', 5_000, 1_000, 600_000)
  if (headersMs > requestMs) {
    throw new ConfigError('HEADERS_TIMEOUT_MS', `must not exceed REQUEST_TIMEOUT_MS (${requestMs}), got ${headersMs}`)
  }
  return Object.freeze({ requestMs, headersMs, keepAliveMs: integerVar(env, 'KEEP_ALIVE_TIMEOUT_MS', 5_000, 1_000, 600_000) })
}

function nonEmpty(env: Env, name: string): string | undefined {
  const value = env[name]
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

function integerVar(env: Env, name: string, fallback: number, min: number, max: number): number {
  const text = nonEmpty(env, name)
  if (text === undefined) return fallback
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${text}"`)
  }
  return Number(text)
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const text = nonEmpty(env, name)
  if (text === undefined) return fallback
  if (!(allowed as readonly string[]).includes(text)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${text}"`)
  }
  return text as T
}

function originVar(env: Env, name: string): string | undefined {
  const text = nonEmpty(env, name)
  if (text === undefined) return undefined
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new ConfigError(name, `must be an absolute http(s) URL, got "${text}"`)
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '') {
    throw new ConfigError(name, `must be an http(s) URL without query or fragment, got "${text}"`)
  }
  return url.href.replace(/\/+$/, '')
}

function instantVar(env: Env, name: string, fallback: string): Date {
  const text = nonEmpty(env, name) ?? fallback
  const date = new Date(text)
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(date.getTime())) {
    throw new ConfigError(name, `must be an ISO 8601 date-time such as 2026-11-22T00:00:00Z, got "${text}"`)
  }
  return date
}

function databaseVar(env: Env, cwd: string): DatabaseConfig {
  const text = nonEmpty(env, 'DATABASE_URL')
  if (text === undefined) return { engine: 'sqlite', path: path.join(cwd, 'data', 'petstore.db') }
  if (text.startsWith('sqlite://')) {
    const file = decodeURIComponent(text.slice('sqlite://'.length))
    if (!path.isAbsolute(file)) {
      throw new ConfigError('DATABASE_URL', `must name an absolute path, as in sqlite:///var/lib/petstore.db, got "${text}"`)
    }
    return { engine: 'sqlite', path: file }
  }
  if (/^postgres(ql)?:\/\//.test(text)) {
    try {
      new URL(text)
    } catch {
      throw new ConfigError('DATABASE_URL', `is not a valid URL (got "${withoutPassword(text)}")`)
    }
    return { engine: 'postgres', url: text, poolSize: integerVar(env, 'DATABASE_POOL_SIZE', 10, 1, 1000) }
  }
  throw new ConfigError(
    'DATABASE_URL',
    `must start with sqlite://, postgres:// or postgresql:// (got "${withoutPassword(text)}")`,
  )
}

function withoutPassword(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@')
}
