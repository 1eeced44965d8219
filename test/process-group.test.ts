import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { processGroup } from '../scripts/petstore-process.js'

// The cleanups that end a test's process groups at the end of its file (processGroup): the group must end,
// members that outlived their leader too, and a stranger given the leader's pid since must not.

/** A shell leading a process group of its own, running `script`. */
function groupLeader(script: string): ChildProcess {
  const child = spawn('sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] })
  assert.ok(child.pid !== undefined)
  return child
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const LAST_PID = '/proc/sys/kernel/ns_last_pid'
const canChoosePids = process.getuid?.() === 0 && fs.existsSync(LAST_PID) ? false : 'choosing the next pid takes root and Linux'

describe('ending a process group at a cleanup', () => {
  it('ends the group, its members that outlived their leader too', async () => {
    // The leader starts a member in its group and exits; the member prints its pid and lives on.
    const leader = groupLeader('sleep 60 & echo $!; exit 0')
    const group = processGroup(leader.pid ?? 0)
    const [line] = (await once(leader.stdout?.setEncoding('utf8') ?? leader, 'data')) as [string]
    await once(leader, 'exit')
    const member = Number(line.trim())
    assert.ok(alive(member), `the member ${member} is not running`)
    group.kill('SIGKILL')
    for (let waited = 0; alive(member); waited += 10) {
      assert.ok(waited < 5_000, `the member ${member} outlived the kill of its group`)
      await sleep(10)
    }
  })

  it('signals nothing once the group has ended and its leader\'s pid was given to another process', { skip: canChoosePids }, async (t) => {
    const leader = groupLeader('exit 0')
    const pid = leader.pid ?? 0
    const group = processGroup(pid)
    await once(leader, 'exit')
    // Start times count clock ticks (10 ms): a pid is given again only after the pids have wrapped around, so
    // never within the tick its last process started in.
    await sleep(50)
    // The next process is given the ended leader's pid, as a busy machine would after the pids wrap around.
    // Another process of the machine may take it first: tried a few times.
    let stranger: ChildProcess | undefined
    for (let tries = 0; tries < 20 && stranger?.pid !== pid; tries++) {
      stranger?.kill('SIGKILL')
      fs.writeFileSync(LAST_PID, String(pid - 1))
      stranger = groupLeader('sleep 60')
    }
    if (stranger?.pid !== pid) {
      stranger?.kill('SIGKILL')
      return t.skip(`pid ${pid} was taken by another process each time`)
    }
    try {
      group.kill('SIGKILL')
      await sleep(200)
      assert.ok(alive(pid), 'a stranger given the ended leader\'s pid was killed with the group')
      assert.equal(stranger.exitCode, null)
    } finally {
      stranger.kill('SIGKILL')
    }
  })
})
