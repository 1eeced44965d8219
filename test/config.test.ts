import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import Fastify from 'fastify'
import { CONFIG_NAMES, CONFIG_VARIABLES, type ConfigVariable, ConfigError, checkHostsResolve, loadConfig, trustProxyWarning, variableDefault, variableRange } from '../src/config.js'
import { checkGetPetDeprecatedAt } from '../src/deprecations/deprecations.policy.js'
import { ROOT } from './helper.js'

describe('configuration', () => {
  it('has working defaults for every variable', () => {
    const config = loadConfig({}, '/srv/petstore')
    assert.equal(config.port, 8080)
    assert.equal(config.host, '0.0.0.0')
    assert.deepEqual(config.database, { engine: 'sqlite', path: '/srv/petstore/data/petstore.db', createFolder: true })
    assert.equal(config.environment, 'production')
    assert.equal(config.publicBaseUrl, 'http://localhost:8080')
    assert.deepEqual(config.servers, { production: 'http://localhost:8080' })
    assert.equal(config.logLevel, 'info')
    assert.equal(config.getPetDeprecatedAt.toISOString(), '2026-11-22T00:00:00.000Z')
    assert.deepEqual(config.rateLimits, { perKeyPerMinute: 1200, failedAuthPerMinute: 30, redisUrl: undefined })
    assert.equal(config.trustProxy, false)
    assert.deepEqual(config.timeouts, { requestMs: 10_000, headersMs: 5_000, keepAliveMs: 5_000 })
    assert.equal(config.shutdownDrainMs, 1_000)
    assert.equal(config.listenBacklog, 4096)
    assert.deepEqual(config.overload, { maxEventLoopDelayMs: 100, maxHeapUsedMb: undefined })
    assert.ok(Object.isFrozen(config))
    assert.ok(Object.isFrozen(config.overload))
  })

  it('reads the overload thresholds and the listen backlog, 0 turning a threshold off', () => {
    const config = loadConfig({ LISTEN_BACKLOG: '1024', OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', OVERLOAD_MAX_HEAP_MB: '512' }, '/')
    assert.equal(config.listenBacklog, 1024)
    assert.deepEqual(config.overload, { maxEventLoopDelayMs: 0, maxHeapUsedMb: 512 })
    assert.deepEqual(loadConfig({ OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '250', OVERLOAD_MAX_HEAP_MB: '0' }, '/').overload, {
      maxEventLoopDelayMs: 250,
      maxHeapUsedMb: 0,
    })
  })

  it('reads every variable', () => {
    const config = loadConfig(
      {
        PORT: '9000',
        HOST: '127.0.0.1',
        DATABASE_URL: 'sqlite:///var/lib/petstore/pets.db',
        PETSTORE_ENV: 'staging',
        PUBLIC_BASE_URL: 'https://staging.example.org/',
        PRODUCTION_BASE_URL: 'https://api.example.org',
        LOG_LEVEL: 'warn',
        GETPET_DEPRECATED_AT: '2027-01-01T00:00:00Z',
        SHUTDOWN_TIMEOUT_MS: '2500',
      },
      '/',
    )
    assert.equal(config.port, 9000)
    assert.equal(config.host, '127.0.0.1')
    assert.deepEqual(config.database, { engine: 'sqlite', path: '/var/lib/petstore/pets.db' })
    assert.equal(config.environment, 'staging')
    assert.equal(config.publicBaseUrl, 'https://staging.example.org')
    assert.deepEqual(config.servers, { production: 'https://api.example.org', staging: 'https://staging.example.org' })
    assert.equal(config.logLevel, 'warn')
    assert.equal(config.shutdownTimeoutMs, 2500)
  })

  const bad: [string, string][] = [
    ['PORT', 'abc'],
    ['PORT', '0'],
    ['PORT', '65536'],
    ['PORT', '80.5'],
    ['HOST', '999.1.1.1'],
    ['HOST', 'example .org'],
    ['HOST', '[::1]'],
    ['METRICS_HOST', '1.2.3'],
    ['METRICS_HOST', 'host_name.internal'],
    ['PETSTORE_ENV', 'prod'],
    ['LOG_LEVEL', 'verbose'],
    ['DATABASE_URL', 'mysql://db/petstore'],
    ['DATABASE_URL', 'sqlite://relative.db'],
    ['PUBLIC_BASE_URL', 'not a url'],
    ['PUBLIC_BASE_URL', 'ftp://example.org'],
    ['STAGING_BASE_URL', 'https://example.org/?q=1'],
    ['GETPET_DEPRECATED_AT', 'yesterday'],
    ['SHUTDOWN_TIMEOUT_MS', '-1'],
    ['RATE_LIMIT_PER_KEY', '-5'],
    ['RATE_LIMIT_FAILED_AUTH_PER_IP', 'many'],
    ['REDIS_URL', 'localhost:6379'],
    ['TRUST_PROXY', 'sometimes'],
    ['TRUST_PROXY', '300.1.1.1'],
    ['TRUST_PROXY', '10.0.0.0/33'],
    ['TRUST_PROXY', '10.0.0.0/0'],
    ['TRUST_PROXY', '10.0.0.1, ::1/129'],
    ['TRUST_PROXY', '10.0.0.0/255.0.255.0'],
    ['TRUST_PROXY', '10.0.0.0/'],
    ['TRUST_PROXY', '10.0.0.1,,10.0.0.2'],
    ['TRUST_PROXY', '0'],
    ['PUBLIC_BASE_URL', 'https://user:hunter2@api.example.com'],
    ['PUBLIC_BASE_URL', 'https://user@api.example.com'],
    ['PRODUCTION_BASE_URL', 'https://user:hunter2@api.example.com'],
    ['STAGING_BASE_URL', 'https://:hunter2@staging.example.com'],
    ['REQUEST_TIMEOUT_MS', '10'],
    ['HEADERS_TIMEOUT_MS', '20000'],
    ['KEEP_ALIVE_TIMEOUT_MS', '0'],
    ['SHUTDOWN_DRAIN_MS', '60001'],
    ['LISTEN_BACKLOG', '0'],
    ['LISTEN_BACKLOG', '65536'],
    ['LISTEN_BACKLOG', 'lots'],
    ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', '-1'],
    ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', '60001'],
    ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', '1.5'],
    ['OVERLOAD_MAX_HEAP_MB', 'half'],
    ['OVERLOAD_MAX_HEAP_MB', '1048577'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'localhost:4318'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector:4317'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'http://collector:4318/v1/traces?x=1'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'authorization'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'a b=c'],
    ['OTEL_TRACES_SAMPLER', 'sometimes'],
    ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
    ['OTEL_TRACES_SAMPLER_ARG', 'half'],
  ]
  for (const [variable, value] of bad) {
    it(`refuses ${variable}=${JSON.stringify(value)} with an error naming ${variable}`, () => {
      assert.throws(
        () => loadConfig({ [variable]: value }, '/'),
        (error: unknown) => error instanceof ConfigError && error.variable === variable && error.message.startsWith(variable),
      )
    })
  }

  it('turns tracing on only with an OTLP endpoint, and reads the OTEL_ variables', () => {
    assert.equal(loadConfig({}, '/').tracing, undefined)
    assert.equal(loadConfig({ OTEL_SERVICE_NAME: 'pets', OTEL_TRACES_SAMPLER: 'always_on' }, '/').tracing, undefined)
    assert.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318' }, '/').tracing, {
      url: 'http://localhost:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      serviceName: 'petstore',
      resourceAttributes: {},
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    })
    const tracing = loadConfig(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example.org/base/',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-team=pets',
        OTEL_SERVICE_NAME: 'pets-eu',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging,service.namespace=shop',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      },
      '/',
    ).tracing
    assert.deepEqual(tracing, {
      url: 'https://otel.example.org/base/v1/traces',
      protocol: 'http/json',
      headers: { authorization: 'Bearer abc', 'x-team': 'pets' },
      serviceName: 'pets-eu',
      resourceAttributes: { 'deployment.environment.name': 'staging', 'service.namespace': 'shop' },
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    })
    // The traces endpoint is used as given, and alone turns tracing on.
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/custom' }, '/').tracing?.url, 'http://collector:4318/custom')
  })

  it('does not echo an OTLP header value in its error', () => {
    assert.throws(
      () => loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20hunter2,broken' }, '/'),
      (error: unknown) => error instanceof ConfigError && error.variable === 'OTEL_EXPORTER_OTLP_HEADERS' && !error.message.includes('hunter2'),
    )
  })

  it('does not echo a password from DATABASE_URL in its error', () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'mysql://user:hunter2@db/petstore' }, '/'),
      (error: unknown) => error instanceof ConfigError && !error.message.includes('hunter2'),
    )
  })

  it('refuses credentials in PUBLIC_BASE_URL and the servers, since every client is sent them, without echoing the password', () => {
    for (const name of ['PUBLIC_BASE_URL', 'PRODUCTION_BASE_URL', 'STAGING_BASE_URL']) {
      assert.throws(
        () => loadConfig({ [name]: 'https://deploy:hunter2@api.example.com' }, '/'),
        (error: unknown) =>
          error instanceof ConfigError && error.variable === name && /credentials/.test(error.message) && !error.message.includes('hunter2'),
        name,
      )
    }
  })

  it('refuses a GETPET_DEPRECATED_AT later than the sunset, naming both, and accepts one at the sunset (the check serve makes)', () => {
    for (const late of ['2031-01-01T00:00:00Z', '2030-12-05T00:00:00.001Z']) {
      assert.throws(
        () => checkGetPetDeprecatedAt(loadConfig({ GETPET_DEPRECATED_AT: late }, '/')),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message ===
            `GETPET_DEPRECATED_AT must not be later than the sunset of getPet, 2030-12-05T00:00:00.000Z (fixed by the specification), got "${new Date(late).toISOString()}"`,
      )
    }
    const atSunset = loadConfig({ GETPET_DEPRECATED_AT: '2030-12-05T00:00:00Z' }, '/')
    checkGetPetDeprecatedAt(atSunset)
    assert.equal(atSunset.getPetDeprecatedAt.toISOString(), '2030-12-05T00:00:00.000Z')
  })

  it('warns at start that TRUST_PROXY=true lets any client make up its address, naming the fix; not for addresses or hops', () => {
    assert.match(trustProxyWarning(loadConfig({ TRUST_PROXY: 'true' }, '/')) ?? '', /^TRUST_PROXY=true trusts X-Forwarded-For from any peer: .*Set TRUST_PROXY to the proxies' addresses/)
    for (const text of ['10.0.0.1', '2', 'false', '']) assert.equal(trustProxyWarning(loadConfig({ TRUST_PROXY: text }, '/')), undefined, text)
  })

  it('accepts as TRUST_PROXY the addresses, CIDR ranges and netmasks that Fastify does, and names TRUST_PROXY for the rest', () => {
    for (const text of ['10.0.0.1', '10.0.0.0/8', '10.0.0.0/255.0.0.0', '192.168.1.1, 10.0.0.0/16', '::1', 'fe80::/10', '::ffff:10.0.0.1', '2001:db8::/128', '10.0.0.0/32']) {
      const { trustProxy } = loadConfig({ TRUST_PROXY: text }, '/')
      if (typeof trustProxy !== 'string') assert.fail(`${text} read as ${String(trustProxy)}`)
      assert.doesNotThrow(() => Fastify({ trustProxy }), text)
    }
    assert.throws(
      () => loadConfig({ TRUST_PROXY: '10.0.0.1,300.1.1.1' }, '/'),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message ===
          'TRUST_PROXY must be true, false, a hop count from 1 to 99, or a list of IP addresses and ranges such as 10.0.0.0/8, separated by commas; "300.1.1.1" is not an IP address',
    )
    assert.throws(
      () => loadConfig({ TRUST_PROXY: '10.0.0.0/33' }, '/'),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message ===
          'TRUST_PROXY must be true, false, a hop count from 1 to 99, or a list of IP addresses and ranges such as 10.0.0.0/8, separated by commas; "10.0.0.0/33" has a prefix length outside 1-32',
    )
  })

  it('documents every variable in docs/configuration.md and .env.example', () => {
    const guide = fs.readFileSync(path.join(ROOT, 'docs', 'configuration.md'), 'utf8')
    const example = fs.readFileSync(path.join(ROOT, '.env.example'), 'utf8')
    for (const variable of Object.keys(CONFIG_VARIABLES)) {
      assert.match(guide, new RegExp(`\\| \`${variable}\` \\|`), `docs/configuration.md lacks ${variable}`)
      assert.match(example, new RegExp(`^#? ?${variable}=`, 'm'), `.env.example lacks ${variable}`)
    }
  })

  it('gives every variable in docs/configuration.md and .env.example the range and default of the table', () => {
    const guide = fs.readFileSync(path.join(ROOT, 'docs', 'configuration.md'), 'utf8').split('\n')
    const example = fs.readFileSync(path.join(ROOT, '.env.example'), 'utf8').split('\n')
    for (const name of CONFIG_NAMES) {
      const row = guide.find((line) => line.startsWith(`| \`${name}\` |`))
      assert.ok(row !== undefined, `docs/configuration.md lacks ${name}`)
      const range = variableRange(name)
      if (range !== undefined) assert.match(row, standalone(range), `docs/configuration.md: the range of ${name} is not ${range}`)
      assert.match(row, standalone(variableDefault(name)), `docs/configuration.md: ${name} does not say "${variableDefault(name)}"`)

      const at = example.findIndex((line) => new RegExp(`^#? ?${name}=`).test(line))
      assert.notEqual(at, -1, `.env.example lacks ${name}`)
      const { default: value }: ConfigVariable = CONFIG_VARIABLES[name]
      if (value === undefined) assert.ok(example[at]?.startsWith('#'), `.env.example: ${name} has no single default, so it stays a comment`)
      else assert.equal(example[at], `${name}=${value}`, `.env.example: the default of ${name} is ${value}`)
      if (range !== undefined) {
        let start = at
        while (start > 0 && /^# (?![A-Z_]+=)/.test(example[start - 1] ?? '')) start -= 1
        assert.match(example.slice(start, at).join(' '), standalone(range), `.env.example: the comment on ${name} lacks its range ${range}`)
      }
    }
  })

  it('enforces the range of every integer variable that the help and the docs show', () => {
    // Values at the edges of one range would break a rule between two variables; these keep them apart.
    const besides: Partial<Record<string, Record<string, string>>> = {
      REQUEST_TIMEOUT_MS: { HEADERS_TIMEOUT_MS: '1000' },
      HEADERS_TIMEOUT_MS: { REQUEST_TIMEOUT_MS: '600000' },
    }
    for (const name of CONFIG_NAMES) {
      const variable: ConfigVariable = CONFIG_VARIABLES[name]
      if (variable.min === undefined || variable.max === undefined) continue
      const load = (value: number) => loadConfig({ ...besides[name], [name]: String(value) }, '/')
      load(variable.min)
      load(variable.max)
      for (const outside of [variable.min - 1, variable.max + 1].filter((value) => value >= 0)) {
        assert.throws(
          () => load(outside),
          (error: unknown) => error instanceof ConfigError && error.variable === name,
          `${name}=${outside}`,
        )
      }
    }
  })
})

