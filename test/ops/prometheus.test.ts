import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import https from 'node:https'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ROOT, createKey } from '../../scripts/petstore-process.js'
import { makeCertificate, opensslSkip } from '../certificates.js'
import { createTestDatabase } from '../helper.js'
import { cleanupProcesses, freePort, runCommand, startServer, stopServer, trackedTempDir, until, within } from '../processes.js'

// What an operator installs from ops/: the Prometheus rules, checked and unit-tested by promtool, then
// loaded with the Grafana dashboard's queries into a real Prometheus that scrapes a real service.

after(cleanupProcesses)

// Killed however the test ended, as cleanupProcesses kills the service.
const prometheuses = new Set<ChildProcess>()
after(() => {
  for (const child of prometheuses) child.kill('SIGKILL')
})

const RULES_DIR = path.join(ROOT, 'ops', 'prometheus')
const RULES = fs.readFileSync(path.join(RULES_DIR, 'rules.yml'), 'utf8')
const RULE_TESTS = fs
  .readdirSync(RULES_DIR)
  .filter((file) => file.endsWith('.test.yml'))
  .sort()
const DASHBOARD = JSON.parse(fs.readFileSync(path.join(ROOT, 'ops', 'grafana', 'petstore.json'), 'utf8')) as Dashboard
const OBSERVING_GUIDE = fs.readFileSync(path.join(ROOT, 'docs', 'observing.md'), 'utf8')

const notInstalled = (command: string) => spawnSync(command, ['--version'], { stdio: 'ignore' }).error !== undefined
const PROMTOOL_SKIP: string | false = notInstalled('promtool') && 'promtool is not installed (apt-get install prometheus): the rules are not checked'
// PostgreSQL, for the pool's figures; TLS served by the service, for the certificate's.
const PROMETHEUS_SKIP: string | false =
  (notInstalled('prometheus') && 'prometheus is not installed (apt-get install prometheus): the rules and the dashboard are not run') ||
  opensslSkip ||
  (!process.env.PETSTORE_TEST_DATABASE_URL && 'PETSTORE_TEST_DATABASE_URL is not set: the pool figures the dashboard shows need PostgreSQL')

/** The alerts of rules.yml, by name. */
const ALERTS = [...RULES.matchAll(/^ {6}- alert: (\S+)$/gm)].map((match) => match[1] ?? '')

interface Dashboard {
  uid?: string
  schemaVersion?: number
  templating?: { list: { name: string; type: string; query?: string | { query: string } }[] }
  panels?: Panel[]
}

interface Panel {
  id: number
  type: string
  title: string
  datasource?: { type: string; uid: string }
  targets?: { expr: string; datasource?: { uid: string } }[]
  panels?: Panel[]
}

/** Every panel, those of rows included. */
function panelsOf(dashboard: { panels?: Panel[] }): Panel[] {
  return (dashboard.panels ?? []).flatMap((panel) => [panel, ...panelsOf(panel)])
}

/**
 * A dashboard query as Grafana would send it for job `petstore` and every instance. `$__rate_interval`
 * is at least four scrape intervals in Grafana; a minute is that for the test's scrapes, each second.
 */
function substitute(expr: string): string {
  const values: Record<string, string> = { __rate_interval: '1m', job: 'petstore', instance: '.+' }
  const substituted = expr.replace(/\$\{?(\w+)\}?/g, (variable, name: string) => values[name] ?? variable)
  assert.doesNotMatch(substituted, /\$/, `${expr}: a variable the test does not know`)
  return substituted
}

