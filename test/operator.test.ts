import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { ROOT, processGroup, waitUntilReady } from '../scripts/petstore-process.js'
import { type ProcessExit, cleanupProcesses, freePort, runCli, trackedTempDir } from './processes.js'

// Small frictions a new operator met (issue 14): which database the CLI used, usage mistakes in the
// CLI's own words, a second revocation, and `npm start` stopped with `kill`.

after(cleanupProcesses)

describe('the CLI, for an operator', () => {
  it('says on stderr which SQLite database it used, and that it created it, in text output only', async () => {
    const dir = trackedTempDir('petstore-operator-')
    // No DATABASE_URL: the default ./data/petstore.db of the folder the command runs in.
    const first = await runCli(['keys', 'create', '--name', 'ops'], {}, dir)
    assert.equal(first.code, 0, first.stderr)
    assert.equal(first.stderr, 'Using SQLite database ./data/petstore.db (created)\n')
    assert.match(first.stdout.trimEnd().split('\n').at(-1) ?? '', /^ps_live_/, 'stdout is still the result, the key last')
    assert.ok(fs.existsSync(path.join(dir, 'data', 'petstore.db')))
    const again = await runCli(['keys', 'list'], {}, dir)
    assert.equal(again.stderr, 'Using SQLite database ./data/petstore.db\n')
    // A file outside the folder is named by its absolute path.
    const elsewhere = trackedTempDir('petstore-operator-db-')
    const file = path.join(elsewhere, 'store.db')
    const migrated = await runCli(['migrate'], { DATABASE_URL: `sqlite://${file}` }, dir)
    assert.equal(migrated.stderr, `Using SQLite database ${file} (created)\n`)
    for (const args of [
      ['keys', 'create', '--name', 'json', '--json'],
      ['keys', 'list', '--json'],
      ['deprecations', '--json'],
    ]) {
      const json = await runCli(args, {}, dir)
      assert.equal(json.code, 0, json.stderr)
      assert.doesNotThrow(() => JSON.parse(json.stdout), `${args.join(' ')} printed more than JSON:\n${json.stdout}`)
      assert.doesNotMatch(json.stdout + json.stderr, /Using SQLite/)
    }
  })

  it('names a PostgreSQL database by name, host and port, never with its password', async (t) => {
    const server = process.env.PETSTORE_TEST_DATABASE_URL
    if (server === undefined || server === '') {
      t.skip('PETSTORE_TEST_DATABASE_URL is not set')
      return
    }
    const url = new URL(server)
    const result = await runCli(['migrate'], { DATABASE_URL: server }, trackedTempDir('petstore-operator-'))
    assert.equal(result.code, 0, result.stderr)
    const line = result.stderr.split('\n')[0] ?? ''
    assert.equal(line, `Using PostgreSQL database ${url.pathname.slice(1) || url.username} on ${url.hostname}:${url.port || '5432'}`)
    if (url.password !== '') assert.ok(!result.stderr.includes(url.password))
  })

  it('answers no command as other usage errors: one line, where the usage is, exit 2', async () => {
    const result = await runCli([], {}, trackedTempDir('petstore-operator-'))
    assert.equal(result.code, 2)
    assert.equal(result.stdout, '')
    assert.equal(result.stderr, 'petstore: no command given: serve, migrate, backup, copy, openapi, deprecations or keys\nRun "petstore --help" for usage.\n')
  })

  it('says an unknown option or a missing value in its own words', async () => {
    const dir = trackedTempDir('petstore-operator-')
    const unknown = await runCli(['keys', 'list', '--all'], {}, dir)
    assert.equal(unknown.code, 2)
    assert.equal(unknown.stderr, 'petstore: unknown option "--all"\nRun "petstore keys list --help" for usage.\n')
    const missing = await runCli(['keys', 'create', '--name'], {}, dir)
    assert.equal(missing.code, 2)
    assert.equal(missing.stderr, 'petstore: --name needs a value\nRun "petstore keys create --help" for usage.\n')
    const valued = await runCli(['keys', 'list', '--json=yes'], {}, dir)
    assert.equal(valued.code, 2)
    assert.equal(valued.stderr, 'petstore: --json takes no value\nRun "petstore keys list --help" for usage.\n')
  })

  it('says that a key was already revoked, keeping the first revocation time', async () => {
    const dir = trackedTempDir('petstore-operator-')
    const created = await runCli(['keys', 'create', '--name', 'twice', '--json'], {}, dir)
    const { id } = JSON.parse(created.stdout) as { id: string }
    const first = await runCli(['keys', 'revoke', id], {}, dir)
    assert.equal(first.code, 0, first.stderr)
    const revokedAt = /revoked at (\S+)\)/.exec(first.stdout)?.[1]
    assert.ok(revokedAt !== undefined, first.stdout)
    const second = await runCli(['keys', 'revoke', id], {}, dir)
    assert.equal(second.code, 0, second.stderr)
    assert.equal(second.stdout, `API key ${id} "twice" was already revoked (at ${revokedAt}); nothing changed.\n`)
  })
})

describe('npm start', () => {
  it('stops the service when npm is killed, instead of leaving it on its port', { timeout: 60_000 }, async (t) => {
    const dir = trackedTempDir('petstore-operator-')
    const port = await freePort()
    const env = {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: 'off',
      DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}`,
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    }
    const npm = spawn('npm', ['start'], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    npm.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    npm.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
    const exited = new Promise<ProcessExit>((resolve) => npm.once('exit', (code, signal) => resolve({ code, signal })))
    // Whatever happens, nothing of npm start's process group outlives the test.
    if (npm.pid !== undefined) {
      const group = processGroup(npm.pid)
      t.after(() => group.kill('SIGKILL'))
    }
    await waitUntilReady({ name: 'npm start', child: npm, pid: npm.pid ?? 0, exited, output: () => output }, `http://127.0.0.1:${port}/healthz`, {
      timeoutMs: 30_000,
    })
    npm.kill('SIGTERM') // npm alone, as `kill <pid of npm>` does: not its process group
    await exited
    for (let waited = 0; ; waited += 100) {
      const answered = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        () => true,
        () => false,
      )
      if (!answered) break
      assert.ok(waited < 10_000, `the service still answers 10 s after npm was killed:\n${output}`)
      await sleep(100)
    }
    assert.match(output, /npm, which started this server, has exited/)
  })
})