/** Files holding a good value of each secret, for the `_FILE` variables' samples. */
const SECRETS_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-secrets-'))
function secretFile(name: string, text: string): string {
  const file = path.join(SECRETS_DIR, name)
  fs.writeFileSync(file, text, { mode: 0o600 })
  return file
}

/** A value each variable accepts, for the variables without a default: the grids below spoil it. */
const SAMPLES: Partial<Record<(typeof CONFIG_NAMES)[number], string>> = {
  DATABASE_URL_FILE: secretFile('database-url', 'postgres://petstore:hunter2@db.internal/petstore\n'),
  REDIS_URL_FILE: secretFile('redis-url', 'redis://:hunter2@cache.internal:6379\n'),
  OTEL_EXPORTER_OTLP_HEADERS_FILE: secretFile('otlp-headers', 'authorization=Bearer%20hunter2\n'),
  DATABASE_URL: 'sqlite:///srv/petstore.db',
  DATABASE_REPLICA_URLS: 'postgres://standby-1.internal/petstore,postgresql://standby-2.internal:6432/petstore',
  DATABASE_REPLICA_URLS_FILE: secretFile('database-replica-urls', 'postgres://petstore:hunter2@standby-1.internal/petstore\n'),
  PUBLIC_BASE_URL: 'https://api.example.com',
  PRODUCTION_BASE_URL: 'https://api.example.com',
  STAGING_BASE_URL: 'https://staging.example.com',
  REDIS_URL: 'redis://cache.internal:6379',
  TRUST_PROXY: '10.0.0.0/8',
  CORS_ORIGINS: 'https://app.example.com',
  METRICS_HOST: '127.0.0.1',
  OVERLOAD_MAX_HEAP_MB: '512',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://localhost:4318/v1/traces',
  OTEL_EXPORTER_OTLP_HEADERS: 'x-team=pets',
  OTEL_RESOURCE_ATTRIBUTES: 'service.namespace=shop',
  OTEL_TRACES_SAMPLER_ARG: '0.5',
  TLS_CERT_FILE: '/etc/petstore/cert.pem',
  TLS_KEY_FILE: '/etc/petstore/key.pem',
}

