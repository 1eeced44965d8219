import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { type TestApp, buildTestApp } from '../helper.js'

/** Opens a socket to `port`, writes `chunks` with `gapMs` between them, and reports what came back and when. */
async function slowClient(
  port: number,
  chunks: string[],
  gapMs: number,
): Promise<{ answer: string; closedAfterMs: number }> {
  const started = Date.now()
  const socket = net.connect(port, '127.0.0.1')
  let answer = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => (answer += chunk))
  socket.on('error', () => {})
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - started)))
  for (const chunk of chunks) {
    if (socket.destroyed) break
    socket.write(chunk)
    await sleep(gapMs)
  }
  const closedAfterMs = await Promise.race([closed, sleep(15_000).then(() => -1)])
  socket.destroy()
  return { answer, closedAfterMs }
}

describe('timeouts against slow clients', () => {
  let testApp: TestApp
  let port: number
  let key: string
  before(async () => {
    testApp = await buildTestApp('sqlite', {
      env: { REQUEST_TIMEOUT_MS: '1500', HEADERS_TIMEOUT_MS: '1000', KEEP_ALIVE_TIMEOUT_MS: '1000' },
    })
    key = await testApp.createKey()
    await testApp.app.listen({ port: 0, host: '127.0.0.1' })
    port = (testApp.app.server.address() as net.AddressInfo).port
  })
  after(() => testApp.close())

  it('cuts off a client that trickles its body with 408 in the error shape', async () => {
    const body = '{"name":"slow","categoryId":1}'
    const head =
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    const { answer, closedAfterMs } = await slowClient(port, [head, ...body.split('')], 200)
    assert.match(answer, /^HTTP\/1\.1 408 /)
    assert.match(answer, /"code":"request_timeout"/)
    assert.ok(closedAfterMs > 0 && closedAfterMs < 4_000, `closed after ${closedAfterMs} ms`)
  })

  it('cuts off a client that trickles its headers', async () => {
    const head = 'GET /v1/pets HTTP/1.1\r\nHost: x\r\n'.split('')
    const { answer, closedAfterMs } = await slowClient(port, head, 150)
    assert.match(answer, /^HTTP\/1\.1 408 /)
    assert.ok(closedAfterMs > 0 && closedAfterMs < 4_000, `closed after ${closedAfterMs} ms`)
  })

  it('closes an idle keep-alive connection after KEEP_ALIVE_TIMEOUT_MS', async () => {
    const request = `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`
    const { answer, closedAfterMs } = await slowClient(port, [request], 0)
    assert.match(answer, /^HTTP\/1\.1 200 /)
    assert.match(answer, /keep-alive: timeout=1/i)
    assert.ok(closedAfterMs >= 900 && closedAfterMs < 4_000, `closed after ${closedAfterMs} ms`)
  })

  it('keeps serving other clients while slow ones wait', async () => {
    const slow = slowClient(port, 'GET /v1/pets HTTP/1.1\r\n'.split(''), 100)
    const response = await fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(response.status, 200)
    await slow
  })

  it('sends no framework banner', async () => {
    const response = await fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(response.headers.get('x-powered-by'), null)
    assert.equal(response.headers.get('server'), null)
  })
})