describe('the Prometheus rules', { skip: PROMTOOL_SKIP }, () => {
  it('pass promtool check rules', async () => {
    const run = await runCommand('promtool', ['check', 'rules', 'rules.yml'], { cwd: RULES_DIR, env: { PATH: process.env.PATH ?? '' } })
    assert.equal(run.code, 0, run.stdout + run.stderr)
  })

  it('pass their promtool unit tests', { timeout: 60_000 }, async () => {
    const run = await runCommand('promtool', ['test', 'rules', ...RULE_TESTS], { cwd: RULES_DIR, env: { PATH: process.env.PATH ?? '' }, timeoutMs: 55_000 })
    assert.equal(run.code, 0, run.stdout + run.stderr)
  })

  it('have a unit test of every alert firing, and one of it not firing', () => {
    assert.ok(ALERTS.length >= 10, `only ${ALERTS.length} alerts found in rules.yml: the pattern is broken`)
    const cases = RULE_TESTS.flatMap((file) => [
      ...fs.readFileSync(path.join(RULES_DIR, file), 'utf8').matchAll(/^ +alertname: (\S+)\n +exp_alerts:( \[\])?$/gm),
    ])
    for (const alert of ALERTS) {
      const tested = cases.filter((match) => match[1] === alert)
      assert.ok(tested.some((match) => match[2] === undefined), `${alert}: no test where it fires`)
      assert.ok(tested.some((match) => match[2] !== undefined), `${alert}: no test where it does not fire`)
    }
    assert.deepEqual(cases.map((match) => match[1]).filter((name) => !ALERTS.includes(name ?? '')), [], 'tests of alerts that rules.yml does not have')
  })
})

describe('the Grafana dashboard', () => {
  it('is importable: a uid, a schema version, and every query through the datasource variable', () => {
    assert.equal(DASHBOARD.uid, 'petstore')
    assert.ok(typeof DASHBOARD.schemaVersion === 'number')
    const variables = DASHBOARD.templating?.list ?? []
    assert.deepEqual(
      variables.map(({ name, type }) => [name, type]),
      [
        ['datasource', 'datasource'],
        ['job', 'query'],
        ['instance', 'query'],
      ],
    )
    const panels = panelsOf(DASHBOARD)
    assert.equal(new Set(panels.map((panel) => panel.id)).size, panels.length, 'panel ids are unique')
    for (const panel of panels.filter((each) => each.type !== 'row')) {
      assert.deepEqual(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, panel.title)
      assert.ok((panel.targets ?? []).length > 0, `${panel.title}: no query`)
      for (const target of panel.targets ?? []) assert.equal(target.datasource?.uid, '${datasource}', panel.title)
    }
  })
})

interface ApiAnswer<T> {
  status: 'success' | 'error'
  data: T
  error?: string
}

interface Rule {
  type: 'recording' | 'alerting'
  name: string
  health: string
  lastError?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

/**
 * Prometheus on a free port of 127.0.0.1, scraping `target` every second and evaluating rules.yml as
 * often; resolves once it is ready, else kills it.
 */
async function startPrometheus(dir: string, target: string): Promise<{ url: string; output(): string; stop(): Promise<void> }> {
  const port = await freePort()
  const config = path.join(dir, 'prometheus.yml')
  fs.writeFileSync(
    config,
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      `rule_files: [${JSON.stringify(path.join(RULES_DIR, 'rules.yml'))}]`,
      `scrape_configs: [{ job_name: petstore, static_configs: [{ targets: ["${target}"] }] }]`,
      '',
    ].join('\n'),
  )
  const child = spawn(
    'prometheus',
    [`--config.file=${config}`, `--storage.tsdb.path=${path.join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  prometheuses.add(child)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  void exited.then(() => prometheuses.delete(child))
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    child.kill('SIGTERM')
    await within(exited, 10_000, () => `prometheus did not stop:\n${output}`).catch((error: unknown) => {
      child.kill('SIGKILL')
      throw error
    })
  }
  try {
    await until(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited:\n${output}`)
        const ready = await fetch(`${url}/-/ready`).catch(() => undefined)
        await ready?.arrayBuffer()
        return ready?.status === 200
      },
      20_000,
      () => `prometheus was not ready:\n${output}`,
      100,
    )
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
  return { url, output: () => output, stop }
}