/** Variables that are only accepted with another one: the pair of a TLS file. */
const COMPANIONS: Partial<Record<string, Record<string, string>>> = {
  DATABASE_REPLICA_URLS: { DATABASE_URL: 'postgres://db.internal/petstore' },
  DATABASE_REPLICA_URLS_FILE: { DATABASE_URL: 'postgres://db.internal/petstore' },
  TLS_CERT_FILE: { TLS_KEY_FILE: '/etc/petstore/key.pem' },
  TLS_KEY_FILE: { TLS_CERT_FILE: '/etc/petstore/cert.pem' },
}

/**
 * Bad values made from the table itself: white space around a good value for every variable; for an
 * integer, a sign, a leading zero, each side of its range, a huge number, a fraction, an exponent, hex
 * and words; for a list of values, one that is not in it and one in the wrong case.
 */
function badValues(name: (typeof CONFIG_NAMES)[number]): string[] {
  const variable: ConfigVariable = CONFIG_VARIABLES[name]
  const good = variable.default ?? SAMPLES[name] ?? ''
  const values = [' ', '\t', ` ${good}`, `${good} `, `${good}\n`]
  if (variable.min !== undefined && variable.max !== undefined) {
    const inside = String(Math.max(variable.min, 1))
    values.push(`+${inside}`, `-${inside}`, `0${inside}`, ` ${inside}`, String(variable.max + 1), '99999999999999999999999')
    if (variable.min > 0) values.push(String(variable.min - 1))
    values.push(`${inside}.0`, '1e3', '0x10', '1_000', 'abc', '١٢')
  }
  if (variable.values !== undefined) values.push('none-of-these', (variable.values[0] ?? '').toUpperCase())
  return values
}

