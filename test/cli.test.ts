import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { type TestContext, after, describe, it } from 'node:test'
import { hashSecret } from '../src/api-keys/api-keys.service.js'
import { type CliIo, main } from '../src/cli.js'
import { CONFIG_NAMES, describeVariable, loadConfig } from '../src/config.js'
import { sqliteMigrations } from '../src/storage/migrations/sqlite/index.js'
import { openStorage } from '../src/repositories.js'
import { BIN, ENGINES, ROOT, createTestDatabase, sqliteDatabaseEnv } from './helper.js'
import { type ServerProcess, cleanupProcesses, refusedWithin, runCli, runCommand, startServer, stopServer, trackedTempDir } from './processes.js'

// The CLI as a user runs it: a real process, a real database file, exit codes and output streams.

/** A key as `keys create --json` prints it. */
interface CreatedKey {
  id: string
  name: string
  prefix: string
  environment: string
  scopes: string[]
  createdAt: string
  lastUsedAt: string | null
  expiresAt: string | null
  revokedAt: string | null
  replacedBy: string | null
  key: string
}

type ListedKey = Omit<CreatedKey, 'key'>

after(cleanupProcesses)

/** A fresh temp directory (the working directory) and the environment naming a database file not yet created in it. */
function fresh(): { dir: string; dbFile: string; env: Record<string, string> } {
  const dir = trackedTempDir('petstore-cli-')
  const env = sqliteDatabaseEnv(dir)
  return { dir, dbFile: (env.DATABASE_URL ?? '').slice('sqlite://'.length), env }
}

async function createKey(env: Record<string, string>, cwd: string, name: string, ...extra: string[]): Promise<CreatedKey> {
  const result = await runCli(['keys', 'create', '--name', name, '--json', ...extra], env, cwd)
  assert.equal(result.code, 0, result.stderr)
  return JSON.parse(result.stdout) as CreatedKey
}

async function listKeys(env: Record<string, string>, cwd: string): Promise<ListedKey[]> {
  const result = await runCli(['keys', 'list', '--json'], env, cwd)
  assert.equal(result.code, 0, result.stderr)
  return JSON.parse(result.stdout) as ListedKey[]
}

function withoutSecret(created: CreatedKey): ListedKey {
  const listed: Partial<CreatedKey> = { ...created }
  delete listed.key
  return listed as ListedKey
}

