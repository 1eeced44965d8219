import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { PodMonitor, PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
import { Deployment } from 'kubernetes-models/apps/v1'
import { Job } from 'kubernetes-models/batch/v1'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { ConfigMap, Service } from 'kubernetes-models/v1'
import YAML from 'yaml'
import { BIN, ROOT, freePort, startPetstore } from '../../scripts/petstore-process.js'
import { PROMETHEUS_RULE_FILE, RULES_FILE, prometheusRule } from '../../scripts/prometheus-rule.js'
import { CONFIG_NAMES, loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helper.js'
import { cleanupProcesses, runCommand, stopServer, trackedTempDir } from '../processes.js'
import { SANDBOX_SKIP, sandbox } from './sandbox.js'

// ops/kubernetes/ and ops/container/ as an operator applies and builds them: rendered by Kustomize,
// validated against the Kubernetes schemas (kubernetes-models, offline), held to the Pod Security
// Standards' restricted profile and to the configuration table, and the container's command lines run
// as the pods run them. No cluster or container runtime is needed, or used.

after(cleanupProcesses)

const BASE = path.join(ROOT, 'ops', 'kubernetes')
const CONTAINERFILE = fs.readFileSync(path.join(ROOT, 'ops', 'container', 'Containerfile'), 'utf8')
const VERSION = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version

const KUBECTL_SKIP: string | false =
  spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).error !== undefined &&
  'kubectl is not installed: the base is checked as its files are, not as `kubectl kustomize` renders it (the ConfigMap built here from petstore.env, the image unset)'

// The shapes of the objects this test reads; the schemas check the rest.
interface Probe {
  httpGet?: { path?: string; port?: string | number }
}
interface Container {
  name: string
  image?: string
  command?: string[]
  args?: string[]
  ports?: { name?: string; containerPort: number; hostPort?: number }[]
  env?: { name: string }[]
  envFrom?: { configMapRef?: { name: string } }[]
  volumeMounts?: { name: string; mountPath: string }[]
  startupProbe?: Probe
  readinessProbe?: Probe
  livenessProbe?: Probe
  lifecycle?: { preStop?: unknown }
  securityContext?: SecurityContext & {
    privileged?: boolean
    allowPrivilegeEscalation?: boolean
    readOnlyRootFilesystem?: boolean
    capabilities?: { add?: string[]; drop?: string[] }
    procMount?: string
  }
}
interface SecurityContext {
  runAsNonRoot?: boolean
  runAsUser?: number
  runAsGroup?: number
  seccompProfile?: { type: string }
  seLinuxOptions?: { type?: string; user?: string; role?: string }
  appArmorProfile?: { type: string }
}
interface PodSpec {
  hostNetwork?: boolean
  hostPID?: boolean
  hostIPC?: boolean
  terminationGracePeriodSeconds?: number
  securityContext?: SecurityContext & { sysctls?: { name: string }[]; fsGroup?: number }
  containers: Container[]
  initContainers?: Container[]
  volumes?: Record<string, unknown>[]
}
interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string; labels?: Record<string, string> }
  spec?: Record<string, unknown>
  data?: Record<string, string>
}

/** The objects of the base, as `kubectl kustomize` renders them, or built from its files without kubectl. */
function manifests(): Manifest[] {
  if (KUBECTL_SKIP === false) {
    const rendered = spawnSync('kubectl', ['kustomize', BASE], { encoding: 'utf8' })
    assert.equal(rendered.status, 0, rendered.stderr)
    return YAML.parseAllDocuments(rendered.stdout).map((document) => document.toJSON() as Manifest)
  }
  const kustomization = YAML.parse(fs.readFileSync(path.join(BASE, 'kustomization.yaml'), 'utf8')) as {
    resources: string[]
    configMapGenerator: { name: string; envs: string[]; options?: { labels?: Record<string, string> } }[]
  }
  const resources = kustomization.resources.map((file) => YAML.parse(fs.readFileSync(path.join(BASE, file), 'utf8')) as Manifest)
  const configMaps = kustomization.configMapGenerator.map(({ name, envs, options }) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels: options?.labels ?? {} },
    data: Object.assign({}, ...envs.map((file) => envFile(path.join(BASE, file)))) as Record<string, string>,
  }))
  return [...resources, ...configMaps]
}