describe('every variable, checked the same way whichever the engine', () => {
  const engines = { sqlite: 'sqlite:///srv/petstore.db', postgres: 'postgres://db.internal/petstore' }

  it('has a sample value for every variable without a default', () => {
    for (const name of CONFIG_NAMES) {
      const variable: ConfigVariable = CONFIG_VARIABLES[name]
      const env = { ...COMPANIONS[name], [name]: variable.default ?? SAMPLES[name] ?? '' }
      assert.ok(variable.default !== undefined || SAMPLES[name] !== undefined, `add a sample value for ${name}`)
      assert.doesNotThrow(() => loadConfig(env, '/'), `${name}=${env[name]}`)
    }
  })

  for (const [engine, url] of Object.entries(engines)) {
    for (const name of CONFIG_NAMES) {
      const bad = badValues(name)
      it(`refuses ${bad.length} bad values of ${name} on ${engine}, naming ${name}`, () => {
        for (const value of bad) {
          const env = { DATABASE_URL: url, ...COMPANIONS[name], [name]: value }
          assert.throws(
            () => loadConfig(env, '/'),
            (error: unknown) => error instanceof ConfigError && error.variable === name && error.message.startsWith(`${name} `),
            `${name}=${JSON.stringify(value)} on ${engine}`,
          )
        }
      })
    }

    it(`treats an empty variable as unset, every one of them, on ${engine}`, () => {
      const unset = loadConfig({ DATABASE_URL: url }, '/')
      for (const name of CONFIG_NAMES) {
        if (name === 'DATABASE_URL' || name === 'DATABASE_URL_FILE') continue
        assert.deepEqual(loadConfig({ DATABASE_URL: url, [name]: '' }, '/'), unset, name)
      }
    })
  }

  it('defaults PUBLIC_BASE_URL to the scheme the API port speaks: https with a TLS pair, http without', () => {
    const pair = { TLS_CERT_FILE: '/etc/petstore/cert.pem', TLS_KEY_FILE: '/etc/petstore/key.pem' }
    assert.equal(loadConfig({ ...pair, PORT: '8443' }, '/').publicBaseUrl, 'https://localhost:8443')
    assert.deepEqual(loadConfig({ ...pair, PORT: '8443' }, '/').servers, { production: 'https://localhost:8443' })
    assert.equal(loadConfig({ PORT: '8443' }, '/').publicBaseUrl, 'http://localhost:8443')
    assert.equal(loadConfig({ ...pair, PUBLIC_BASE_URL: 'https://api.example.com' }, '/').publicBaseUrl, 'https://api.example.com')
  })

  it('refuses half a TLS pair, naming the file that is missing', () => {
    assert.throws(() => loadConfig({ TLS_CERT_FILE: '/etc/petstore/cert.pem' }, '/'), (error: unknown) => error instanceof ConfigError && error.variable === 'TLS_KEY_FILE')
    assert.throws(() => loadConfig({ TLS_KEY_FILE: '/etc/petstore/key.pem' }, '/'), (error: unknown) => error instanceof ConfigError && error.variable === 'TLS_CERT_FILE')
    assert.deepEqual(loadConfig({ TLS_CERT_FILE: 'tls/cert.pem', TLS_KEY_FILE: '/etc/key.pem' }, '/srv/petstore').tls, {
      certFile: '/srv/petstore/tls/cert.pem',
      keyFile: '/etc/key.pem',
    })
  })

  it('accepts IP addresses and host names as HOST and METRICS_HOST', () => {
    for (const host of ['0.0.0.0', '127.0.0.1', '::', '::1', 'fe80::1', 'localhost', 'api.internal', 'pets-1.example.org.', '10.0.0.1']) {
      assert.equal(loadConfig({ HOST: host }, '/').host, host)
      assert.equal(loadConfig({ METRICS_HOST: host }, '/').metrics?.host, host)
    }
  })

  it('names HOST when its name does not resolve, and METRICS_HOST for its own', async () => {
    const unresolvable = async (host: string) => {
      if (host.endsWith('.invalid')) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
    }
    await checkHostsResolve(loadConfig({ HOST: 'localhost' }, '/'), unresolvable)
    await assert.rejects(
      checkHostsResolve(loadConfig({ HOST: 'api.invalid' }, '/'), unresolvable),
      (error: unknown) => error instanceof ConfigError && error.variable === 'HOST' && error.message.includes('api.invalid'),
    )
    await assert.rejects(
      checkHostsResolve(loadConfig({ HOST: '127.0.0.1', METRICS_HOST: 'metrics.invalid' }, '/'), unresolvable),
      (error: unknown) => error instanceof ConfigError && error.variable === 'METRICS_HOST',
    )
  })
})

