import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, describe, it } from 'node:test'
import { burst } from '../../scripts/burst-client.js'
import { createTestDatabase } from '../helper.js'
import { cleanupProcesses, runCli, startServer, stopServer, trackedTempDir } from '../processes.js'

// A burst of new connections, each sending requests back to back: Node accepts one connection per
// listening socket and turn of its event loop, so a single listener under load would leave most of
// them in the kernel's queue for longer than any client waits (src/process/acceptors.ts).

after(cleanupProcesses)

const CONNECTIONS = 2_000
const LOAD_MS = 3_000
const ANSWER_WITHIN_MS = 10_000

/** The sockets listening on 127.0.0.1:`port`, from the kernel's table. */
function listeningSockets(port: number): number {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`
  return fs
    .readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .filter((line) => {
      const fields = line.trim().split(/\s+/)
      return fields[1] === local && fields[3] === '0A'
    }).length
}

for (const [shape, args, sockets] of [
  ['one process', [], 16],
  ['--workers 2', ['--workers', '2'], 1],
] as const) {
  describe(`a burst of ${CONNECTIONS} new connections (${shape})`, { timeout: 120_000 }, () => {
    it(`answers every connection within ${ANSWER_WITHIN_MS / 1000} s, 200, 503 or 408, and the next request at once`, async (t) => {
      const dir = trackedTempDir('petstore-burst-')
      const database = await createTestDatabase('sqlite', dir)
      t.after(database.drop)
      const env = { ...database.env, RATE_LIMIT_PER_KEY: '0' }
      const key = (JSON.parse((await runCli(['keys', 'create', '--name', 'burst', '--json'], env, dir, { rejectOnFailure: true })).stdout) as { key: string }).key
      const server = await startServer(env, dir, [...args])
      try {
        // The primary of --workers accepts for its workers on its one socket; a process alone adds its own.
        assert.equal(listeningSockets(server.port), sockets)
        const request = `GET /v1/pets?limit=20 HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\n\r\n`
        const connections = await burst(server.port, request, CONNECTIONS, performance.now() + LOAD_MS, ANSWER_WITHIN_MS)
        const waits = connections.map((c) => (c.firstAnswerAt === undefined ? Infinity : c.firstAnswerAt - c.openedAt)).sort((a, b) => a - b)
        const statuses = new Set(connections.map((c) => c.firstStatus))
        t.diagnostic(
          `first answers: median ${Math.round(waits[CONNECTIONS / 2] ?? NaN)} ms, slowest ${Math.round(waits.at(-1) ?? NaN)} ms; ` +
            `statuses ${[...statuses].join(' ')}; ${connections.reduce((sum, c) => sum + c.answers, 0)} answers`,
        )
        const unanswered = connections.filter((c) => c.firstAnswerAt === undefined || c.firstAnswerAt - c.openedAt > ANSWER_WITHIN_MS)
        const reasons = new Map<string, number>()
        for (const c of unanswered) reasons.set(c.error ?? 'no answer', (reasons.get(c.error ?? 'no answer') ?? 0) + 1)
        assert.equal(unanswered.length, 0, `unanswered: ${JSON.stringify(Object.fromEntries(reasons))}`)
        // 408: a request the process could not read within HEADERS_TIMEOUT_MS of accepting it, on a machine this busy.
        assert.ok([...statuses].every((status) => status === 200 || status === 503 || status === 408), `first statuses ${[...statuses].join(' ')}`)
        // Once the burst has gone, a new connection is accepted and answered as at rest.
        const started = performance.now()
        const response = await fetch(`${server.baseUrl}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5_000) })
        assert.equal(response.status, 200)
        t.diagnostic(`the first request after the burst: ${Math.round(performance.now() - started)} ms`)
      } finally {
        assert.deepEqual(await stopServer(server, 'SIGTERM', 20_000), { code: 0, signal: null }, server.output())
      }
    })
  })
}