/**
 * Requests to `baseUrl` over HTTPS until stopped: creates, lists, gets (getPet, deprecated, is counted by
 * key), 404s, and now and then 401s, fewer than the failed-authentication limit allows one address.
 * `stop()` gives every answer that was not the one expected.
 */
function sendTraffic(baseUrl: string, ca: Buffer, key: string): { stop(): Promise<string[]> } {
  const agent = new https.Agent({ keepAlive: true, ca: [ca] })
  const unexpected: string[] = []
  const expect = (status: number, method: string, pathname: string, secret?: string, body?: string) =>
    new Promise<string>((resolve, reject) => {
      const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' }
      if (secret !== undefined) headers.authorization = `Bearer ${secret}`
      const request = https.request(`${baseUrl}${pathname}`, { method, agent, headers }, (response) => {
        let text = ''
        response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
        response.once('end', () => {
          if (response.statusCode !== status) unexpected.push(`${method} ${pathname}: ${response.statusCode} ${text}`)
          resolve(text)
        })
      })
      request.once('error', reject)
      request.setTimeout(10_000, () => request.destroy(new Error(`${method} ${pathname} was not answered`)))
      request.end(body)
    })
  let stopping = false
  const sending = (async () => {
    for (let round = 0; !stopping && unexpected.length === 0; round++) {
      const created = await expect(201, 'POST', '/v1/pets', key, '{"name":"Rex","categoryId":1}')
      await expect(200, 'GET', '/v1/pets?limit=5', key)
      await expect(200, 'GET', `/v1/pets/${/"id":(\d+)/.exec(created)?.[1] ?? ''}`, key)
      await expect(404, 'GET', '/v1/pets/999999999', key)
      if (round % 10 === 0) {
        await expect(401, 'GET', '/v1/pets')
        await expect(401, 'GET', '/v1/pets', `ps_live_${'x'.repeat(32)}`)
      }
      await sleep(100)
    }
  })().catch((error: unknown) => void unexpected.push((error as Error).message))
  return {
    async stop() {
      stopping = true
      await sending
      agent.destroy()
      return unexpected
    },
  }
}

/** Prometheus's HTTP API at `url`: the data of a successful answer, else an error with Prometheus's message. */
async function api<T>(url: string, pathname: string, params: Record<string, string> = {}): Promise<T> {
  const response = await fetch(`${url}/api/v1/${pathname}?${new URLSearchParams(params).toString()}`)
  const answer = (await response.json()) as ApiAnswer<T>
  if (answer.status !== 'success') throw new Error(answer.error ?? `status ${response.status}`)
  return answer.data
}

async function rulesOf(url: string): Promise<Rule[]> {
  return (await api<{ groups: { rules: Rule[] }[] }>(url, 'rules')).groups.flatMap((group) => group.rules)
}

/** Every query of the dashboard's panels, as Grafana sends it. */
const PANEL_QUERIES = panelsOf(DASHBOARD).flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: substitute(target.expr) })))

/** The dashboard's variables that list label values: `label_values(match, label)`. */
const VARIABLE_QUERIES = (DASHBOARD.templating?.list ?? []).flatMap((variable) => {
  const query = typeof variable.query === 'object' ? variable.query.query : undefined
  const parts = query === undefined ? null : /^label_values\((.+), *(\w+)\)$/.exec(substitute(query))
  return parts === null ? [] : [{ name: variable.name, match: parts[1] ?? '', label: parts[2] ?? '' }]
})

/**
 * What Prometheus at `url` lacks of what the rules and the dashboard promise, for the service whose metrics
 * are at `instance`: until it has scraped twice and evaluated every rule, some of it.
 */