/** A Kustomize env file, as its configMapGenerator reads it: VARIABLE=value lines, # comments. */
function envFile(file: string): Record<string, string> {
  const data: Record<string, string> = {}
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue
    const at = line.indexOf('=')
    data[line.slice(0, at)] = line.slice(at + 1)
  }
  return data
}

const MANIFESTS = manifests()
const only = (kind: string): Manifest => {
  const found = MANIFESTS.filter((manifest) => manifest.kind === kind)
  assert.equal(found.length, 1, `${found.length} ${kind}s in the base`)
  return found[0] as Manifest
}
const podSpec = (manifest: Manifest): PodSpec => (manifest.spec as { template: { spec: PodSpec } }).template.spec
const podLabels = (manifest: Manifest): Record<string, string> => (manifest.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels
const DEPLOYMENT = only('Deployment')
const JOB = only('Job')
const SETTINGS = only('ConfigMap').data ?? {}
const [SERVER] = podSpec(DEPLOYMENT).containers
assert.ok(SERVER !== undefined)

/** `selector` picks `labels`. */
const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([key, value]) => labels[key] === value)

/** The configuration the pods run with: the ConfigMap's, a file standing in for each secret. */
function podConfig() {
  const dir = trackedTempDir('petstore-k8s-config-')
  const env: Record<string, string> = { ...SETTINGS }
  for (const name of Object.keys(env).filter((name) => name.endsWith('_FILE') && !name.startsWith('TLS_'))) {
    env[name] = path.join(dir, name)
    fs.writeFileSync(env[name], name.startsWith('DATABASE') ? 'postgres://petstore:secret@db.internal/petstore\n' : 'redis://:secret@cache.internal:6379\n')
  }
  return loadConfig(env, '/')
}

/**
 * What the Pod Security Standards' restricted profile (Kubernetes 1.32) refuses in `spec`, and
 * readOnlyRootFilesystem, which issue 40 asks for as well; empty when it meets them.
 */
function restrictedViolations(spec: PodSpec): string[] {
  const problems: string[] = []
  const pod = spec.securityContext ?? {}
  const containers = [...spec.containers, ...(spec.initContainers ?? [])]
  if (spec.hostNetwork === true || spec.hostPID === true || spec.hostIPC === true) problems.push('host namespaces')
  const allowedVolumes = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']
  for (const volume of spec.volumes ?? []) {
    const types = Object.keys(volume).filter((key) => key !== 'name')
    if (!types.every((type) => allowedVolumes.includes(type))) problems.push(`volume ${String(volume.name)} of type ${types.join(', ')}`)
  }
  if (pod.seLinuxOptions?.user !== undefined || pod.seLinuxOptions?.role !== undefined) problems.push('pod seLinuxOptions user or role')
  if (pod.appArmorProfile?.type === 'Unconfined') problems.push('pod AppArmor Unconfined')
  const safeSysctls = ['kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start', 'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes']
  for (const sysctl of pod.sysctls ?? []) if (!safeSysctls.includes(sysctl.name)) problems.push(`sysctl ${sysctl.name}`)
  if (pod.runAsUser === 0) problems.push('pod runAsUser 0')
  for (const container of containers) {
    const context = container.securityContext ?? {}
    const named = (problem: string) => problems.push(`${container.name}: ${problem}`)
    if (context.privileged === true) named('privileged')
    if (context.allowPrivilegeEscalation !== false) named('allowPrivilegeEscalation is not false')
    if ((context.runAsNonRoot ?? pod.runAsNonRoot) !== true) named('runAsNonRoot is not true')
    if (context.runAsUser === 0) named('runAsUser 0')
    const seccomp = context.seccompProfile?.type ?? pod.seccompProfile?.type
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') named(`seccompProfile ${seccomp ?? 'unset'}`)
    if (!(context.capabilities?.drop ?? []).includes('ALL')) named('capabilities do not drop ALL')
    for (const added of context.capabilities?.add ?? []) if (added !== 'NET_BIND_SERVICE') named(`adds capability ${added}`)
    if ((container.ports ?? []).some((port) => (port.hostPort ?? 0) !== 0)) named('hostPort')
    if (context.procMount !== undefined && context.procMount !== 'Default') named(`procMount ${context.procMount}`)
    if (context.appArmorProfile?.type === 'Unconfined') named('AppArmor Unconfined')
    if (context.seLinuxOptions?.user !== undefined || context.seLinuxOptions?.role !== undefined) named('seLinuxOptions user or role')
    if (context.readOnlyRootFilesystem !== true) named('readOnlyRootFilesystem is not true')
  }
  return problems
}

