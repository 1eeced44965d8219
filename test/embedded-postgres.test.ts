import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { linkTree } from '../scripts/embedded-postgres.js'
import { ROOT } from './helper.js'
import { cleanupProcesses, runCommand, trackedTempDir } from './processes.js'

// The throwaway PostgreSQL of `npm run test:unit` (scripts/embedded-postgres.ts) in a checkout that
// other users cannot enter, where a newcomer who clones as root into their home folder meets it first.

after(cleanupProcesses)

describe('the embedded PostgreSQL server', () => {
  it(
    'starts, answers and is removed, with its programs inside a folder of mode 700, as root',
    { skip: process.getuid?.() === 0 && os.platform() === 'linux' ? false : 'the server runs as another user only when root starts it (Linux)', timeout: 120_000 },
    async () => {
      // A checkout of its own: the module and the packages it runs, under a folder only root may enter.
      const closed = trackedTempDir('petstore-closed-')
      fs.chmodSync(closed, 0o700)
      const checkout = path.join(closed, 'petstore')
      fs.mkdirSync(path.join(checkout, 'scripts'), { recursive: true })
      for (const file of ['embedded-postgres.ts', 'petstore-process.ts']) {
        fs.copyFileSync(path.join(ROOT, 'scripts', file), path.join(checkout, 'scripts', file))
      }
      const modules = path.join(checkout, 'node_modules')
      for (const name of ['embedded-postgres', `@embedded-postgres/${os.platform()}-${os.arch()}`]) linkTree(path.join(ROOT, 'node_modules', name), path.join(modules, name))
      for (const name of ['pg', 'async-exit-hook']) fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(modules, name))

      // Which folders of linked programs appear while it runs, and which remain after destroy().
      const script = [
        `import { startEmbeddedPostgres } from ${JSON.stringify(path.join(checkout, 'scripts', 'embedded-postgres.ts'))}`,
        "import fs from 'node:fs'",
        "import os from 'node:os'",
        "import pg from 'pg'",
        "const programs = () => fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith('petstore-pg-programs-'))",
        'const before = programs()',
        'const server = await startEmbeddedPostgres()',
        'const linked = programs().filter((name) => !before.includes(name))',
        'const client = new pg.Client({ connectionString: server.url })',
        'await client.connect()',
        "const { rows } = await client.query('SELECT 1 + 1 AS two')",
        'await client.end()',
        'await server.destroy()',
        'const left = linked.filter((name) => programs().includes(name))',
        'console.log(JSON.stringify({ two: rows[0].two, linked: linked.length, left: left.length }))',
      ].join('\n')
      const run = await runCommand(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '' },
        timeoutMs: 110_000,
      })
      assert.equal(run.code, 0, run.stderr)
      assert.deepEqual(JSON.parse(run.stdout), { two: 2, linked: 1, left: 0 })
    },
  )
})
