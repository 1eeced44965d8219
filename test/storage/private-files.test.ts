import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { BIN } from '../helper.js'
import { type CommandRun, cleanupProcesses, runCommand, startServer, stopServer, trackedTempDir } from '../processes.js'

// The SQLite files hold key hashes, pets and stored answers: private to the service's user whatever the
// umask it starts under, and a database other users could have replaced is refused (issue 39).

after(cleanupProcesses)

/** Node's flags that set the process's umask before anything of petstore runs. */
const withUmask = (umask: string): string[] => ['--import', `data:text/javascript,process.umask(0o${umask})`]

function petstore(umask: string, args: string[], dir: string): Promise<CommandRun> {
  return runCommand(process.execPath, [...withUmask(umask), BIN, ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '' } })
}

const modeOf = (file: string): string => (fs.statSync(file).mode & 0o777).toString(8)

/** Creates a key in the default database, ./data/petstore.db under `dir`, and returns it. */
async function createKey(umask: string, dir: string): Promise<string> {
  const created = await petstore(umask, ['keys', 'create', '--name', 'private', '--json'], dir)
  assert.equal(created.code, 0, created.stderr)
  return (JSON.parse(created.stdout) as { key: string }).key
}

/** Starts a server on the default database, creates a pet (so that the -wal and -shm exist) and checks every mode. */
async function assertServedPrivately(umask: string, dir: string, key: string): Promise<void> {
  const data = path.join(dir, 'data')
  const server = await startServer({}, dir, [], { nodeArgs: withUmask(umask) })
  try {
    const created = await fetch(`${server.baseUrl}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"name":"Rex","categoryId":1}',
    })
    assert.equal(created.status, 201, await created.text())
    assert.equal(modeOf(data), '700', 'the data folder')
    for (const name of ['petstore.db', 'petstore.db-wal', 'petstore.db-shm']) assert.equal(modeOf(path.join(data, name)), '600', name)
  } finally {
    await stopServer(server)
  }
  const backup = path.join(dir, 'backup.db')
  const backedUp = await petstore(umask, ['backup', backup], dir)
  assert.equal(backedUp.code, 0, backedUp.stderr)
  assert.equal(modeOf(backup), '600', 'the backup')
}

describe('the SQLite files', () => {
  for (const umask of ['000', '022']) {
    it(`under umask ${umask}, a new database: the data folder is 0700, the database, its -wal and -shm, and a backup 0600`, { timeout: 60_000 }, async () => {
      const dir = trackedTempDir('petstore-private-')
      const key = await createKey(umask, dir)
      await assertServedPrivately(umask, dir, key)
    })

    it(`under umask ${umask}, an existing database made readable by others (as before) is made private at start`, { timeout: 60_000 }, async () => {
      const dir = trackedTempDir('petstore-private-')
      const key = await createKey(umask, dir)
      fs.chmodSync(path.join(dir, 'data'), 0o755)
      fs.chmodSync(path.join(dir, 'data', 'petstore.db'), 0o644)
      await assertServedPrivately(umask, dir, key)
    })
  }

  it('refuses a data folder writable by every user, in one line naming the folder and the fix', { timeout: 30_000 }, async () => {
    const dir = trackedTempDir('petstore-private-')
    await createKey('022', dir)
    const data = path.join(dir, 'data')
    fs.chmodSync(data, 0o777)
    const refused = await petstore('000', ['serve'], dir)
    assert.equal(refused.code, 1, refused.stderr)
    const lines = refused.stderr.trim().split('\n')
    assert.equal(lines.length, 1, refused.stderr)
    assert.match(lines[0] ?? '', new RegExp(`${data} is writable by every user \\(mode 0777\\).*chmod 700 ${data}`))
    assert.equal(modeOf(data), '777', 'a refused folder is left as it was')
  })

  it('refuses a database file writable by every user, naming the file and the fix', { timeout: 30_000 }, async () => {
    const dir = trackedTempDir('petstore-private-')
    await createKey('022', dir)
    const file = path.join(dir, 'data', 'petstore.db')
    fs.chmodSync(file, 0o666)
    const refused = await petstore('022', ['migrate'], dir)
    assert.equal(refused.code, 1, refused.stderr)
    assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr)
    assert.match(refused.stderr, new RegExp(`${file} is writable by every user \\(mode 0666\\).*chmod 600 ${file}`))
  })
})
