import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { sqliteDatabaseEnv } from '../helper.js'
import { cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

// `petstore backup FILE`: an online, consistent copy of the SQLite store (issue 14).

after(cleanupProcesses)

async function createKey(env: Record<string, string>, dir: string): Promise<string> {
  const created = await runCli(['keys', 'create', '--name', 'backup', '--json'], env, dir, { rejectOnFailure: true })
  return (JSON.parse(created.stdout) as { key: string }).key
}

describe('petstore backup', () => {
  it('copies, under a steady stream of creates, every pet acknowledged before it began; a server on the copy serves them and takes the keys', { timeout: 120_000 }, async (t) => {
    const dir = trackedTempDir('petstore-backup-')
    const env = sqliteDatabaseEnv(dir)
    const key = await createKey(env, dir)
    const server = await startServer(env, dir)
    t.after(() => stopServer(server))
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }

    // Four writers create pets all along; the id of each 201 is recorded in the order it arrived.
    const acknowledged: string[] = []
    let writing = true
    const writers = Array.from({ length: 4 }, async (_, writer) => {
      for (let n = 0; writing; n++) {
        const response = await fetch(`${server.baseUrl}/v1/pets`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ name: `pet ${writer}-${n}`, categoryId: 1 + writer, status: 'available' }),
        })
        const text = await response.text()
        assert.equal(response.status, 201, text)
        acknowledged.push(/"id":(\d+)/.exec(text)?.[1] ?? '')
      }
    })
    while (acknowledged.length < 300) await new Promise((resolve) => setTimeout(resolve, 20))

    // Named as sqliteDatabaseEnv names a database, so that a server can be started on it as it is.
    const backupFile = path.join(dir, 'copy', 'petstore.db')
    fs.mkdirSync(path.dirname(backupFile))
    // Every 201 received so far came before the backup began (a time stamp would tie within a millisecond).
    const before = acknowledged.slice()
    const backup = await runCli(['backup', backupFile], env, dir, { timeoutMs: 60_000 })
    const createdDuring = acknowledged.length - before.length
    writing = false
    await Promise.all(writers)
    assert.equal(backup.code, 0, backup.stderr)
    assert.match(backup.stdout, /^Backed up the database as of \S+ to .*copy\/petstore\.db \(\d+\.\d MiB\)\.\n$/)
    assert.match(backup.stderr, /Backing up: 100% \(/, 'progress, as plain lines off a terminal')
    assert.ok(createdDuring > 0, 'no create was acknowledged while the backup ran: the test proved nothing')
    assert.deepEqual(fs.readdirSync(path.dirname(backupFile)), ['petstore.db'], 'no partial file left')

    const onCopy = await startServer(sqliteDatabaseEnv(path.dirname(backupFile)), dir)
    t.after(() => stopServer(onCopy))
    const served = new Set<string>()
    for (let url: string | undefined = `${onCopy.baseUrl}/v1/pets?limit=100`; url !== undefined; ) {
      const response = await fetch(url, { headers })
      assert.equal(response.status, 200, 'the key made on the source works on the copy')
      for (const match of (await response.text()).matchAll(/"id":(\d+)/g)) served.add(match[1] ?? '')
      url = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]?.replace(/^http:\/\/[^/]+/, onCopy.baseUrl)
    }
    assert.ok(before.length >= 300)
    assert.deepEqual(
      before.filter((id) => !served.has(id)),
      [],
      'every pet acknowledged before the backup began is in it',
    )
  })

  it('refuses to overwrite a file unless --force, and leaves it untouched', async () => {
    const dir = trackedTempDir('petstore-backup-')
    const env = sqliteDatabaseEnv(dir)
    await createKey(env, dir)
    const target = path.join(dir, 'existing.db')
    fs.writeFileSync(target, 'keep me')
    const refused = await runCli(['backup', target], env, dir)
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /already exists; pass --force to overwrite it/)
    assert.equal(fs.readFileSync(target, 'utf8'), 'keep me')
    const forced = await runCli(['backup', target, '--force'], env, dir)
    assert.equal(forced.code, 0, forced.stderr)
    assert.equal(fs.readFileSync(target).subarray(0, 15).toString(), 'SQLite format 3')
  })

  it('refuses a missing database, a missing file argument, and the database itself as the target', async () => {
    const dir = trackedTempDir('petstore-backup-')
    const env = sqliteDatabaseEnv(dir)
    const missing = await runCli(['backup', path.join(dir, 'b.db')], env, dir)
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /no SQLite database at/)
    assert.equal(fs.existsSync(path.join(dir, 'petstore.db')), false, 'nothing created')
    const noFile = await runCli(['backup'], env, dir)
    assert.equal(noFile.code, 2)
    await createKey(env, dir)
    const itself = await runCli(['backup', path.join(dir, 'petstore.db'), '--force'], env, dir)
    assert.equal(itself.code, 2)
    assert.match(itself.stderr, /must not be the database itself/)
  })

  it('on PostgreSQL says to use pg_dump, and exits 2', async () => {
    const dir = trackedTempDir('petstore-backup-')
    const result = await runCli(['backup', path.join(dir, 'b.db')], { DATABASE_URL: 'postgres://petstore@127.0.0.1:1/petstore' }, dir)
    assert.equal(result.code, 2)
    assert.match(result.stderr, /on PostgreSQL use pg_dump/)
    assert.equal(fs.existsSync(path.join(dir, 'b.db')), false)
  })
})
