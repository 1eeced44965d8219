import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import { describe, it } from 'node:test'
import { ROOT, claimPort, freePort } from '../scripts/petstore-process.js'

const range = fs.existsSync('/proc/sys/net/ipv4/ip_local_port_range')
  ? fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
  : undefined

describe('the free ports tests and tools give servers', { skip: range === undefined && 'no ip_local_port_range to compare with' }, () => {
  it("are below the kernel's ephemeral range, where no connect() or listen(0) of another process takes one meanwhile, and can be listened on", async () => {
    const [low = 0] = range ?? []
    for (let i = 0; i < 50; i++) {
      const port = await freePort()
      assert.ok(port >= 1024 && port < low, `port ${port} is not below the ephemeral range, which starts at ${low}`)
      const server = net.createServer()
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen({ port, host: '127.0.0.1', exclusive: true }, resolve))
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('are never given twice, though none is listened on: 1,000 picks, all different', async () => {
    // Picked at random from about 22,000, 1,000 picks repeat one nearly always (the birthday problem).
    const picked = new Set<number>()
    for (let i = 0; i < 1_000; i++) picked.add(await freePort())
    assert.equal(picked.size, 1_000)
  })

  it('are not given to a process while another process that picked it lives, and are once it has ended', { timeout: 30_000 }, async () => {
    // Test files run side by side: one's pick must not be the other's until it is gone.
    const script = `const { freePort } = await import('./scripts/petstore-process.ts'); console.log(await freePort()); process.stdin.resume()`
    const other = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = once(other, 'exit')
    let port: number
    try {
      const [line] = (await once(other.stdout.setEncoding('utf8'), 'data')) as [string]
      port = Number(line.trim())
      assert.ok(Number.isInteger(port) && port > 0, line)
      assert.equal(await claimPort(port), false, `port ${port} was claimed by this process while another had picked it`)
    } finally {
      other.stdin.end()
      await exited
    }
    assert.equal(await claimPort(port), true, `port ${port} stayed claimed after the process that picked it ended`)
  })
})