/** A PostgreSQL primary, which DATABASE_REPLICA_URLS are only accepted with. */
const PRIMARY = { DATABASE_URL: 'postgres://db.internal/petstore' }

describe('secrets read from files (the _FILE variables)', () => {
  const companion = (name: string): Record<string, string> => (name === 'DATABASE_REPLICA_URLS' ? PRIMARY : {})
  const secrets = {
    DATABASE_URL: { text: 'postgres://petstore:hunter2@db.internal:5432/petstore', read: (env: Record<string, string>) => {
      const { database } = loadConfig(env, '/')
      return database.engine === 'postgres' ? database.url : database.path
    }, refused: 'mysql://petstore:hunter2@db.internal/petstore' },
    DATABASE_REPLICA_URLS: {
      text: 'postgres://petstore:hunter2@standby-1.internal/petstore,postgres://petstore:hunter2@standby-2.internal/petstore',
      read: (env: Record<string, string>) => {
        const { database } = loadConfig({ ...env, ...PRIMARY }, '/')
        return database.engine === 'postgres' ? database.replicaUrls?.join(',') : undefined
      },
      refused: 'mysql://petstore:hunter2@standby-1.internal/petstore',
    },
    REDIS_URL: { text: 'rediss://:hunter2@cache.internal:6380', read: (env: Record<string, string>) => loadConfig(env, '/').rateLimits.redisUrl, refused: 'cache:hunter2@internal' },
    OTEL_EXPORTER_OTLP_HEADERS: {
      text: 'authorization=Bearer%20hunter2',
      read: (env: Record<string, string>) => loadConfig({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, '/').tracing?.headers.authorization,
      refused: 'authorization=Bearer%20hunter2,broken',
    },
  }
  const expected = {
    DATABASE_URL: 'postgres://petstore:hunter2@db.internal:5432/petstore',
    DATABASE_REPLICA_URLS: 'postgres://petstore:hunter2@standby-1.internal/petstore,postgres://petstore:hunter2@standby-2.internal/petstore',
    REDIS_URL: 'rediss://:hunter2@cache.internal:6380', OTEL_EXPORTER_OTLP_HEADERS: 'Bearer hunter2' }
  /** The error of `env` names `variable`, says `problem` and shows nothing of the secret. */
  const refusal = (variable: string, problem: RegExp) => (error: unknown) =>
    error instanceof ConfigError && error.variable === variable && error.message.startsWith(`${variable} `) && problem.test(error.message) && !error.message.includes('hunter2')

  for (const [name, { text, read, refused }] of Object.entries(secrets)) {
    const variable = `${name}_FILE`
    for (const [ending, written] of [['no newline', text], ['a newline', `${text}\n`], ['a CRLF', `${text}\r\n`]]) {
      it(`reads ${name} from ${variable}, a file ending with ${ending}, as if it were ${name}`, () => {
        assert.equal(read({ [variable]: secretFile(`${name}-${ending}`, written ?? '') }), expected[name as keyof typeof expected])
        assert.equal(read({ [name]: text }), expected[name as keyof typeof expected])
      })
    }

    it(`resolves a relative ${variable} against the working folder`, () => {
      secretFile(`relative-${name}`, text)
      const env = { [variable]: `relative-${name}` }
      assert.doesNotThrow(() => loadConfig({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', ...companion(name) }, SECRETS_DIR))
    })

    const file = secretFile(`good-${name}`, `${text}\n`)
    const refusals: [string, Record<string, string>, string, RegExp][] = [
      ['both forms set', { [variable]: file, [name]: text }, variable, new RegExp(`^${variable} and ${name} are both set`)],
      ['a missing file', { [variable]: path.join(SECRETS_DIR, 'absent') }, variable, new RegExp(`cannot be read, "${SECRETS_DIR}/absent" \\(ENOENT\\)`)],
      ['a folder', { [variable]: SECRETS_DIR }, variable, new RegExp(`cannot be read, "${SECRETS_DIR}" \\(EISDIR\\)`)],
      ['an empty file', { [variable]: secretFile(`empty-${name}`, '') }, variable, /names an empty file/],
      ['a file of one newline', { [variable]: secretFile(`newline-${name}`, '\n') }, variable, /names an empty file/],
      ['two trailing newlines', { [variable]: secretFile(`two-${name}`, `${text}\n\n`) }, variable, new RegExp(`value is refused \\("${SECRETS_DIR}/two-${name}"\\): ${name} has spaces`)],
      ['a leading space', { [variable]: secretFile(`space-${name}`, ` ${text}`) }, variable, new RegExp(`value is refused .*: ${name} has spaces`)],
      ['a value its variable refuses', { [variable]: secretFile(`bad-${name}`, `${refused}\n`) }, variable, new RegExp(`value is refused \\("${SECRETS_DIR}/bad-${name}"\\): ${name} must`)],
      ['white space around the path', { [variable]: ` ${file}` }, variable, /has spaces or other white space/],
    ]
    for (const [what, env, named, problem] of refusals) {
      it(`refuses ${what} for ${variable}, naming ${named} and showing nothing of the secret`, () => {
        assert.throws(() => loadConfig({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', ...companion(name) }, '/'), refusal(named, problem))
      })
    }
  }

  it('has a _FILE variable in the table for every secret, and only for them', () => {
    const files = CONFIG_NAMES.filter((name) => name.endsWith('_FILE') && !name.startsWith('TLS_'))
    assert.deepEqual(files.map((name) => name.replace(/_FILE$/, '')).sort(), Object.keys(secrets).sort())
    for (const name of files) assert.match(CONFIG_VARIABLES[name].describe, /read once at start/, name)
  })
})

/** `text` not as part of a longer word or number: "Default 10" does not match "Default 1000". */
function standalone(text: string): RegExp {
  return new RegExp(`(?<![\\w-])${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w]|[.-]\\w)`)
}
