import { lookup } from 'node:dns/promises'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'

const ENVIRONMENTS = ['production', 'staging'] as const
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const
const TRACES_SAMPLERS = [
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
  'always_on',
  'always_off',
  'traceidratio',
] as const

export type Environment = (typeof ENVIRONMENTS)[number]
type LogLevel = (typeof LOG_LEVELS)[number]
type TracesSampler = (typeof TRACES_SAMPLERS)[number]

/** OpenTelemetry tracing (docs/decisions/0019-tracing.md): the `OTEL_…` variables the service reads. */
export interface TracingConfig {
  /** Where spans are posted: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`. */
  readonly url: string
  readonly protocol: (typeof OTLP_PROTOCOLS)[number]
  /** Sent with every export, e.g. a collector's token: never logged. */
  readonly headers: Readonly<Record<string, string>>
  readonly serviceName: string
  readonly resourceAttributes: Readonly<Record<string, string>>
  readonly sampler: TracesSampler
  /** The ratio of new traces kept by the `traceidratio` samplers, from 0 to 1. */
  readonly samplerRatio: number
}

export type DatabaseConfig =
  | {
      engine: 'sqlite'
      path: string
      /**
       * The folder is made if missing: only for the unset default. A path the operator wrote must be in a
       * folder that exists, so that a typo in it stops the service instead of starting an empty store.
       */
      createFolder?: boolean
    }
  | {
      engine: 'postgres'
      url: string
      poolSize: number
      /** Queries go as named prepared statements, parsed once per connection; false: unnamed, for a transaction pooler. */
      preparedStatements: boolean
      /** Streaming standbys (or poolers in front of them) that reads may go to (docs/decisions/0023-read-replicas.md); none when absent. */
      replicaUrls?: readonly string[]
      /** A standby whose replay is further behind the primary than this serves nothing. */
      replicaMaxLagMs?: number
    }

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
  /** Whether each request's log line names the client's address (LOG_CLIENT_ADDRESS). */
  readonly logClientAddress: boolean
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
  /** Origins whose browser pages may call the API (CORS), exactly as browsers send `Origin`; empty: none. */
  readonly corsOrigins: readonly string[]
  readonly timeouts: {
    /** Whole request, headers and body, from its first byte. */
    readonly requestMs: number
    readonly headersMs: number
    /** An idle keep-alive connection is closed after this long. */
    readonly keepAliveMs: number
  }
  /**
   * The listener of `GET /metrics`, apart from the API port; undefined when METRICS_PORT=off.
   * `chosen`: METRICS_PORT was set, so a port already taken stops the service (the default only warns).
   * `hostVariable`: the variable that chose `host`, METRICS_HOST or (unset) HOST, to blame for an address this machine lacks.
   */
  readonly metrics: Readonly<{ port: number; host: string; chosen: boolean; hostVariable: 'METRICS_HOST' | 'HOST' }> | undefined
  /** Connections the kernel queues for the API port until the service accepts them (the listen backlog). */
  readonly listenBacklog: number
  /** When new requests are answered 503 `overloaded` instead of being queued; 0 turns a check off. */
  readonly overload: {
    /** Mean event-loop delay over one sample, in milliseconds. */
    readonly maxEventLoopDelayMs: number
    /** V8 heap in use, in MiB; undefined: 90 % of the heap limit of the process that serves. */
    readonly maxHeapUsedMb: number | undefined
  }
  /** Undefined unless an OTLP endpoint is set: then nothing of OpenTelemetry is loaded. */
  readonly tracing: TracingConfig | undefined
  /** The certificate and key the API port serves HTTPS with (absolute paths); undefined: plain HTTP. */
  readonly tls: Readonly<{ certFile: string; keyFile: string }> | undefined
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

/** One configuration variable: what it means, what it accepts and what it is when unset. */
export type ConfigVariable = {
  /** What it means; the range and default are appended from the fields below. */
  readonly describe: string
  /** Inclusive bounds of an integer variable, enforced by `loadConfig`. */
  readonly min?: number
  readonly max?: number
  /** The only values a variable accepts. */
  readonly values?: readonly string[]
} & (
  | {
      /** The value used when unset, as it would be written in the environment; it goes through the same checks. */
      readonly default: string
      readonly unset?: never
    }
  | {
      /** What an unset variable means, where that is no single value: a derived default, or none at all. */
      readonly unset: string
      readonly default?: never
    }
)

/**
 * The variables that may hold a secret: a password in a URL, a collector's token. Each may instead be read
 * from the file its `_FILE` variable names, so that the secret is not in the environment, where the same
 * user reads it (/proc/<pid>/environ) and `systemctl show` and crash reporters print it.
 */
const SECRET_VARIABLES = ['DATABASE_URL', 'DATABASE_REPLICA_URLS', 'REDIS_URL', 'OTEL_EXPORTER_OTLP_HEADERS'] as const

