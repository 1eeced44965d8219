import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { cleanupProcesses, runCommand, trackedTempDir, until } from './processes.js'

/*
 * test/linger-guard.ts, as test/run.ts loads it: a test file whose process something holds open after its
 * tests fails once the guard's time is up, with every result reported and its processes killed; a file
 * that holds nothing ends at once.
 */
const GUARD = path.join(import.meta.dirname, 'linger-guard.ts')
const TESTS = 60

/** A test file of TESTS passing tests; with `linger`, its last one leaves a timer and a `sleep` process behind. */
function testFile(dir: string, linger: boolean): string {
  const file = path.join(dir, `${linger ? 'lingering' : 'clean'}.test.mjs`)
  const leak = linger
    ? `setInterval(() => {}, 1000); const sleep = spawn('sleep', ['600']); writeFileSync(${JSON.stringify(path.join(dir, 'pid'))}, String(sleep.pid))`
    : ''
  fs.writeFileSync(
    file,
    `import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { test } from 'node:test'
for (let i = 1; i < ${TESTS}; i++) test('test ' + i, () => {})
test('test ${TESTS}', () => { ${leak} })
`,
  )
  return file
}

/** Runs `file` as test/run.ts runs a file, guarded, with the guard's time set to `lingerMs`. */
function runGuarded(file: string, lingerMs: number) {
  const env: NodeJS.ProcessEnv = { ...process.env, PETSTORE_TEST_LINGER_MS: String(lingerMs) }
  // This file runs under node --test itself: without this, the inner run would take itself for a file of the outer.
  delete env.NODE_TEST_CONTEXT
  return runCommand(process.execPath, ['--import', 'tsx', '--import', GUARD, '--test', '--test-reporter=tap', file], {
    cwd: process.cwd(),
    env,
    timeoutMs: 60_000,
  })
}

/** Whether `pid` runs: exists and is not a zombie (killed, not yet reaped by whoever inherited it). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

describe('a test file whose process outlives its tests', { skip: !fs.existsSync('/proc/self/task') && 'no /proc to find child processes in' }, () => {
  after(cleanupProcesses)

  it("fails once the guard's time is up, with every result reported, naming what held it, its processes killed", async () => {
    const dir = trackedTempDir('linger-')
    const run = await runGuarded(testFile(dir, true), 2_000)
    assert.notEqual(run.code, 0, run.stdout)
    assert.equal(run.stdout.match(/^ok \d+ - test \d+$/gm)?.length, TESTS, run.stdout)
    assert.match(run.stdout, /still held open by [^\n]*Timeout/)
    const pid = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8'))
    assert.match(run.stdout, new RegExp(`killing the processes it started, [^\\n]*\\b${pid}\\b`))
    await until(() => !running(pid), 5_000, () => `sleep, pid ${pid}, was left running`)
  })

  it("a file that holds nothing ends with its tests, long before the guard's time", async () => {
    const dir = trackedTempDir('linger-')
    const run = await runGuarded(testFile(dir, false), 10 * 60_000)
    assert.equal(run.code, 0, run.stdout + run.stderr)
    assert.equal(run.stdout.match(/^ok \d+ - test \d+$/gm)?.length, TESTS, run.stdout)
  })
})