/** The Containerfile's instructions of its last stage, the image that runs: `USER` → `1000:1000`. */
function finalStage(): Map<string, string> {
  const text = CONTAINERFILE.replace(/\\\n/g, ' ')
  const stage = text.slice(text.lastIndexOf('\nFROM '))
  const instructions = new Map<string, string>()
  for (const line of stage.split('\n')) {
    const match = /^([A-Z]+)\s+(.*)$/.exec(line)
    if (match !== null) instructions.set(match[1] ?? '', match[2] ?? '')
  }
  return instructions
}

describe('the Kubernetes base', () => {
  it('renders with kubectl kustomize', { skip: KUBECTL_SKIP }, () => {
    assert.deepEqual(MANIFESTS.map((manifest) => manifest.kind).sort(), ['ConfigMap', 'Deployment', 'Job', 'PodDisruptionBudget', 'PodMonitor', 'PrometheusRule', 'Service'])
    assert.equal(SERVER.image, `registry.example.com/petstore:${VERSION}`, "kustomization.yaml's newTag is this release's version")
  })

  it('validates against the Kubernetes and Prometheus Operator schemas', () => {
    const models: Record<string, new (data: never) => { validate(): void }> = {
      Deployment,
      Job,
      Service,
      ConfigMap,
      PodDisruptionBudget,
      PodMonitor,
      PrometheusRule,
    }
    for (const manifest of MANIFESTS) {
      const Model = models[manifest.kind]
      assert.ok(Model !== undefined, `no schema for ${manifest.kind}`)
      assert.doesNotThrow(() => new Model(manifest as never).validate(), `${manifest.kind} ${manifest.metadata.name}`)
    }
    assert.throws(() => new Deployment({ ...DEPLOYMENT, spec: { ...DEPLOYMENT.spec, replicas: 'two' } } as never).validate(), /replicas/)
  })

  it('meets the restricted Pod Security Standard, with a read-only root filesystem, in the Deployment and the Job', () => {
    for (const manifest of [DEPLOYMENT, JOB]) assert.deepEqual(restrictedViolations(podSpec(manifest)), [], manifest.kind)
    // The check itself: a pod with none of it fails on each count.
    const bare = restrictedViolations({ containers: [{ name: 'bare' }], volumes: [{ name: 'host', hostPath: { path: '/' } }] })
    assert.equal(bare.length, 6, bare.join('; '))
  })

  it('sets only variables of the configuration table, which accepts their values, secrets as files of the mounted Secret', () => {
    for (const name of Object.keys(SETTINGS)) assert.ok((CONFIG_NAMES as readonly string[]).includes(name), `the ConfigMap sets ${name}, no variable of src/config.ts`)
    for (const container of [...podSpec(DEPLOYMENT).containers, ...podSpec(JOB).containers]) {
      for (const { name } of container.env ?? []) assert.ok((CONFIG_NAMES as readonly string[]).includes(name), `${container.name} sets ${name}`)
      assert.deepEqual(container.envFrom, [{ configMapRef: { name: only('ConfigMap').metadata.name } }])
      for (const [name, file] of Object.entries(SETTINGS).filter(([name]) => name.endsWith('_FILE'))) {
        const mount = (container.volumeMounts ?? []).find((mounted) => file.startsWith(`${mounted.mountPath}/`))
        assert.ok(mount !== undefined, `${name}=${file} is in no volume of ${container.name}`)
        const volume = (podSpec(DEPLOYMENT).volumes ?? []).find((candidate) => candidate.name === mount.name)
        assert.ok(volume?.secret !== undefined, `${name} is read from ${mount.name}, which is not a Secret`)
      }
    }
    for (const secret of ['DATABASE_URL', 'REDIS_URL', 'OTEL_EXPORTER_OTLP_HEADERS']) assert.equal(SETTINGS[secret], undefined, `${secret} in the ConfigMap: use ${secret}_FILE`)
    assert.equal(podConfig().database.engine, 'postgres')
  })

  it('gives the pods the whole shutdown budget, without a preStop sleep, and rolls without losing capacity', () => {
    const config = podConfig()
    const budgetMs = config.shutdownDrainMs + config.shutdownTimeoutMs + 1000
    for (const manifest of [DEPLOYMENT, JOB]) {
      const graceMs = (podSpec(manifest).terminationGracePeriodSeconds ?? 30) * 1000
      assert.ok(graceMs >= budgetMs, `${manifest.kind}: terminationGracePeriodSeconds ${graceMs} ms < drain + timeout + 1 s (${budgetMs} ms)`)
    }
    assert.equal(SERVER.lifecycle?.preStop, undefined, 'the drain keeps accepting while /readyz says 503: no preStop sleep')
    const spec = DEPLOYMENT.spec as { replicas: number; strategy: { rollingUpdate: { maxUnavailable: number } } }
    assert.ok(spec.replicas >= 2)
    assert.equal(spec.strategy.rollingUpdate.maxUnavailable, 0)
    assert.ok(SERVER.command === undefined && JSON.stringify(SERVER.args) === '["serve"]', "the image's entrypoint, Node on the bin, runs serve")
    assert.deepEqual(podSpec(JOB).containers[0]?.args, ['migrate'])
    // The release step applies these alone (kubectl apply -l release-step=migrate): the settings and the Job.
    const step = MANIFESTS.filter((manifest) => manifest.metadata.labels?.['release-step'] === 'migrate').map((manifest) => manifest.kind)
    assert.deepEqual(step.sort(), ['ConfigMap', 'Job'])
    assert.equal(podSpec(JOB).containers[0]?.image, SERVER.image)
  })

  it("probes the operations port's /healthz and /readyz, and serves and scrapes the ports the settings name", () => {
    const config = podConfig()
    const port = (name: string | number | undefined) => SERVER.ports?.find((candidate) => candidate.name === name || candidate.containerPort === name)?.containerPort
    assert.equal(port('http'), config.port)
    assert.equal(port('operations'), config.metrics?.port)
    assert.deepEqual(
      [SERVER.startupProbe, SERVER.readinessProbe, SERVER.livenessProbe].map((probe) => [port(probe?.httpGet?.port), probe?.httpGet?.path]),
      [
        [config.metrics?.port, '/healthz'],
        [config.metrics?.port, '/readyz'],
        [config.metrics?.port, '/healthz'],
      ],
    )
    const labels = podLabels(DEPLOYMENT)
    const service = only('Service').spec as { selector: Record<string, string>; ports: { targetPort: string }[] }
    assert.ok(selects(service.selector, labels))
    assert.ok(service.ports.every((servicePort) => port(servicePort.targetPort) === config.port))
    assert.ok(selects((only('PodDisruptionBudget').spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels, labels))
    assert.ok(!selects((only('PodDisruptionBudget').spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels, podLabels(JOB)))
    const monitor = only('PodMonitor').spec as { jobLabel: string; selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string }[] }
    assert.ok(selects(monitor.selector.matchLabels, labels))
    assert.deepEqual(monitor.podMetricsEndpoints.map((endpoint) => [port(endpoint.port), endpoint.path]), [[config.metrics?.port, '/metrics']])
    // The rules select job="petstore": the PodMonitor's jobLabel must give that.
    assert.match(fs.readFileSync(RULES_FILE, 'utf8'), /job="petstore"/)
    assert.equal(labels[monitor.jobLabel], 'petstore')
  })

  it('has the PrometheusRule that npm run generate:prometheus-rule makes from ops/prometheus/rules.yml, holding its groups exactly', () => {
    const rules = fs.readFileSync(RULES_FILE, 'utf8')
    assert.equal(fs.readFileSync(PROMETHEUS_RULE_FILE, 'utf8'), prometheusRule(rules), 'stale: run npm run generate:prometheus-rule')
    assert.deepEqual((only('PrometheusRule').spec as { groups: unknown }).groups, (YAML.parse(rules) as { groups: unknown }).groups)
  })
})

describe('the Containerfile', () => {
  it('installs the packed tarball without devDependencies and runs Node on the bin as the pods\' non-root user', () => {
    const image = finalStage()
    const [user, group] = (image.get('USER') ?? '').split(':').map(Number)
    const pod = podSpec(DEPLOYMENT).securityContext
    assert.ok(user !== undefined && user > 0 && user === pod?.runAsUser && group === pod.runAsGroup, `USER ${image.get('USER')} is the pods' runAsUser:runAsGroup, by number`)
    assert.deepEqual(JSON.parse(image.get('ENTRYPOINT') ?? '[]'), ['node', '/opt/petstore/bin/petstore.js'])
    assert.deepEqual(JSON.parse(image.get('CMD') ?? '[]'), ['serve'])
    assert.equal(image.get('STOPSIGNAL'), 'SIGTERM')
    assert.match(CONTAINERFILE, /COPY petstore-\*\.tgz /)
    assert.match(CONTAINERFILE, /npm install --global --prefix \/opt\/petstore --omit=dev .*\/tmp\/petstore-\*\.tgz/)
    assert.match(CONTAINERFILE, /COPY --from=install \/opt\/petstore\/lib\/node_modules\/petstore \/opt\/petstore/)
    assert.match(image.get('RUN') ?? '', /rm -rf \/usr\/local\/lib\/node_modules\/npm/)
    // What the entrypoint names is in the package.
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string>; files: string[] }
    assert.equal(pkg.bin.petstore, 'bin/petstore.js')
    assert.ok(pkg.files.includes('bin/') && pkg.files.includes('dist/'))
    assert.match(CONTAINERFILE, new RegExp(`-t petstore:${VERSION.replace(/\./g, '\\.')} `), "the build command's tag is this release")
  })
})