const FROM_A_FILE =
  'read once at start without its trailing newline: a systemd credential (`%d/name`) or a mounted Kubernetes Secret, so the secret stays out of the environment. Not together with it'

/**
 * Every variable the service reads, written once: `loadConfig` takes its range and default from here,
 * `petstore serve --help` prints it, and a test checks the README table and `.env.example` against it.
 */
export const CONFIG_VARIABLES = {
  PORT: { describe: 'TCP port to listen on', min: 1, max: 65535, default: '8080' },
  HOST: { describe: 'Address to listen on, an IP address or a host name; 0.0.0.0 is all interfaces', default: '0.0.0.0' },
  DATABASE_URL: {
    describe:
      '`sqlite:///abs/path.db` for another SQLite file; `postgres://user:password@host:5432/db` (or `postgresql://`) for PostgreSQL',
    unset: 'Unset: SQLite at ./data/petstore.db',
  },
  DATABASE_URL_FILE: {
    describe: `A file holding DATABASE_URL instead, ${FROM_A_FILE}`,
    unset: 'Unset: DATABASE_URL',
  },
  DATABASE_POOL_SIZE: { describe: 'PostgreSQL connections per process', min: 1, max: 1000, default: '10' },
  DATABASE_PREPARED_STATEMENTS: {
    describe:
      'PostgreSQL queries as named prepared statements, parsed once per connection; `false` behind a pooler in transaction mode that does not keep them (PgBouncer before 1.21, or without `max_prepared_statements`). A server that loses one turns them off, with a warning',
    values: ['true', 'false'],
    default: 'true',
  },
  DATABASE_REPLICA_URLS: {
    describe:
      'Comma-separated `postgres://` URLs of streaming standbys of DATABASE_URL (or of a pooler in front of them) that reads may go to, with DATABASE_POOL_SIZE connections each; writes stay on DATABASE_URL. PostgreSQL only',
    unset: 'Unset: every query goes to DATABASE_URL',
  },
  DATABASE_REPLICA_URLS_FILE: { describe: `A file holding DATABASE_REPLICA_URLS instead, ${FROM_A_FILE}`, unset: 'Unset: DATABASE_REPLICA_URLS' },
  DATABASE_REPLICA_MAX_LAG_MS: {
    describe: 'A standby whose replay is further behind the primary than this serves no read until it catches up',
    min: 100,
    max: 3_600_000,
    default: '1000',
  },
  PETSTORE_ENV: { describe: 'Keys are `ps_live_…` in production, `ps_test_…` in staging', values: ENVIRONMENTS, default: 'production' },
  PUBLIC_BASE_URL: {
    describe: 'Public origin of this deployment, e.g. https://api.example.com, without credentials (it is sent to every client)',
    unset: 'Default http://localhost:PORT, https://localhost:PORT with TLS_CERT_FILE',
  },
  PRODUCTION_BASE_URL: {
    describe: 'Origin of production, listed in the OpenAPI servers, without credentials',
    unset: 'Default PUBLIC_BASE_URL when PETSTORE_ENV=production',
  },
  STAGING_BASE_URL: { describe: 'Origin of staging, listed in the OpenAPI servers, without credentials', unset: 'Default PUBLIC_BASE_URL when PETSTORE_ENV=staging' },
  LOG_LEVEL: { describe: 'The least severe level logged', values: LOG_LEVELS, default: 'info' },
  LOG_CLIENT_ADDRESS: {
    describe:
      "Each request's log line names the client's address (`clientAddress`: the TCP peer, or what a proxy trusted by TRUST_PROXY forwarded), to trace abuse to its source; `false` leaves it out where the deployment may not keep it (it is personal data)",
    values: ['true', 'false'],
    default: 'true',
  },
  GETPET_DEPRECATED_AT: {
    describe: 'ISO 8601 instant getPet was deprecated (the `Deprecation` header), no later than its sunset (`serve` refuses a later one)',
    default: '2026-11-22T00:00:00Z',
  },
  SHUTDOWN_TIMEOUT_MS: {
    describe: 'How long SIGTERM/SIGINT waits for in-flight requests before giving up',
    min: 0,
    max: 3_600_000,
    default: '10000',
  },
  SHUTDOWN_DRAIN_MS: {
    describe:
      'On SIGTERM/SIGINT, how long the server still accepts and serves connections, answering /readyz 503, before it stops listening; then also how long a connection may stay silent before it is closed',
    min: 0,
    max: 60_000,
    default: '1000',
  },
  RATE_LIMIT_PER_KEY: { describe: 'Requests per minute per API key; 0 = no limit', min: 0, max: 1_000_000_000, default: '1200' },
  RATE_LIMIT_FAILED_AUTH_PER_IP: {
    describe: 'Failed authentications per minute per client address; 0 = no limit',
    min: 0,
    max: 1_000_000_000,
    default: '30',
  },
  REDIS_URL: {
    describe: '`redis://host:6379` (or `rediss://`) to share them between instances',
    unset: 'Unset: rate-limit counters in memory, per process',
  },
  REDIS_URL_FILE: { describe: `A file holding REDIS_URL instead, ${FROM_A_FILE}`, unset: 'Unset: REDIS_URL' },
  TRUST_PROXY: {
    describe: '`true`, a hop count from 1 to 99, or comma-separated proxy IP addresses and ranges (CIDR, or an IPv4 netmask) whose X-Forwarded-For is trusted',
    unset: 'Unset: the client address is the TCP peer',
  },
  CORS_ORIGINS: {
    describe:
      'Comma-separated origins (`scheme://host[:port]`, as browsers send `Origin`) whose pages may call the API from a browser',
    unset: 'Unset: no CORS headers, so browsers let only pages of the API\'s own origin read its answers',
  },
  REQUEST_TIMEOUT_MS: {
    describe: 'Time allowed to receive a whole request, headers and body',
    min: 1_000,
    max: 600_000,
    default: '10000',
  },
  HEADERS_TIMEOUT_MS: {
    describe: 'Time allowed to receive the request headers, at most REQUEST_TIMEOUT_MS',
    min: 1_000,
    max: 600_000,
    default: '5000',
  },
  KEEP_ALIVE_TIMEOUT_MS: {
    describe: 'An idle keep-alive connection is closed after this long',
    min: 1_000,
    max: 600_000,
    default: '5000',
  },
  METRICS_PORT: {
    describe: 'TCP port of the Prometheus metrics listener, not PORT; `off` for none',
    min: 1,
    max: 65535,
    default: '9464',
  },
  METRICS_HOST: { describe: 'Address the metrics listener listens on, an IP address or a host name', unset: 'Default HOST' },
  LISTEN_BACKLOG: {
    describe:
      'Connections the kernel queues for the API port until the service accepts them; Linux caps it at net.core.somaxconn',
    min: 1,
    max: 65535,
    default: '4096',
  },
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: {
    describe: 'New requests are answered 503 `overloaded` while the mean event-loop delay over the last sample is above this; 0 = off',
    min: 0,
    max: 60_000,
    default: '100',
  },
  OVERLOAD_MAX_HEAP_MB: {
    describe: 'New requests are answered 503 `overloaded` while the V8 heap in use is above this many MiB; 0 = off',
    min: 0,
    max: 1_048_576,
    unset: 'Default 90 % of the heap limit (`--max-old-space-size`, or what Node derives from the memory available)',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    describe: 'Base URL of an OpenTelemetry collector speaking OTLP/HTTP, e.g. http://localhost:4318: traces are posted to its `/v1/traces`',
    unset: 'Unset: no tracing, and nothing of OpenTelemetry is loaded',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    describe: 'Full URL traces are posted to, instead of OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`; setting it also turns tracing on',
    unset: 'Default OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces',
  },
  OTEL_EXPORTER_OTLP_PROTOCOL: { describe: 'How spans are encoded', values: OTLP_PROTOCOLS, default: 'http/protobuf' },
  OTEL_EXPORTER_OTLP_HEADERS: {
    describe: 'Headers sent with each export, `name=value` pairs separated by commas (e.g. a collector token); percent-encoded values',
    unset: 'Unset: none',
  },
  OTEL_EXPORTER_OTLP_HEADERS_FILE: {
    describe: `A file holding OTEL_EXPORTER_OTLP_HEADERS instead, ${FROM_A_FILE}`,
    unset: 'Unset: OTEL_EXPORTER_OTLP_HEADERS',
  },
  OTEL_SERVICE_NAME: { describe: 'The `service.name` of the spans', default: 'petstore' },
  OTEL_RESOURCE_ATTRIBUTES: {
    describe: 'More resource attributes of the spans, `key=value` pairs separated by commas (e.g. `deployment.environment.name=staging`)',
    unset: 'Unset: none',
  },
  OTEL_TRACES_SAMPLER: { describe: 'Which traces are recorded', values: TRACES_SAMPLERS, default: 'parentbased_always_on' },
  OTEL_TRACES_SAMPLER_ARG: {
    describe: 'The ratio of new traces the `traceidratio` samplers keep, from 0 to 1',
    unset: 'Default 1.0',
  },
  TLS_CERT_FILE: {
    describe:
      'PEM certificate chain (leaf first) the API port serves HTTPS with, together with TLS_KEY_FILE; reloaded when the file changes or on SIGHUP',
    unset: 'Unset: plain HTTP, for a deployment behind a proxy that terminates TLS',
  },
  TLS_KEY_FILE: { describe: 'PEM private key of TLS_CERT_FILE', unset: 'Unset: plain HTTP' },
} as const satisfies Record<string, ConfigVariable>