async function missingData(url: string, instance: string): Promise<string[]> {
  const missing: string[] = []
  const seriesOf = async (query: string) => (await api<{ result: unknown[] }>(url, 'query', { query })).result.length
  for (const rule of await rulesOf(url)) {
    if (rule.health !== 'ok') missing.push(`${rule.name}: ${rule.health} ${rule.lastError ?? ''}`)
    if (rule.type !== 'recording') continue
    const labels = Object.entries(rule.labels ?? {}).map(([name, value]) => `${name}=${JSON.stringify(value)}`)
    const selector = `${rule.name}{${labels.join(',')}}`
    if ((await seriesOf(selector)) === 0) missing.push(`${selector}: no series`)
  }
  for (const { panel, expr } of PANEL_QUERIES) {
    const count = await seriesOf(expr).catch((error: unknown) => (error as Error).message)
    if (count === 0 || typeof count === 'string') missing.push(`panel "${panel}": ${expr}: ${count === 0 ? 'no series' : count}`)
  }
  for (const { name, match, label } of VARIABLE_QUERIES) {
    if ((await api<string[]>(url, `label/${label}/values`, { 'match[]': match })).length === 0) missing.push(`variable ${name}: no values`)
  }
  // The certificate, valid for two days, is within the alert's 14: the alert is pending, for its 10 minutes.
  const { alerts } = await api<{ alerts: { labels: Record<string, string>; state: string }[] }>(url, 'alerts')
  const expiring = alerts.find((alert) => alert.labels.alertname === 'PetstoreTlsCertificateExpiringSoon')
  if (expiring?.labels.instance !== instance || expiring.state !== 'pending') missing.push(`the certificate's alert: ${JSON.stringify(expiring)}`)
  return missing
}

describe('the rules and the dashboard on a real Prometheus scraping petstore serve', { skip: PROMETHEUS_SKIP }, () => {
  it('records every rule, evaluates every alert, and answers every query of the dashboard with series', { timeout: 90_000 }, async () => {
    assert.equal(VARIABLE_QUERIES.length, 2)
    const dir = trackedTempDir('petstore-prometheus-')
    const database = await createTestDatabase('postgres', dir)
    const certificate = makeCertificate(dir, 'service')
    const metricsPort = await freePort()
    const key = await createKey({ PATH: process.env.PATH ?? '', ...database.env }, 'prometheus')
    // The primary as its own standby: the standbys' lag, state and reads by target are then scraped too.
    const env = {
      ...database.env,
      DATABASE_REPLICA_URLS: database.env.DATABASE_URL ?? '',
      METRICS_PORT: String(metricsPort),
      TLS_CERT_FILE: certificate.certFile,
      TLS_KEY_FILE: certificate.keyFile,
    }
    const server = await startServer(env, dir, [], { ca: [certificate.pem] })
    const traffic = sendTraffic(server.baseUrl, certificate.pem, key)
    const instance = `127.0.0.1:${metricsPort}`
    let unexpected: string[]
    try {
      const prometheus = await startPrometheus(dir, instance)
      try {
        let missing = await missingData(prometheus.url, instance)
        for (const deadline = performance.now() + 30_000; missing.length > 0 && performance.now() < deadline; missing = await missingData(prometheus.url, instance)) {
          await sleep(500)
        }
        assert.deepEqual(missing, [], prometheus.output())

        const alerting = (await rulesOf(prometheus.url)).filter((rule) => rule.type === 'alerting')
        assert.deepEqual(alerting.map((rule) => rule.name).sort(), [...ALERTS].sort())
        for (const { name, labels = {}, annotations = {} } of alerting) {
          assert.ok(['critical', 'warning'].includes(labels.severity ?? ''), `${name}: severity ${labels.severity}`)
          assert.ok(annotations.summary && annotations.description, `${name}: a summary and a description`)
          assert.equal(annotations.runbook_url, `docs/observing.md#${name.toLowerCase()}`)
          assert.ok(OBSERVING_GUIDE.includes(`\n### ${name}\n`), `${name}: no runbook section in docs/observing.md`)
        }
      } finally {
        await prometheus.stop()
      }
    } finally {
      unexpected = await traffic.stop()
      await stopServer(server)
      await database.drop()
    }
    assert.deepEqual(unexpected, [])
  })
})