const POSTGRES_SKIP: string | false = !process.env.PETSTORE_TEST_DATABASE_URL && 'PETSTORE_TEST_DATABASE_URL is not set: the pods run on PostgreSQL'

describe("the container's command lines, run as the pods run them", { skip: SANDBOX_SKIP || POSTGRES_SKIP }, () => {
  it('migrates as the Job, then serves as the Deployment: the image\'s user, a read-only root filesystem, the secret in a file; answers its probes, serves, and drains on SIGTERM exiting 0', { timeout: 120_000 }, async (t) => {
    const pod = podSpec(DEPLOYMENT).securityContext
    const [uid, gid] = [pod?.runAsUser ?? 0, pod?.runAsGroup ?? 0]
    const root = trackedTempDir('petstore-pod-')
    fs.chmodSync(root, 0o755)
    const database = await createTestDatabase('postgres', root)
    t.after(() => database.drop())
    const url = database.env.DATABASE_URL ?? ''
    const password = decodeURIComponent(new URL(url).password)
    // The Secret's volume: files of mode 0440 (defaultMode 288) of the pod's fsGroup.
    const mountPath = SERVER.volumeMounts?.[0]?.mountPath ?? ''
    const secrets = path.join(root, 'secrets')
    fs.mkdirSync(secrets, { mode: 0o755 })
    // WORKDIR /var/lib/petstore, the user's, read-only like the rest.
    const workdir = path.join(root, 'workdir')
    fs.mkdirSync(workdir, { mode: 0o700 })
    fs.chownSync(workdir, uid, gid)
    const [port, metricsPort] = [await freePort(), await freePort()]
    // What the kubelet gives the container: the image's ENV, the ConfigMap, its own variables; the ports
    // free ones here, and the Secret's path this test's.
    const env: Record<string, string> = {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOSTNAME: 'petstore-5d4f8b7c9-x2x7q',
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      KUBERNETES_SERVICE_PORT: '443',
      NODE_ENV: (finalStage().get('ENV') ?? '').replace('NODE_ENV=', ''),
      ...SETTINGS,
      HOST: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    }
    delete env.PORT
    for (const name of Object.keys(env).filter((name) => name.endsWith('_FILE') && !name.startsWith('TLS_'))) {
      const file = path.join(secrets, path.relative(mountPath, env[name] ?? ''))
      fs.writeFileSync(file, `${name.startsWith('DATABASE_URL') ? url : 'redis://:secret@127.0.0.1:1'}\n`, { mode: 0o440 })
      fs.chownSync(file, 0, gid)
      env[name] = file
    }
    const wrapper = sandbox({ uid, gid, writable: [] })
    const run = (args: string[]) => runCommand(wrapper[0] ?? '', [...wrapper.slice(1), process.execPath, BIN, ...args], { cwd: workdir, env: { ...env, PORT: String(port) }, timeoutMs: 60_000 })

    const migrated = await run(podSpec(JOB).containers[0]?.args ?? [])
    assert.equal(migrated.code, 0, migrated.stderr)
    // An operator's first key: kubectl exec deploy/petstore -- node /opt/petstore/bin/petstore.js keys create.
    const created = await run(['keys', 'create', '--name', 'pod', '--json'])
    assert.equal(created.code, 0, created.stderr)
    const key = (JSON.parse(created.stdout) as { key: string }).key

    const server = await startPetstore({ cwd: workdir, env, port, bin: BIN, args: SERVER.args?.slice(1) ?? [], wrapper, timeoutMs: 60_000 })
    t.after(() => server.child.kill('SIGKILL'))
    const ports: Record<string, number> = { operations: metricsPort, http: port }
    for (const probe of [SERVER.startupProbe, SERVER.readinessProbe, SERVER.livenessProbe]) {
      const answer = await fetch(`http://127.0.0.1:${ports[String(probe?.httpGet?.port)]}${probe?.httpGet?.path}`)
      assert.equal(answer.status, 200, `${probe?.httpGet?.path}: ${await answer.text()}`)
    }
    const pet = await fetch(`${server.baseUrl}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"name":"Rex","categoryId":1}',
    })
    assert.equal(pet.status, 201, await pet.text())
    const environ = fs.readFileSync(`/proc/${server.pid}/environ`, 'utf8')
    assert.ok(password !== '' && !environ.includes(password), 'the password is not in the environment')
    assert.deepEqual(fs.readdirSync(workdir), [], 'nothing written to the working directory')

    const exit = await stopServer(server, 'SIGTERM', (podSpec(DEPLOYMENT).terminationGracePeriodSeconds ?? 30) * 1000)
    assert.deepEqual(exit, { code: 0, signal: null }, server.output())
    for (const output of [server.output(), migrated.stdout, migrated.stderr, created.stderr]) assert.ok(!output.includes(password), 'the password is logged')
  })
})