type Table = typeof CONFIG_VARIABLES
type VariableName = keyof Table
type IntegerName = { [N in VariableName]: Table[N] extends { min: number } ? N : never }[VariableName]
type WithDefault = { [N in VariableName]: Table[N] extends { default: string } ? N : never }[VariableName]
type OneOfName = { [N in VariableName]: Table[N] extends { values: readonly string[] } ? N : never }[VariableName]

/** The names of `CONFIG_VARIABLES`, in its order. */
export const CONFIG_NAMES = Object.keys(CONFIG_VARIABLES) as readonly VariableName[]

/** What a variable accepts, as the help and the docs say it: `1-65535`, `production or staging`, or undefined. */
export function variableRange(name: VariableName): string | undefined {
  const variable: ConfigVariable = CONFIG_VARIABLES[name]
  if (variable.values !== undefined) return `${variable.values.slice(0, -1).join(', ')} or ${variable.values.at(-1)}`
  return variable.min === undefined ? undefined : `${variable.min}-${variable.max}`
}

/** What an unset variable means: `Default 8080`, `Default HOST`, `Unset: …`. */
export function variableDefault(name: VariableName): string {
  const variable: ConfigVariable = CONFIG_VARIABLES[name]
  return variable.default === undefined ? variable.unset : `Default ${variable.default}`
}

