import assert from 'node:assert/strict'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { hashSecret } from '../src/api-keys/api-keys.service.js'
import { type CliIo, main } from '../src/cli.js'
import { loadConfig } from '../src/config.js'
import { openMigratedStorage } from '../src/repositories.js'
import { BIN } from './helper.js'
import { TEST_POSTGRES_URL } from './postgres.js'
import { cleanupProcesses, freePort, runCli, runCommand, trackedTempDir } from './processes.js'

// What the CLI says when what it was given is wrong: one line saying what was wrong with what, then
// where the usage is, and the exit code (2 for a usage error, 1 for a failure). Run in-process, except
// `serve`, which would listen.

after(cleanupProcesses)

async function run(args: string[], env: Record<string, string>, cwd: string): Promise<{ code: unknown; stdout: string; stderr: string }> {
  let stdout = ''
  let stderr = ''
  const io: CliIo = { env, cwd, stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) }
  const code = await main(args, io)
  return { code, stdout, stderr }
}

const usage = (topic: string) => `\nRun "petstore ${topic === '' ? '' : `${topic} `}--help" for usage.\n`

describe('CLI messages about what was given', () => {
  const dir = trackedTempDir('petstore-cli-errors-')
  const database = path.join(dir, 'petstore.db')
  const env = { DATABASE_URL: `sqlite://${database}` }
  const folder = path.join(dir, 'backups')
  fs.mkdirSync(folder)

  /** argv → exactly what stderr says, and the exit code. `{dir}` in either stands for the test's folder. */
  const cases: [string[], string, number][] = [
    [[], `petstore: no command given: serve, migrate, backup, copy, openapi, deprecations or keys${usage('')}`, 2],
    [
      ['keys', 'create', '--name', 'ci', '--expires-in', '-1d'],
      `petstore: --expires-in must be a positive duration such as 30m, 12h, 90d or 4w, at most 10 years; got "-1d"${usage('keys create')}`,
      2,
    ],
    [
      ['keys', 'create', '--expires-in', '-30m', '--name', 'ci'],
      `petstore: --expires-in must be a positive duration such as 30m, 12h, 90d or 4w, at most 10 years; got "-30m"${usage('keys create')}`,
      2,
    ],
    [['serve', '--workers', '-1'], `petstore: --workers must be a number from 1 to 256 or "auto", got "-1"${usage('serve')}`, 2],
    [['serve', '--workers', '-'], `petstore: --workers must be a number from 1 to 256 or "auto", got "-"${usage('serve')}`, 2],
    [
      ['keys', 'rotate', 'key_x', '--grace', '-2h'],
      `petstore: --grace must be 0 or a duration such as 30m, 12h, 90d or 4w, at most 10 years; got "-2h"${usage('keys rotate')}`,
      2,
    ],
    [['keys', 'create', '--name', '--json'], `petstore: --name needs a value${usage('keys create')}`, 2],
    [['keys', 'create', '--name', 'ci', '--expires-in'], `petstore: --expires-in needs a value${usage('keys create')}`, 2],
    [['keys', 'create', '--name', 'ci', '--expires-in', '-h'], 'help', 0],
    [['keys', 'list', '--json=yes'], `petstore: --json takes no value${usage('keys list')}`, 2],
    [['keys', 'create', '--name', 'two\nlines'], `petstore: --name must be printable text on one line; character 4 is a control character (U+000A)${usage('keys create')}`, 2],
    [['keys', 'create', '--name', 'tab\there'], `petstore: --name must be printable text on one line; character 4 is a control character (U+0009)${usage('keys create')}`, 2],
    [['keys', 'create', '--name', 'red\u001b[31m'], `petstore: --name must be printable text on one line; character 4 is a control character (U+001B)${usage('keys create')}`, 2],
    [['keys', 'create', '--name', 'abc\u202Edcb'], `petstore: --name must be printable text on one line; character 4 is a control character (U+202E)${usage('keys create')}`, 2],
    [['backup', folder], `petstore: ${folder} is a folder; name the file to write, such as ${folder}/petstore-backup.db${usage('backup')}`, 2],
    [['backup', folder, '--force'], `petstore: ${folder} is a folder; name the file to write, such as ${folder}/petstore-backup.db${usage('backup')}`, 2],
    [
      ['backup', path.join(dir, 'missing', 'x.db')],
      `petstore: cannot write the backup to ${dir}/missing/x.db: the folder ${dir}/missing does not exist\n`,
      1,
    ],
    [
      ['copy', '--from', `sqlite://${database}`, '--to', `sqlite://${dir}/missing/copy.db`],
      `petstore: invalid configuration: --to names ${dir}/missing/copy.db, in a folder that does not exist: create ${dir}/missing first if the database belongs there (mkdir -p ${dir}/missing), or correct the path\n`,
      1,
    ],
  ]

  it(`says what was wrong with what was given, for ${cases.length} mistakes`, async () => {
    // A database with its data, so that a backup would have something to copy before it failed.
    await run(['migrate'], env, dir)
    for (const [args, expected, code] of cases) {
      const result = await run(args, env, dir)
      const shown = JSON.stringify(args)
      assert.equal(result.code, code, `${shown}: ${result.stderr}`)
      if (code === 0) assert.match(result.stdout, /^Usage: /, shown)
      else assert.equal(result.stderr, expected, shown)
    }
    assert.deepEqual(fs.readdirSync(folder), [], 'nothing was written into the folder given as a backup file')
    assert.equal(fs.existsSync(path.join(dir, 'missing')), false, 'no folder was created')
  })

  it('shows a key name with a line break, from before names were checked, escaped on its one row of keys list', async () => {
    const other = trackedTempDir('petstore-cli-errors-')
    const config = loadConfig({ DATABASE_URL: `sqlite://${other}/petstore.db` }, other)
    const { storage } = await openMigratedStorage(config.database)
    // Written as a release before the check did; the service now refuses such a name.
    const id = 'key_0123456789abcdef'
    await storage.apiKeys.insert(
      {
        id,
        name: 'two\nlines\u001b[2J',
        prefix: 'ps_live_abcd',
        environment: 'production',
        createdAt: Date.now(),
        expiresAt: null,
        revokedAt: null,
        lastUsedAt: null,
        replacedBy: null,
        lineage: id,
        scopes: ['pets:read'],
      },
      hashSecret('ps_live_abcd'),
    )
    await storage.close()
    const result = await run(['keys', 'list'], { DATABASE_URL: `sqlite://${other}/petstore.db` }, other)
    assert.equal(result.code, 0, result.stderr)
    const lines = result.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 2, result.stdout)
    assert.match(lines[1] ?? '', /two\\nlines\\u001b\[2J/)
  })

  it('refuses a sqlite: URL in a folder that does not exist, naming DATABASE_URL, and creates nothing', async () => {
    const file = path.join(dir, 'petstor', 'petstore.db')
    for (const args of [['migrate'], ['keys', 'list'], ['serve']]) {
      const result = await runCli(args, { DATABASE_URL: `sqlite://${file}`, HOST: '127.0.0.1', PORT: String(await freePort()), METRICS_PORT: 'off' }, dir)
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`)
      assert.equal(
        result.stderr,
        `petstore: invalid configuration: DATABASE_URL names ${file}, in a folder that does not exist: create ${path.dirname(file)} first if the database belongs there (mkdir -p ${path.dirname(file)}), or correct the path\n`,
      )
      assert.equal(fs.existsSync(path.dirname(file)), false)
    }
  })
})

describe('petstore serve, naming the variable of each start-up failure', () => {
  it('names HOST for an address it cannot take or a name that does not resolve, and PORT for a port in use', async () => {
    const dir = trackedTempDir('petstore-cli-errors-')
    const taken = net.createServer().listen(0, '127.0.0.1')
    await new Promise((resolve) => taken.once('listening', resolve))
    const takenPort = String((taken.address() as net.AddressInfo).port)
    try {
      const port = String(await freePort())
      const cases: [Record<string, string>, RegExp][] = [
        [{ HOST: '999.1.1.1', PORT: port }, /^petstore: invalid configuration: HOST must be an IP address \(such as 0\.0\.0\.0, 127\.0\.0\.1 or ::\) or a host name, got "999\.1\.1\.1"\n$/],
        [{ HOST: 'nowhere.invalid', PORT: port }, /^petstore: invalid configuration: HOST names a host that does not resolve, got "nowhere\.invalid" \(\w+\)\n$/],
        // TEST-NET-1 (RFC 5737): no machine has it.
        [{ HOST: '192.0.2.1', PORT: port }, /^petstore: the API listener \(HOST\) cannot listen on 192\.0\.2\.1:\d+: listen EADDRNOTAVAIL/],
        // Waited for as a predecessor's would be (up to the shutdown's budget, here half a second).
        [{ HOST: '127.0.0.1', PORT: takenPort, SHUTDOWN_DRAIN_MS: '0', SHUTDOWN_TIMEOUT_MS: '0' }, new RegExp(`^petstore: the API listener \\(PORT\\) cannot listen on 127\\.0\\.0\\.1:${takenPort}: listen EADDRINUSE`)],
        [{ HOST: '127.0.0.1', PORT: ' 8080' }, /^petstore: invalid configuration: PORT has spaces or other white space around its value: remove them\n$/],
        [{ HOST: '127.0.0.1', PORT: '041291' }, /^petstore: invalid configuration: PORT must be a whole number from 1 to 65535 in plain digits, got "041291"\n$/],
        [{ HOST: '127.0.0.1', PORT: port, DATABASE_POOL_SIZE: '0' }, /^petstore: invalid configuration: DATABASE_POOL_SIZE must be a whole number from 1 to 1000/],
      ]
      for (const [variables, expected] of cases) {
        const result = await runCli(['serve'], { ...variables, METRICS_PORT: 'off', LOG_LEVEL: 'silent' }, dir)
        assert.equal(result.code, 1, `${JSON.stringify(variables)}: ${result.stderr}`)
        assert.match(result.stderr, expected, JSON.stringify(variables))
      }
    } finally {
      taken.close()
    }
  })

  /** What a case runs `petstore serve` with, and what it must say: exactly, or matching. */
  interface StartFailure {
    env: Record<string, string>
    /** Where it runs; the case's own folder unless given. */
    cwd?: string
    /** Run as another user than root, whose permissions would let it write any file. */
    unprivileged?: boolean
    stderr: string | RegExp
    code: number
  }

  const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const postgres = TEST_POSTGRES_URL === undefined || TEST_POSTGRES_URL === '' ? undefined : new URL(TEST_POSTGRES_URL)
  /** The test server's URL with `change` made, and as the messages show it: without its user and password. */
  const postgresUrl = (change: (url: URL) => void) => {
    const url = new URL(postgres?.href ?? '')
    change(url)
    return { url: url.href, shown: url.href.replace(/\/\/[^@/]*@/, '//***@') }
  }

  /** Each case's environment, and files made in its own folder `dir`, → stderr and the exit code. */
  const failures: Record<string, (dir: string) => StartFailure | Promise<StartFailure>> = {
    'a working folder this user cannot write, DATABASE_URL unset': (dir) => {
      const folder = path.join(dir, 'read-only')
      fs.mkdirSync(folder, { mode: 0o555 })
      return {
        env: {},
        cwd: folder,
        unprivileged: true,
        stderr: `petstore: invalid configuration: DATABASE_URL is unset, so the database is ${folder}/data/petstore.db, whose folder cannot be created: EACCES: permission denied, mkdir '${folder}/data'\n`,
        code: 1,
      }
    },
    'a folder as the SQLite file': (dir) => {
      fs.mkdirSync(path.join(dir, 'petstore.db'))
      return {
        env: { DATABASE_URL: `sqlite://${dir}/petstore.db` },
        stderr: `petstore: invalid configuration: DATABASE_URL names ${dir}/petstore.db, which SQLite cannot open (unable to open database file): name a file this user can read and write, or a new one in a folder it can write\n`,
        code: 1,
      }
    },
    'a file that is not a SQLite database': (dir) => {
      fs.writeFileSync(path.join(dir, 'petstore.db'), 'not a database\n'.repeat(512))
      return {
        env: { DATABASE_URL: `sqlite://${dir}/petstore.db` },
        stderr: `petstore: invalid configuration: DATABASE_URL names ${dir}/petstore.db, which is not a SQLite database (file is not a database)\n`,
        code: 1,
      }
    },
    'a damaged SQLite file': async (dir) => {
      const file = path.join(dir, 'petstore.db')
      await runCli(['migrate'], { DATABASE_URL: `sqlite://${file}` }, dir, { rejectOnFailure: true })
      // The end of the first page holds the schema's rows.
      const fd = fs.openSync(file, 'r+')
      fs.writeSync(fd, Buffer.alloc(60, 'x'), 0, 60, 4096 - 60)
      fs.closeSync(fd)
      return {
        env: { DATABASE_URL: `sqlite://${file}` },
        stderr: new RegExp(`^petstore: invalid configuration: DATABASE_URL names ${escaped(file)}, which is damaged \\(malformed database schema .*\\): restore it from a backup\\n$`),
        code: 1,
      }
    },
    'a SQLite database this user cannot write': async (dir) => {
      const folder = path.join(dir, 'data')
      fs.mkdirSync(folder)
      await runCli(['migrate'], { DATABASE_URL: `sqlite://${folder}/petstore.db` }, dir, { rejectOnFailure: true })
      fs.chmodSync(path.join(folder, 'petstore.db'), 0o444)
      fs.chmodSync(folder, 0o555)
      return {
        env: { DATABASE_URL: `sqlite://${folder}/petstore.db` },
        unprivileged: true,
        stderr: `petstore: invalid configuration: DATABASE_URL names ${folder}/petstore.db, which this user cannot write (attempt to write a readonly database): the file and its folder, where SQLite keeps its -wal and -shm files, must be writable\n`,
        code: 1,
      }
    },
    'TRUST_PROXY, an address out of range': () => ({
      env: { TRUST_PROXY: '300.1.1.1' },
      stderr:
        'petstore: invalid configuration: TRUST_PROXY must be true, false, a hop count from 1 to 99, or a list of IP addresses and ranges such as 10.0.0.0/8, separated by commas; "300.1.1.1" is not an IP address\n',
      code: 1,
    }),
    'TRUST_PROXY, a prefix length out of range': () => ({
      env: { TRUST_PROXY: '10.0.0.0/33' },
      stderr:
        'petstore: invalid configuration: TRUST_PROXY must be true, false, a hop count from 1 to 99, or a list of IP addresses and ranges such as 10.0.0.0/8, separated by commas; "10.0.0.0/33" has a prefix length outside 1-32\n',
      code: 1,
    }),
    // TEST-NET-1 (RFC 5737): no machine has it.
    'METRICS_HOST, an address this machine does not have': async () => ({
      env: { METRICS_HOST: '192.0.2.1', METRICS_PORT: String(await freePort()) },
      stderr: /^petstore: the metrics listener \(METRICS_HOST\) cannot listen on 192\.0\.2\.1:\d+: listen EADDRNOTAVAIL/,
      code: 1,
    }),
    'HOST, an address this machine does not have, which the metrics listener takes too': async () => ({
      env: { HOST: '192.0.2.1', METRICS_PORT: String(await freePort()) },
      stderr: /^petstore: the metrics listener \(HOST\) cannot listen on 192\.0\.2\.1:\d+: listen EADDRNOTAVAIL/,
      code: 1,
    }),
    'PUBLIC_BASE_URL with credentials': () => ({
      env: { PUBLIC_BASE_URL: 'https://deploy:hunter2@api.example.com' },
      stderr: 'petstore: invalid configuration: PUBLIC_BASE_URL must not hold credentials (user:password@): every client is sent it, got "https://***@api.example.com"\n',
      code: 1,
    }),
    'GETPET_DEPRECATED_AT after the sunset': () => ({
      env: { GETPET_DEPRECATED_AT: '2031-01-01T00:00:00Z' },
      stderr:
        'petstore: invalid configuration: GETPET_DEPRECATED_AT must not be later than the sunset of getPet, 2030-12-05T00:00:00.000Z (fixed by the specification), got "2031-01-01T00:00:00.000Z"\n',
      code: 1,
    }),
    'PostgreSQL, a wrong password': () => {
      const { url, shown } = postgresUrl((changed) => (changed.password = 'hunter2'))
      return {
        env: { DATABASE_URL: url },
        stderr: new RegExp(`^petstore: invalid configuration: DATABASE_URL names ${escaped(shown)}, whose server refuses the connection: password authentication failed for user "${escaped(decodeURIComponent(postgres?.username ?? ''))}"\\n$`),
        code: 1,
      }
    },
    'PostgreSQL, a database that does not exist': () => {
      const { url, shown } = postgresUrl((changed) => (changed.pathname = '/petstore_no_such_database'))
      return {
        env: { DATABASE_URL: url },
        stderr: new RegExp(`^petstore: invalid configuration: DATABASE_URL names ${escaped(shown)}, whose server refuses the connection: database "petstore_no_such_database" does not exist\\n$`),
        code: 1,
      }
    },
  }

  // Root may write any file, so a case about permissions runs as nobody (setpriv, util-linux).
  const asAnotherUser = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : []

  for (const [name, make] of Object.entries(failures)) {
    const skip = name.startsWith('PostgreSQL') && postgres === undefined ? 'no PostgreSQL server (PETSTORE_TEST_DATABASE_URL)' : false
    it(`names the variable, and the file, of a start-up failure: ${name}`, { skip }, async () => {
      const dir = trackedTempDir('petstore-cli-errors-')
      // Open to the other user of the unprivileged cases.
      fs.chmodSync(dir, 0o755)
      const failure = await make(dir)
      const env = { HOST: '127.0.0.1', PORT: String(await freePort()), METRICS_PORT: 'off', LOG_LEVEL: 'silent', ...failure.env }
      const cwd = failure.cwd ?? dir
      const result =
        failure.unprivileged === true && asAnotherUser.length > 0
          ? await runCommand(asAnotherUser[0] ?? '', [...asAnotherUser.slice(1), process.execPath, BIN, 'serve'], { cwd, env: { PATH: process.env.PATH ?? '', ...env } })
          : await runCli(['serve'], env, cwd)
      if (typeof failure.stderr === 'string') assert.equal(result.stderr, failure.stderr)
      else assert.match(result.stderr, failure.stderr)
      assert.equal(result.code, failure.code, result.stderr)
      assert.doesNotMatch(result.stderr, /hunter2/)
    })
  }
})
