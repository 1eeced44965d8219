import assert from 'node:assert/strict'
import fs from 'node:fs'
import net from 'node:net'
import { describe, it } from 'node:test'
import { freePort } from '../scripts/petstore-process.js'

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
})