/** One line of documentation for `name`, as `petstore serve --help` prints it. */
export function describeVariable(name: VariableName): string {
  const range = variableRange(name)
  return `${CONFIG_VARIABLES[name].describe}${range === undefined ? '' : ` (${range})`}. ${variableDefault(name)}.`
}

type Env = Readonly<Record<string, string | undefined>>

/**
 * Reads and validates the configuration once; the result is frozen.
 * `cwd` anchors the default SQLite path.
 */
export function loadConfig(env: Env, cwd: string = process.cwd()): Config {
  const files = new Map<string, { variable: string; at: string }>()
  const resolved = withSecretFiles(env, cwd, files)
  try {
    return loadFrom(resolved, cwd)
  } catch (error) {
    const file = error instanceof ConfigError ? files.get(error.variable) : undefined
    if (file === undefined) throw error
    // The message of the secret's own variable masks what it shows of the value, as it does for the environment.
    throw new ConfigError(file.variable, `names a file whose value is refused ("${file.at}"): ${(error as Error).message}`)
  }
}

/**
 * `env` with each secret read from the file its `_FILE` variable names, read once, here; `files` learns
 * which variable came from which file. An error names the variable and the path, never what the file holds.
 */
function withSecretFiles(env: Env, cwd: string, files: Map<string, { variable: string; at: string }>): Env {
  const resolved: Record<string, string | undefined> = { ...env }
  for (const name of SECRET_VARIABLES) {
    const variable = `${name}_FILE` as const
    const file = nonEmpty(env, variable)
    if (file === undefined) continue
    if ((env[name] ?? '') !== '') throw new ConfigError(variable, `and ${name} are both set: set only one of them`)
    const at = path.resolve(cwd, file)
    let text: string
    try {
      text = fs.readFileSync(at, 'utf8')
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message
      throw new ConfigError(variable, `names a file that cannot be read, "${at}" (${code})`)
    }
    // What `echo` and most editors end a file with; any other white space is refused as it is in the environment.
    text = text.replace(/\r?\n$/, '')
    if (text === '') throw new ConfigError(variable, `names an empty file, "${at}"`)
    resolved[name] = text
    resolved[variable] = undefined
    files.set(name, { variable, at })
  }
  return resolved
}

function loadFrom(env: Env, cwd: string): Config {
  const port = integerVar(env, 'PORT')
  const environment = oneOf(env, 'PETSTORE_ENV')
  const tls = tlsVar(env, cwd)
  // Location and Link must name the scheme the API port speaks.
  const publicBaseUrl = originVar(env, 'PUBLIC_BASE_URL') ?? `${tls === undefined ? 'http' : 'https'}://localhost:${port}`
  const servers: Partial<Record<Environment, string>> = {}
  const production = originVar(env, 'PRODUCTION_BASE_URL') ?? (environment === 'production' ? publicBaseUrl : undefined)
  const staging = originVar(env, 'STAGING_BASE_URL') ?? (environment === 'staging' ? publicBaseUrl : undefined)
  if (production !== undefined) servers.production = production
  if (staging !== undefined) servers.staging = staging

  const host = hostVar(env, 'HOST') ?? CONFIG_VARIABLES.HOST.default
  const maxHeapUsedMb = nonEmpty(env, 'OVERLOAD_MAX_HEAP_MB')

  return Object.freeze({
    port,
    host,
    database: Object.freeze(databaseVar(env, cwd)),
    environment,
    publicBaseUrl,
    servers: Object.freeze(servers),
    logLevel: oneOf(env, 'LOG_LEVEL'),
    logClientAddress: oneOf(env, 'LOG_CLIENT_ADDRESS') === 'true',
    getPetDeprecatedAt: instantVar(env, 'GETPET_DEPRECATED_AT'),
    shutdownTimeoutMs: integerVar(env, 'SHUTDOWN_TIMEOUT_MS'),
    shutdownDrainMs: integerVar(env, 'SHUTDOWN_DRAIN_MS'),
    rateLimits: Object.freeze({
      perKeyPerMinute: integerVar(env, 'RATE_LIMIT_PER_KEY'),
      failedAuthPerMinute: integerVar(env, 'RATE_LIMIT_FAILED_AUTH_PER_IP'),
      redisUrl: redisVar(env),
    }),
    trustProxy: trustProxyVar(env),
    corsOrigins: corsOriginsVar(env),
    timeouts: timeoutsVar(env),
    metrics: metricsVar(env, port, host),
    listenBacklog: integerVar(env, 'LISTEN_BACKLOG'),
    overload: Object.freeze({
      maxEventLoopDelayMs: integerVar(env, 'OVERLOAD_MAX_EVENT_LOOP_DELAY_MS'),
      // Unset is not a number: the server derives it from the heap limit of the process that serves.
      maxHeapUsedMb: maxHeapUsedMb === undefined ? undefined : integer('OVERLOAD_MAX_HEAP_MB', maxHeapUsedMb),
    }),
    tracing: tracingVar(env),
    tls,
  })
}