/** Fails if `text` shows any part of `secret` beyond its public prefix, its hash, or anything shaped like a SHA-256 hex digest. */
function assertNoSecret(text: string, created: CreatedKey): void {
  assert.ok(!text.includes(created.key), 'the secret key is shown')
  assert.ok(!text.includes(created.key.slice(created.prefix.length)), 'the hidden part of the key is shown')
  assert.ok(!text.includes(hashSecret(created.key)), 'the hash of the key is shown')
  assert.doesNotMatch(text, /[0-9a-f]{64}/i, 'a 64-hex-character hash is shown')
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const LIVE_KEY = /^ps_live_[0-9A-Za-z]{32}$/

describe('petstore CLI', { concurrency: 2 }, () => {
  describe('keys create', () => {
    it('creates the database file on first use and prints the new ps_live_ key alone on the last line', async () => {
      const { dir, dbFile, env } = fresh()
      assert.equal(fs.existsSync(dbFile), false)
      const result = await runCli(['keys', 'create', '--name', 'ci'], env, dir)
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stderr, 'Using SQLite database ./petstore.db (created)\n', 'the database file in the folder it ran in')
      const lines = result.stdout.trimEnd().split('\n')
      assert.ok(lines.length > 1, 'the key should follow a human-readable line')
      assert.match(lines.at(-1) ?? '', LIVE_KEY)
      assert.equal(fs.existsSync(dbFile), true)
    })

    it('prints a ps_test_ key when PETSTORE_ENV is staging', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['keys', 'create', '--name', 'ci'], { ...env, PETSTORE_ENV: 'staging' }, dir)
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout.trimEnd().split('\n').at(-1) ?? '', /^ps_test_[0-9A-Za-z]{32}$/)
    })

    it('prints one JSON object with the key, its id, name, prefix, environment and dates with --json', async () => {
      const { dir, env } = fresh()
      const before = Date.now()
      const result = await runCli(['keys', 'create', '--name', 'x', '--json'], env, dir)
      const afterRun = Date.now()
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stdout.trimEnd().split('\n').length, 1, 'one line of JSON')
      const created = JSON.parse(result.stdout) as CreatedKey
      assert.deepEqual(Object.keys(created).sort(), [
        'createdAt',
        'environment',
        'expiresAt',
        'id',
        'key',
        'lastUsedAt',
        'name',
        'prefix',
        'replacedBy',
        'revokedAt',
        'scopes',
      ])
      assert.match(created.key, LIVE_KEY)
      assert.match(created.id, /^key_[0-9A-Za-z]+$/)
      assert.equal(created.name, 'x')
      assert.equal(created.environment, 'production')
      assert.ok(created.prefix.startsWith('ps_live_') && created.key.startsWith(created.prefix))
      assert.ok(created.prefix.length < created.key.length / 2, `prefix ${created.prefix} gives too much away`)
      assert.match(created.createdAt, ISO_INSTANT)
      assert.ok(Date.parse(created.createdAt) >= before && Date.parse(created.createdAt) <= afterRun)
      assert.equal(created.expiresAt, null)
      assert.equal(created.lastUsedAt, null)
      assert.equal(created.revokedAt, null)
      assert.equal(created.replacedBy, null)
      assert.deepEqual(created.scopes, ['pets:read', 'pets:write'])
    })

    it('sets expiresAt exactly the --expires-in duration after createdAt, for 30m, 12h, 90d and 4w', async () => {
      const { dir, env } = fresh()
      const durations = { '30m': 30 * 60_000, '12h': 12 * 3_600_000, '90d': 90 * 86_400_000, '4w': 28 * 86_400_000 }
      for (const [text, ms] of Object.entries(durations)) {
        const created = await createKey(env, dir, `expires in ${text}`, '--expires-in', text)
        assert.match(created.expiresAt ?? '', ISO_INSTANT)
        assert.equal(Date.parse(created.expiresAt ?? '') - Date.parse(created.createdAt), ms, text)
      }
    })

    it('refuses a bad --expires-in (90x, 0d, abc, 3651d) with exit 2 and a message naming --expires-in, creating no key', async () => {
      const { dir, env } = fresh()
      for (const bad of ['90x', '0d', 'abc', '3651d']) {
        const result = await runCli(['keys', 'create', '--name', 'x', '--expires-in', bad], env, dir)
        assert.equal(result.code, 2, `${bad}: ${result.stderr}`)
        assert.match(result.stderr, /--expires-in/, bad)
        assert.doesNotMatch(result.stdout, /ps_(live|test)_/, bad)
      }
      assert.deepEqual(await listKeys(env, dir), [])
    })

    it('refuses to create a key without a --name, with exit 2', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['keys', 'create'], env, dir)
      assert.equal(result.code, 2)
      assert.match(result.stderr, /--name/)
      assert.equal(result.stdout, '')
    })
  })

  describe('keys list', () => {
    it('shows id, name, prefix, scopes, created, last used, expires, revoked and replaced by of each key, never the secret nor a hash', async () => {
      const { dir, env } = fresh()
      const forever = await createKey(env, dir, 'forever')
      const shortLived = await createKey(env, dir, 'short-lived', '--expires-in', '90d')
      const result = await runCli(['keys', 'list'], env, dir)
      assert.equal(result.code, 0, result.stderr)
      const [header = '', ...rows] = result.stdout.trimEnd().split('\n')
      assert.match(header, /^ID +NAME +PREFIX +ENVIRONMENT +SCOPES +CREATED +LAST USED +EXPIRES +REVOKED +REPLACED BY$/)
      assert.equal(rows.length, 2)
      for (const [row, key, expires] of [
        [rows[0] ?? '', forever, 'never'],
        [rows[1] ?? '', shortLived, shortLived.expiresAt ?? ''],
      ] as const) {
        assert.deepEqual(row.split(/ {2,}/), [
          key.id,
          key.name,
          `${key.prefix}…`,
          'production',
          'pets:read,pets:write',
          key.createdAt,
          'never',
          expires,
          'no',
          '-',
        ])
      }
      assertNoSecret(result.stdout, forever)
      assertNoSecret(result.stdout, shortLived)
    })

    it('prints every key as JSON with --json, never the secret nor a hash', async () => {
      const { dir, env } = fresh()
      const forever = await createKey(env, dir, 'forever')
      const shortLived = await createKey(env, dir, 'short-lived', '--expires-in', '90d')
      const result = await runCli(['keys', 'list', '--json'], env, dir)
      assert.equal(result.code, 0, result.stderr)
      assert.deepEqual(JSON.parse(result.stdout), [withoutSecret(forever), withoutSecret(shortLived)])
      assertNoSecret(result.stdout, forever)
      assertNoSecret(result.stdout, shortLived)
    })

    it('says there are no keys yet on a new database', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['keys', 'list'], env, dir)
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /no api keys/i)
    })
  })

  for (const engine of ENGINES) {
    describe(`keys with scopes on ${engine}`, () => {
      /** A fresh database of `engine` and the folder the CLI runs in. */
      const database = async (t: TestContext) => {
        const dir = trackedTempDir('petstore-cli-scopes-')
        const created = await createTestDatabase(engine, dir)
        t.after(() => created.drop())
        return { dir, env: created.env }
      }

      it('creates a read-only key with --scope pets:read, and lists and rotates it with that scope', async (t) => {
        const { dir, env } = await database(t)
        const text = await runCli(['keys', 'create', '--name', 'dashboard', '--scope', 'pets:read'], env, dir)
        assert.equal(text.code, 0, text.stderr)
        assert.match(text.stdout, /^Created API key key_\w+ "dashboard" for production, scopes pets:read\.$/m)
        const json = await createKey(env, dir, 'partner', '--scope', 'pets:read')
        assert.deepEqual(json.scopes, ['pets:read'])
        const table = await runCli(['keys', 'list'], env, dir)
        const row = table.stdout.split('\n').find((line) => line.startsWith(json.id)) ?? ''
        assert.equal(row.split(/ {2,}/)[4], 'pets:read', table.stdout)
        const rotated = await runCli(['keys', 'rotate', json.id, '--json'], env, dir)
        assert.equal(rotated.code, 0, rotated.stderr)
        const successor = JSON.parse(rotated.stdout) as CreatedKey & { replaces: ListedKey }
        assert.deepEqual(successor.scopes, ['pets:read'])
        assert.deepEqual(successor.replaces.scopes, ['pets:read'])
        const listed = await listKeys(env, dir)
        assert.deepEqual(
          listed.map(({ name, scopes }) => [name, scopes]),
          [
            ['dashboard', ['pets:read']],
            ['partner', ['pets:read']],
            ['partner', ['pets:read']],
          ],
        )
      })

      it('takes scopes comma-separated or repeated, in any order, and writes them in one order', async (t) => {
        const { dir, env } = await database(t)
        for (const given of [['pets:write,pets:read'], ['pets:write', 'pets:read'], ['pets:read, pets:write,pets:read']]) {
          const created = await createKey(env, dir, 'both', ...given.flatMap((scope) => ['--scope', scope]))
          assert.deepEqual(created.scopes, ['pets:read', 'pets:write'], given.join(' '))
        }
        assert.deepEqual((await createKey(env, dir, 'writer', '--scope', 'pets:write')).scopes, ['pets:write'])
      })

      it('refuses an unknown or empty scope with exit 2 naming it, creating no key', async (t) => {
        const { dir, env } = await database(t)
        for (const [given, named] of [
          ['pets:admin', '"pets:admin"'],
          ['pets:read,pets:delete', '"pets:delete"'],
          ['PETS:READ', '"PETS:READ"'],
          ['', 'an empty one'],
        ] as const) {
          const result = await runCli(['keys', 'create', '--name', 'x', '--scope', given], env, dir)
          assert.equal(result.code, 2, `${given}: ${result.stderr}`)
          assert.equal(result.stderr.split('\n')[0], `petstore: --scope takes pets:read and pets:write, comma-separated; not ${named}`)
          assert.doesNotMatch(result.stdout, /ps_(live|test)_/)
        }
        assert.deepEqual(await listKeys(env, dir), [])
      })
    })
  }

  describe('keys revoke', () => {
    it('revokes a key by id with exit 0; keys list then shows it revoked and the other key untouched', async () => {
      const { dir, env } = fresh()
      const doomed = await createKey(env, dir, 'doomed')
      const kept = await createKey(env, dir, 'kept')
      const before = Date.now()
      const result = await runCli(['keys', 'revoke', doomed.id], env, dir)
      assert.equal(result.code, 0, result.stderr)
      assert.ok(result.stdout.includes(doomed.id))

      const [listedDoomed, listedKept] = await listKeys(env, dir)
      assert.match(listedDoomed?.revokedAt ?? '', ISO_INSTANT)
      assert.ok(Date.parse(listedDoomed?.revokedAt ?? '') >= before)
      assert.deepEqual(listedDoomed, { ...withoutSecret(doomed), revokedAt: listedDoomed?.revokedAt })
      assert.deepEqual(listedKept, withoutSecret(kept))

      const table = await runCli(['keys', 'list'], env, dir)
      const doomedRow = table.stdout.split('\n').find((line) => line.startsWith(doomed.id)) ?? ''
      assert.equal(doomedRow.split(/ {2,}/).at(-2), listedDoomed?.revokedAt)
    })

    it('keeps the first revocation time when a key is revoked again', async () => {
      const { dir, env } = fresh()
      const key = await createKey(env, dir, 'twice')
      assert.equal((await runCli(['keys', 'revoke', key.id], env, dir)).code, 0)
      const [first] = await listKeys(env, dir)
      const again = await runCli(['keys', 'revoke', key.id], env, dir)
      assert.equal(again.code, 0, again.stderr)
      assert.deepEqual(await listKeys(env, dir), [first])
    })

    it('exits 1 with a message on stderr naming an id no key has', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['keys', 'revoke', 'key_doesNotExist00'], env, dir)
      assert.equal(result.code, 1)
      assert.match(result.stderr, /key_doesNotExist00/)
      assert.equal(result.stdout, '')
    })

    it("refuses a key's secret given for its id, by revoke and by rotate, with exit 2, saying so without printing it, and changes nothing", async () => {
      const { dir, env } = fresh()
      const created = await createKey(env, dir, 'pasted')
      const secret = created.key.slice(created.prefix.length)
      const percentEncoded = [...created.key].map((char) => `%${char.charCodeAt(0).toString(16)}`).join('')
      for (const command of ['revoke', 'rotate']) {
        for (const given of [created.key, `%70${created.key.slice(1)}`, percentEncoded]) {
          const result = await runCli(['keys', command, given], env, dir)
          assert.equal(result.code, 2, `${command} ${given}: ${result.stderr}`)
          assert.match(result.stderr, new RegExp(`^petstore: keys ${command} takes a key's id \\(key_…\\), not its secret`))
          assert.match(result.stderr, new RegExp(`Run "petstore keys ${command} --help"`))
          assertNoSecret(result.stderr + result.stdout, created)
          assert.ok(!result.stderr.toLowerCase().includes(secret.slice(4, 12).toLowerCase()), 'a part of the secret is shown')
        }
      }
      assert.deepEqual(await listKeys(env, dir), [withoutSecret(created)])
    })

    it('exits 2 without exactly one id', async () => {
      const { dir, env } = fresh()
      for (const args of [['keys', 'revoke'], ['keys', 'revoke', 'key_a', 'key_b']]) {
        const result = await runCli(args, env, dir)
        assert.equal(result.code, 2, args.join(' '))
        assert.notEqual(result.stderr, '')
      }
    })
  })

  describe('a key made by the CLI, against a running server', () => {
    let server: ServerProcess | undefined
    after(async () => {
      if (server === undefined) return
      // As before the move: SIGTERM, at most 5 s for it to exit, then SIGKILL; never a failure of the suite.
      await stopServer(server, 'SIGTERM', 5_000).catch(() => undefined)
    })

    it('is accepted, then refused with 401 within 2 seconds of keys revoke while the server keeps running', { timeout: 60_000 }, async () => {
      const { dir, env } = fresh()
      const doomed = await createKey(env, dir, 'doomed')
      const kept = await createKey(env, dir, 'kept')
      const running = await startServer(env, dir)
      server = running
      const listPets = async (key: string) => {
        const response = await fetch(`${running.baseUrl}/v1/pets`, {
          headers: { authorization: `Bearer ${key}` },
          signal: AbortSignal.timeout(10_000),
        })
        return { status: response.status, body: await response.text() }
      }

      assert.equal((await listPets(doomed.key)).status, 200)
      assert.equal((await listPets(kept.key)).status, 200)
      const [used] = await listKeys(env, dir)
      assert.match(used?.lastUsedAt ?? '', ISO_INSTANT, 'keys list shows when the key was last used')

      const revoked = await runCli(['keys', 'revoke', doomed.id], env, dir)
      assert.equal(revoked.code, 0, revoked.stderr)
      const refused = await refusedWithin(() => listPets(doomed.key), { since: Date.now(), withinMs: 2_000, after: 'keys revoke' })
      assert.equal(refused.status, 401)
      assert.deepEqual(Object.keys(JSON.parse(refused.body) as object).sort(), ['code', 'message', 'status'])
      assert.equal((await listPets(kept.key)).status, 200, 'the other key must keep working')
      assert.equal(running.child.exitCode, null, running.output())
    })
  })

  describe('usage', () => {
    it('prints help listing every command with --help, exit 0', async () => {
      const { dir } = fresh()
      const result = await runCli(['--help'], {}, dir)
      assert.equal(result.code, 0, result.stderr)
      for (const command of ['serve', 'migrate', 'openapi', 'deprecations', 'keys create', 'keys list', 'keys revoke', 'keys rotate', '--version']) {
        assert.match(result.stdout, new RegExp(`^ +${command} `, 'm'), command)
      }
    })

    it('prints the version of package.json, alone on its line, with --version, exit 0; anything after it is a usage error', async () => {
      const { dir } = fresh()
      const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
      assert.match(version, /^\d+\.\d+\.\d+$/)
      const result = await runCli(['--version'], {}, dir)
      assert.deepEqual({ code: result.code, stdout: result.stdout, stderr: result.stderr }, { code: 0, stdout: `${version}\n`, stderr: '' })
      const extra = await runCli(['--version', 'serve'], {}, dir)
      assert.equal(extra.code, 2, extra.stderr)
      assert.match(extra.stderr, /^petstore: --version takes nothing more, got "serve"\n/)
    })

    it('prints help for keys create with --help, exit 0, naming its options', async () => {
      const { dir } = fresh()
      const result = await runCli(['keys', 'create', '--help'], {}, dir)
      assert.equal(result.code, 0, result.stderr)
      for (const option of ['--name', '--expires-in', '--json']) assert.ok(result.stdout.includes(option), option)
    })

    it('prints every configuration variable in serve --help, its name apart from its meaning', async () => {
      const result = await runCli(['serve', '--help'], {}, fresh().dir)
      assert.equal(result.code, 0, result.stderr)
      for (const name of CONFIG_NAMES) {
        const line = result.stdout.split('\n').find((text) => text.startsWith(`  ${name} `))
        assert.ok(line !== undefined, `${name} is missing or runs into its meaning:\n${result.stdout}`)
        assert.equal(line.slice(2 + name.length).trim(), describeVariable(name))
      }
    })

    it('exits 2 with a message on stderr for an unknown command', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['frobnicate'], env, dir)
      assert.equal(result.code, 2)
      assert.match(result.stderr, /frobnicate/)
      assert.equal(result.stdout, '')
    })

    it('exits 2 with a message on stderr naming an unknown flag', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['keys', 'list', '--bogus'], env, dir)
      assert.equal(result.code, 2)
      assert.match(result.stderr, /--bogus/)
      assert.equal(result.stdout, '')
    })
  })

  describe('every command', () => {
    const COMMANDS = ['serve', 'migrate', 'backup', 'copy', 'openapi', 'deprecations', 'keys', 'keys create', 'keys list', 'keys revoke', 'keys rotate']

    /** `main` in this process, as the bin runs it: the same code paths, without a process per case. */
    async function inProcess(args: string[], env: Record<string, string> = {}) {
      let stdout = ''
      let stderr = ''
      const io: CliIo = { env, cwd: trackedTempDir('petstore-cli-'), stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) }
      const code = await main(args, io)
      return { code, stdout, stderr }
    }

    for (const command of COMMANDS) {
      const words = command.split(' ')
      it(`petstore ${command}: --help, -h and "help ${command}" print its usage with exit 0`, async () => {
        for (const args of [[...words, '--help'], [...words, '-h'], ['help', ...words], [...words, '--bogus', '--help']]) {
          const result = await inProcess(args)
          assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`)
          assert.ok(result.stdout.startsWith(`Usage: petstore ${command}`), `${args.join(' ')}: ${result.stdout}`)
          assert.match(result.stdout.slice(`Usage: petstore ${command}`.length), /^[ \n]/, 'the usage of this command, not of a longer one')
          assert.equal(result.stderr, '')
        }
      })

      it(`petstore ${command}: an unknown option is a one-line usage error naming it and "petstore ${command} --help", exit 2`, async () => {
        const result = await inProcess([...words, '--bogus'])
        assert.equal(result.code, 2)
        assert.equal(result.stdout, '')
        const lines = result.stderr.trimEnd().split('\n')
        assert.equal(lines.length, 2, result.stderr)
        assert.match(lines[0] ?? '', /^petstore: .*--bogus/)
        assert.equal(lines[1], `Run "petstore ${command} --help" for usage.`)
      })
    }

    it('refuses arguments a command does not take, and a missing key id, with exit 2', async () => {
      for (const args of [['migrate', 'now'], ['openapi', 'x'], ['deprecations', 'getPet'], ['keys', 'list', 'all'], ['keys', 'rotate'], ['keys', 'rotate', 'key_a', 'key_b']]) {
        const result = await inProcess(args)
        assert.equal(result.code, 2, args.join(' '))
        assert.match(result.stderr, new RegExp(`Run "petstore ${args[0] === 'keys' ? `keys ${args[1]}` : args[0]} --help"`), args.join(' '))
      }
    })

    it('never prints a key pasted into any argument a usage error quotes, raw or percent-encoded', async () => {
      const secret = 'Q1SokAbCdEfGhIjKlMnOpQrStUvWxYz0'
      for (const key of [`ps_live_${secret}`, `ps_test_${secret}`, `%70s_live_%${secret.charCodeAt(0).toString(16)}${secret.slice(1)}`]) {
        for (const args of [
          [key],
          ['help', key],
          ['keys', key],
          ['keys', 'revoke', 'key_a', key],
          ['keys', 'rotate', key],
          ['keys', 'rotate', 'key_a', '--grace', key],
          ['keys', 'create', '--name', key],
          ['keys', 'create', '--name', 'x', '--expires-in', key],
          ['keys', 'create', '--name', 'x', '--scope', key],
          ['keys', 'list', `--${key}`],
          ['serve', '--workers', key],
        ]) {
          const result = await inProcess(args)
          assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`)
          assert.ok(!result.stderr.includes(secret.slice(1)), `${args.join(' ')}: ${result.stderr}`)
        }
      }
    })

    it('answers "petstore keys" with no command, and an unknown one, with exit 2 pointing at the keys help', async () => {
      for (const args of [['keys'], ['keys', 'delete']]) {
        const result = await inProcess(args)
        assert.equal(result.code, 2, args.join(' '))
        assert.match(result.stderr, /Run "petstore keys --help"/)
      }
    })

    it('checks the command line before the configuration: a usage error is exit 2 even with a bad environment', async () => {
      const result = await inProcess(['keys', 'rotate', 'key_a', '--grace', '1y'], { PORT: 'abc' })
      assert.equal(result.code, 2, result.stderr)
      assert.match(result.stderr, /--grace/)
    })

    it('reports a database that cannot be reached in one line with exit 1, its cause said once, never a stack trace', async () => {
      for (const args of [['deprecations'], ['keys', 'rotate', 'key_a'], ['keys', 'list'], ['migrate', '--status']]) {
        const result = await inProcess(args, { DATABASE_URL: 'postgres://petstore:hunter2@127.0.0.1:1/petstore' })
        assert.equal(result.code, 1, args.join(' '))
        assert.equal(result.stdout, '')
        assert.match(result.stderr, /^petstore: cannot reach the database named by DATABASE_URL: connect ECONNREFUSED 127\.0\.0\.1:1\n$/)
        assert.doesNotMatch(result.stderr, /hunter2/)
      }
    })
  })

  describe('openapi', () => {
    it('prints the OpenAPI 3.1.0 document, with /pets and /pets/{petId}', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['openapi'], env, dir)
      assert.equal(result.code, 0, result.stderr)
      const document = JSON.parse(result.stdout) as { openapi: string; paths: Record<string, Record<string, unknown>> }
      assert.equal(document.openapi, '3.1.0')
      assert.deepEqual(Object.keys(document.paths['/pets'] ?? {}).sort(), ['get', 'head', 'post'])
      assert.deepEqual(Object.keys(document.paths['/pets/{petId}'] ?? {}).sort(), ['get', 'head'])
    })
  })

  describe('migrate', () => {
    it('migrates a new database with exit 0, then exits 0 again saying it is up to date', async (t) => {
      const { dir, dbFile, env } = fresh()
      const first = await runCli(['migrate'], env, dir)
      assert.equal(first.code, 0, first.stderr)
      const storage = await openStorage(loadConfig(env).database)
      t.after(() => storage.close())
      assert.deepEqual((await storage.migrate()).applied, [], 'migrations were left pending')
      assert.equal(fs.existsSync(dbFile), true)
      const second = await runCli(['migrate'], env, dir)
      assert.equal(second.code, 0, second.stderr)
      assert.match(second.stdout, /up to date/)
    })

    it('names the migrations it applied to a new database', async () => {
      const { dir, env } = fresh()
      const result = await runCli(['migrate'], env, dir)
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stdout, `Applied: ${Object.keys(sqliteMigrations).sort().join(', ')}\n`)
    })
  })

  describe('configuration', () => {
    const badValues = [
      ['PORT', 'abc'],
      ['PORT', '0'],
      ['PETSTORE_ENV', 'prod'],
      ['DATABASE_URL', 'mysql://x'],
    ] as const
    for (const [variable, value] of badValues) {
      it(`refuses ${variable}=${value}: serve and keys list exit 1 with a message naming ${variable}`, async () => {
        const { dir, env } = fresh()
        for (const command of [['serve'], ['keys', 'list']]) {
          const result = await runCli(command, { ...env, [variable]: value }, dir)
          assert.equal(result.code, 1, `${command.join(' ')}: ${result.stderr}`)
          assert.ok(result.stderr.includes(variable), `${command.join(' ')}: ${result.stderr}`)
          assert.equal(result.stdout, '')
        }
      })
    }

    for (const url of ['mysql://admin:hunter2@db.internal/petstore', 'postgres://admin:hunter2@db.invalid/petstore']) {
      it(`names DATABASE_URL but never its password when it cannot use ${url.split(':')[0]}://…`, async () => {
        const { dir } = fresh()
        const result = await runCli(['keys', 'list'], { DATABASE_URL: url }, dir)
        assert.equal(result.code, 1)
        assert.match(result.stderr, /DATABASE_URL/)
        assert.doesNotMatch(result.stderr, /hunter2/)
      })
    }
  })

  describe('what a command loads', () => {
    // Recorded by a module hook in the process: the packages every module loaded came from.
    const HOOK = `import fs from 'node:fs'
import { registerHooks } from 'node:module'
const packages = new Set()
registerHooks({ load(url, context, next) {
  const name = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(url)
  if (name !== null) packages.add(name[1])
  return next(url, context)
} })
process.on('exit', () => fs.writeFileSync(process.env.LOADED_PACKAGES, [...packages].join('\\n')))
`
    // The heavy ones, TypeBox first. (pino, a small one, is the log's, which serve writes from its first line.)
    const SERVER_LIBRARIES = ['fastify', 'typebox', 'prom-client', '@opentelemetry/api']

    async function packagesLoaded(args: string[], exitCode = 0, variables: Record<string, string> = {}): Promise<string[]> {
      const { dir, env } = fresh()
      const hook = path.join(dir, 'hook.mjs')
      const loaded = path.join(dir, 'loaded.txt')
      fs.writeFileSync(hook, HOOK)
      const result = await runCommand(process.execPath, ['--import', hook, BIN, ...args], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', ...env, ...variables, LOADED_PACKAGES: loaded },
      })
      assert.equal(result.code, exitCode, result.stderr)
      return fs.readFileSync(loaded, 'utf8').split('\n')
    }

    // A command that needs no server starts without its libraries, which are most of a process's start-up.
    // Each with its exit code on a database not yet made (migrate --status says 3, migrations pending), and
    // a serve that cannot start: a configuration that does not hold is said before the server loads.
    const LIGHT: [string[], number, Record<string, string>?][] = [
      [['--version'], 0],
      [['keys', 'list'], 0],
      [['keys', 'create', '--name', 'ci'], 0],
      [['migrate'], 0],
      [['migrate', '--status'], 3],
      [['deprecations'], 0],
      [['copy', '--help'], 0],
      [['backup', '--help'], 0],
      [['serve'], 1, { PORT: '041291' }],
      [['serve', '--workers', '2'], 1, { HOST: 'nowhere.invalid' }],
    ]
    for (const [args, exitCode, variables = {}] of LIGHT) {
      const given = Object.entries(variables).map(([name, value]) => `${name}=${value} `)
      it(`${given.join('')}petstore ${args.join(' ')} loads none of the server's libraries`, async () => {
        const loaded = await packagesLoaded(args, exitCode, variables)
        assert.deepEqual(SERVER_LIBRARIES.filter((name) => loaded.includes(name)), [])
      })
    }

    it('petstore openapi loads them: the hook sees what loads', async () => {
      const loaded = await packagesLoaded(['openapi'])
      assert.deepEqual(['fastify', 'typebox', 'prom-client'].filter((name) => !loaded.includes(name)), [])
    })
  })

  describe('installation', () => {
    it('runs as `npx petstore --help` from the project, through the bin entry of package.json, leaving dist/ as it was built', { timeout: 60_000 }, async () => {
      // npx installs the project into its cache the first time it runs it from a folder, which runs `prepare`: an
      // npm cache of its own, as on a new machine, so that this run is a first. dist/ must stay as it is (scripts/prepare.js).
      const built = fs.statSync(path.join(ROOT, 'dist', 'cli.js')).mtimeMs
      const env = { ...process.env, npm_config_cache: trackedTempDir('petstore-npm-cache-') }
      // --no-install: if the bin wiring broke, npx must fail here, not fetch some other "petstore" package.
      const result = await runCommand('npx', ['--no-install', 'petstore', '--help'], { cwd: ROOT, env, timeoutMs: 55_000 })
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /^Usage: petstore <command>/)
      assert.equal(fs.statSync(path.join(ROOT, 'dist', 'cli.js')).mtimeMs, built, 'npx built dist/ again')
    })
  })
})