/**
 * Resolves HOST and METRICS_HOST when they are names, before anything listens: otherwise a name that
 * does not resolve stops the service with `getaddrinfo ENOTFOUND …`, which names no variable.
 */
export async function checkHostsResolve(config: Config, resolve: (host: string) => Promise<unknown> = lookup): Promise<void> {
  const hosts: [VariableName, string][] = [['HOST', config.host]]
  if (config.metrics !== undefined && config.metrics.host !== config.host) hosts.push(['METRICS_HOST', config.metrics.host])
  for (const [name, host] of hosts) {
    if (net.isIP(host) !== 0) continue
    try {
      await resolve(host)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message
      throw new ConfigError(name, `names a host that does not resolve, got "${host}" (${code})`)
    }
  }
}

/**
 * A failure of the `listener` (API, metrics) to listen on `address`, naming the variable of `variables` that
 * chose what failed: the port's for a port in use or not allowed, the host's for an address this machine
 * does not have or a name that does not resolve. Undefined for a failure that is not listening's, though
 * its code be the same (a folder that cannot be made is EACCES too).
 */
export function listenFailure(
  listener: string,
  address: { host: string; port: number },
  variables: { host: VariableName; port: VariableName },
  error: { code?: string | undefined; syscall?: string | undefined; message: string },
): Error | undefined {
  if (error.syscall !== undefined && error.syscall !== 'listen' && error.syscall !== 'getaddrinfo') return undefined
  const code = error.code ?? ''
  const variable =
    code === 'EADDRINUSE' || code === 'EACCES'
      ? variables.port
      : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code.startsWith('EAI_')
        ? variables.host
        : undefined
  if (variable === undefined) return undefined
  return new Error(`the ${listener} listener (${variable}) cannot listen on ${address.host}:${address.port}: ${error.message}`, { cause: error })
}

/** Both files or neither: half a pair would serve nothing, and plain HTTP would hide the mistake. */
function tlsVar(env: Env, cwd: string): Config['tls'] {
  const certFile = nonEmpty(env, 'TLS_CERT_FILE')
  const keyFile = nonEmpty(env, 'TLS_KEY_FILE')
  if (certFile === undefined && keyFile === undefined) return undefined
  if (certFile === undefined) throw new ConfigError('TLS_CERT_FILE', 'must be set when TLS_KEY_FILE is: the certificate of that key')
  if (keyFile === undefined) throw new ConfigError('TLS_KEY_FILE', 'must be set when TLS_CERT_FILE is: the private key of that certificate')
  return Object.freeze({ certFile: path.resolve(cwd, certFile), keyFile: path.resolve(cwd, keyFile) })
}

/**
 * An address to listen on: an IP literal, or a host name as RFC 1123 writes one. A dotted name whose
 * last label is a number is an IPv4 address or nothing (RFC 3696 §2), so `999.1.1.1` is refused here
 * rather than sent to the resolver.
 */
function hostVar(env: Env, name: 'HOST' | 'METRICS_HOST'): string | undefined {
  const text = nonEmpty(env, name)
  if (text === undefined || net.isIP(text) !== 0) return text
  const labels = text.replace(/\.$/, '').split('.')
  const valid =
    text.length <= 253 &&
    labels.every((label) => /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label)) &&
    !/^[0-9]+$/.test(labels.at(-1) ?? '')
  if (!valid) throw new ConfigError(name, `must be an IP address (such as 0.0.0.0, 127.0.0.1 or ::) or a host name, got "${text}"`)
  return text
}

/**
 * True when the environment asks for tracing: an OTLP endpoint is set. The entry point asks before it
 * loads anything, so that OpenTelemetry's hooks are in place before the modules they instrument.
 */
export function tracingWanted(env: Env): boolean {
  return nonEmpty(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined || nonEmpty(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== undefined
}

/** Every OTEL_ variable is checked even while tracing is off: a mistake shows before it is turned on. */
function tracingVar(env: Env): TracingConfig | undefined {
  const base = urlVar(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  const specific = urlVar(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  const ratioText = nonEmpty(env, 'OTEL_TRACES_SAMPLER_ARG') ?? '1.0'
  const samplerRatio = Number(ratioText)
  if (!/^\d+(\.\d+)?$/.test(ratioText) || samplerRatio > 1) {
    throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a number from 0 to 1, got "${ratioText}"`)
  }
  const tracing = {
    // The specification's rule: the base endpoint gets the signal's path appended, the specific one is used as is.
    url: specific ?? `${(base ?? '').replace(/\/+$/, '')}/v1/traces`,
    protocol: oneOf(env, 'OTEL_EXPORTER_OTLP_PROTOCOL'),
    // A header value is a credential: an error names the variable and the pair's position only.
    headers: Object.freeze(keyValuePairs(env, 'OTEL_EXPORTER_OTLP_HEADERS', /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/)),
    serviceName: textOrDefault(env, 'OTEL_SERVICE_NAME'),
    resourceAttributes: Object.freeze(keyValuePairs(env, 'OTEL_RESOURCE_ATTRIBUTES', /^[A-Za-z0-9._-]+$/)),
    sampler: oneOf(env, 'OTEL_TRACES_SAMPLER'),
    samplerRatio,
  }
  return base === undefined && specific === undefined ? undefined : Object.freeze(tracing)
}

/** An http(s) URL, which may have a path (a collector behind a proxy), without query or fragment. */
function urlVar(env: Env, name: VariableName): string | undefined {
  const text = nonEmpty(env, name)
  if (text === undefined) return undefined
  const url = parsedUrl(text)
  if (url === undefined || !isHttp(url) || url.search !== '' || url.hash !== '') {
    throw new ConfigError(name, `must be an http(s) URL without query or fragment, such as http://localhost:4318, got "${withoutPassword(text)}"`)
  }
  return url.href
}

/** The W3C Baggage-like list the OTEL_ variables use: `key=value,key=value`, values percent-encoded. */
function keyValuePairs(env: Env, name: VariableName, keyPattern: RegExp): Record<string, string> {
  const text = nonEmpty(env, name)
  const pairs: Record<string, string> = {}
  if (text === undefined) return pairs
  text.split(',').forEach((pair, i) => {
    const at = pair.indexOf('=')
    const key = pair.slice(0, at).trim()
    let value: string | undefined
    try {
      value = at === -1 ? undefined : decodeURIComponent(pair.slice(at + 1).trim())
    } catch {
      value = undefined
    }
    if (value === undefined || !keyPattern.test(key)) {
      throw new ConfigError(name, `must be key=value pairs separated by commas, values percent-encoded; pair ${i + 1} is not`)
    }
    pairs[key] = value
  })
  return pairs
}

function metricsVar(env: Env, port: number, host: string): Config['metrics'] {
  const text = textOrDefault(env, 'METRICS_PORT')
  if (text === 'off') return undefined
  const metricsPort = integer('METRICS_PORT', text, ', or off')
  if (metricsPort === port) throw new ConfigError('METRICS_PORT', `must differ from PORT (${port}), or be off`)
  const metricsHost = hostVar(env, 'METRICS_HOST')
  return Object.freeze({
    port: metricsPort,
    host: metricsHost ?? host,
    chosen: nonEmpty(env, 'METRICS_PORT') !== undefined,
    hostVariable: metricsHost === undefined ? 'HOST' : 'METRICS_HOST',
  })
}

function redisVar(env: Env): string | undefined {
  const text = nonEmpty(env, 'REDIS_URL')
  if (text === undefined) return undefined
  if (!/^rediss?:\/\/[^/]/.test(text)) {
    throw new ConfigError('REDIS_URL', `must start with redis:// or rediss:// (got "${withoutPassword(text)}")`)
  }
  return text
}

/**
 * Each entry of a list is checked here as Fastify's proxy-addr reads it (an address, or an address and a
 * prefix length or IPv4 netmask), since proxy-addr throws at start with a message that names no variable.
 */
function trustProxyVar(env: Env): boolean | number | string {
  const text = nonEmpty(env, 'TRUST_PROXY')
  if (text === undefined || text === 'false') return false
  if (text === 'true') return true
  if (/^[1-9][0-9]?$/.test(text)) return Number(text)
  for (const entry of text.split(',').map((part) => part.trim())) {
    const problem = proxyEntryProblem(entry)
    if (problem !== undefined) {
      throw new ConfigError(
        'TRUST_PROXY',
        `must be true, false, a hop count from 1 to 99, or a list of IP addresses and ranges such as 10.0.0.0/8, separated by commas; "${entry}" ${problem}`,
      )
    }
  }
  return text
}

/**
 * The warning a server logs at start when TRUST_PROXY is `true`: every peer is then a trusted proxy, so
 * the left-most X-Forwarded-For address is the client, whoever wrote it. A client that sends a made-up
 * one escapes the failed-authentication limit (each guess from a new address) and is logged as someone
 * else. Undefined for any other value.
 */
export function trustProxyWarning(config: Pick<Config, 'trustProxy'>): string | undefined {
  if (config.trustProxy !== true) return undefined
  return (
    'TRUST_PROXY=true trusts X-Forwarded-For from any peer: a client can make up its address, escape the failed-authentication ' +
    "limit and be logged as someone else. Set TRUST_PROXY to the proxies' addresses (such as 10.0.0.5 or 10.0.0.0/8) instead"
  )
}

/** Why `entry` is no address or range, or undefined when it is one. */
function proxyEntryProblem(entry: string): string | undefined {
  const slash = entry.lastIndexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const version = net.isIP(address)
  if (version === 0) return 'is not an IP address'
  if (slash === -1) return undefined
  const range = entry.slice(slash + 1)
  const max = version === 4 ? 32 : 128
  if (version === 4 && net.isIPv4(range)) {
    const mask = range.split('.').reduce((bits, octet) => bits * 256 + Number(octet), 0)
    // Only a mask of leading ones leaves a power of two below 2^32, and proxy-addr refuses any other.
    const hostBits = Math.log2(2 ** 32 - mask)
    return Number.isInteger(hostBits) && hostBits < 32 ? undefined : 'has a netmask that is not ones then zeros, such as 255.255.0.0'
  }
  return /^[0-9]+$/.test(range) && Number(range) >= 1 && Number(range) <= max ? undefined : `has a prefix length outside 1-${max}`
}

/**
 * Each entry exactly as a browser serialises the `Origin` header, since it is compared byte for byte: an
 * entry that differs (a trailing slash, a path, an upper-case host, a default port) would never match, and
 * the operator would only find out from a browser. `*` is refused: every origin is never meant.
 */
function corsOriginsVar(env: Env): readonly string[] {
  const text = nonEmpty(env, 'CORS_ORIGINS')
  if (text === undefined) return Object.freeze([])
  const origins = text.split(',').map((entry) => entry.trim())
  for (const entry of origins) {
    if (entry === '') throw new ConfigError('CORS_ORIGINS', `has an empty entry: separate origins with single commas, got "${text}"`)
    if (entry.includes('*')) {
      throw new ConfigError('CORS_ORIGINS', `must list exact origins; "*" (any origin or subdomain) is not accepted, got "${entry}"`)
    }
    const url = parsedUrl(entry)
    if (url === undefined || !isHttp(url)) {
      throw new ConfigError('CORS_ORIGINS', `must list http(s) origins such as https://app.example.com, got "${entry}"`)
    }
    if (url.origin !== entry) {
      throw new ConfigError(
        'CORS_ORIGINS',
        `must list each origin as browsers send it, scheme://host[:port] without path or trailing slash, got "${entry}" (did you mean "${url.origin}"?)`,
      )
    }
  }
  return Object.freeze([...new Set(origins)])
}

function timeoutsVar(env: Env): Config['timeouts'] {
  const requestMs = integerVar(env, 'REQUEST_TIMEOUT_MS')
  const headersMs = integerVar(env, 'HEADERS_TIMEOUT_MS')
  if (headersMs > requestMs) {
    throw new ConfigError('HEADERS_TIMEOUT_MS', `must not exceed REQUEST_TIMEOUT_MS (${requestMs}), got ${headersMs}`)
  }
  return Object.freeze({ requestMs, headersMs, keepAliveMs: integerVar(env, 'KEEP_ALIVE_TIMEOUT_MS') })
}

/**
 * The variable's text as given, or undefined when it is unset or empty (`PORT=` in an env file, as
 * OpenTelemetry's rules for its variables also say). Spaces around a value are refused, whatever the
 * variable, rather than trimmed for some and kept by others; the value is not echoed, as it may be a secret.
 */
function nonEmpty(env: Env, name: VariableName): string | undefined {
  const value = env[name]
  if (value === undefined || value === '') return undefined
  if (value.trim() !== value) throw new ConfigError(name, 'has spaces or other white space around its value: remove them')
  return value
}

/** The variable's text, or the default of the table when it is unset or blank. */
function textOrDefault(env: Env, name: WithDefault): string {
  return nonEmpty(env, name) ?? CONFIG_VARIABLES[name].default
}

function integerVar(env: Env, name: IntegerName & WithDefault): number {
  return integer(name, textOrDefault(env, name))
}

/**
 * `text` as an integer within the range of `name` in the table; `alternative` names what else it may be.
 * The one parser of every integer variable: decimal digits only, so no sign, no leading zero (`041291`
 * is octal to some tools and a typo to most), no exponent and no fraction.
 */
function integer(name: IntegerName, text: string, alternative = ''): number {
  const { min, max } = CONFIG_VARIABLES[name]
  if (!/^(0|[1-9][0-9]*)$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new ConfigError(name, `must be a whole number from ${min} to ${max} in plain digits${alternative}, got "${text}"`)
  }
  return Number(text)
}

function oneOf<N extends OneOfName>(env: Env, name: N): Table[N]['values'][number] {
  const text = textOrDefault(env, name)
  const allowed: readonly string[] = CONFIG_VARIABLES[name].values
  if (!allowed.includes(text)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${text}"`)
  }
  return text as Table[N]['values'][number]
}

/** `text` as an absolute URL, or undefined when it is not one. */
function parsedUrl(text: string): URL | undefined {
  try {
    return new URL(text)
  } catch {
    return undefined
  }
}

const isHttp = (url: URL): boolean => url.protocol === 'http:' || url.protocol === 'https:'

/** An origin that is sent to every client, in `Location`, `Link` and the OpenAPI `servers`. */
function originVar(env: Env, name: VariableName): string | undefined {
  const text = nonEmpty(env, name)
  if (text === undefined) return undefined
  const url = parsedUrl(text)
  if (url === undefined) throw new ConfigError(name, `must be an absolute http(s) URL, got "${withoutPassword(text)}"`)
  if (url.username !== '' || url.password !== '') {
    throw new ConfigError(name, `must not hold credentials (user:password@): every client is sent it, got "${withoutPassword(text)}"`)
  }
  if (!isHttp(url) || url.search !== '' || url.hash !== '') {
    throw new ConfigError(name, `must be an http(s) URL without query or fragment, got "${withoutPassword(text)}"`)
  }
  return url.href.replace(/\/+$/, '')
}

function instantVar(env: Env, name: WithDefault): Date {
  const text = textOrDefault(env, name)
  const date = new Date(text)
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(date.getTime())) {
    throw new ConfigError(name, `must be an ISO 8601 date-time such as 2026-11-22T00:00:00Z, got "${text}"`)
  }
  return date
}

function databaseVar(env: Env, cwd: string): DatabaseConfig {
  const text = nonEmpty(env, 'DATABASE_URL')
  // Checked whichever the engine: a mistake shows before the day the deployment moves to PostgreSQL.
  const poolSize = integerVar(env, 'DATABASE_POOL_SIZE')
  const preparedStatements = oneOf(env, 'DATABASE_PREPARED_STATEMENTS') === 'true'
  const replicas = replicasVar(env, integerVar(env, 'DATABASE_REPLICA_MAX_LAG_MS'))
  if (!/^postgres(ql)?:\/\//.test(text ?? '') && replicas.replicaUrls !== undefined) {
    throw new ConfigError('DATABASE_REPLICA_URLS', 'names standbys of PostgreSQL, but DATABASE_URL is not a postgres:// URL: set DATABASE_URL to their primary, or unset this')
  }
  if (text === undefined) return { engine: 'sqlite', path: path.join(cwd, 'data', 'petstore.db'), createFolder: true }
  if (text.startsWith('sqlite://')) {
    const file = decodeURIComponent(text.slice('sqlite://'.length))
    if (!path.isAbsolute(file)) {
      throw new ConfigError('DATABASE_URL', `must name an absolute path, as in sqlite:///var/lib/petstore.db, got "${text}"`)
    }
    return { engine: 'sqlite', path: file }
  }
  if (/^postgres(ql)?:\/\//.test(text)) {
    if (parsedUrl(text) === undefined) throw new ConfigError('DATABASE_URL', `is not a valid URL (got "${withoutPassword(text)}")`)
    return { engine: 'postgres', url: text, poolSize, preparedStatements, ...replicas }
  }
  throw new ConfigError(
    'DATABASE_URL',
    `must start with sqlite://, postgres:// or postgresql:// (got "${withoutPassword(text)}")`,
  )
}

/** The standbys of DATABASE_REPLICA_URLS, each a PostgreSQL URL; none when it is unset. */
function replicasVar(env: Env, replicaMaxLagMs: number): { replicaUrls?: readonly string[]; replicaMaxLagMs?: number } {
  const text = nonEmpty(env, 'DATABASE_REPLICA_URLS')
  if (text === undefined) return {}
  const urls = text.split(',')
  urls.forEach((url, i) => {
    if (!/^postgres(ql)?:\/\/[^/]/.test(url) || parsedUrl(url) === undefined) {
      throw new ConfigError('DATABASE_REPLICA_URLS', `must be postgres:// URLs separated by commas; entry ${i + 1} is not ("${withoutPassword(url)}")`)
    }
  })
  if (new Set(urls).size !== urls.length) throw new ConfigError('DATABASE_REPLICA_URLS', 'names a standby twice')
  return { replicaUrls: Object.freeze(urls), replicaMaxLagMs }
}

/**
 * `url` without its user and password, for a message: `postgres://***@host/db`. Everything up to the last `@`
 * is masked, since a malformed URL's password may hold a `/` or an `@`, or come without `//` (`host:secret@x`).
 */
export function withoutPassword(url: string): string {
  return url.replace(/^(.*?\/\/)?.*@/, (_, scheme: string | undefined) => `${scheme ?? ''}***@`)
}
