import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { BIN, type ProcessGroup, ROOT, processGroup, waitUntilReady } from '../../scripts/petstore-process.js'
import { loadConfig } from '../../src/config.js'
import { type RunningServer, startServer as startInProcess } from '../../src/process/server.js'
import { sqliteDatabaseEnv } from '../helper.js'
import { type ProcessExit, cleanupProcesses, freePort, startServer, trackedTempDir, until, within } from '../processes.js'

// The edges of a process's life, as operators start and stop it (issue 30): supervisors that signal
// the whole process group, npm in between, log readers that die or stop reading, a replacement started
// while its predecessor drains, a main thread that never returns.

after(cleanupProcesses)

/** The process groups `launch` started: nothing of them outlives the test file. */
const groups = new Set<ProcessGroup>()
after(() => {
  for (const group of groups) group.kill('SIGKILL')
})

/** Short, so that a shutdown's bound is quick to check: a drain of 200 ms, 3 s for the requests in flight. */
const SHUTDOWN = { SHUTDOWN_DRAIN_MS: '200', SHUTDOWN_TIMEOUT_MS: '3000' }
/** The most any shutdown here may take: the drain, the timeout, and one second (the issue's bound). */
const BOUND_MS = 200 + 3_000 + 1_000

interface Launched {
  child: ChildProcess
  pid: number
  exited: Promise<ProcessExit>
  output: () => string
  port: number
}

/**
 * `petstore serve` started as `how` in a process group of its own (as a supervisor or a terminal
 * starts it), on a fresh SQLite database, logging at info; resolves once it answers /healthz.
 */
async function launch(
  how: 'node' | 'node --workers 2' | 'npm start' | 'npx petstore serve',
  {
    dir = trackedTempDir('petstore-life-'),
    port,
    env: extra = {},
    ready = true,
  }: { dir?: string; port?: number; env?: Record<string, string>; /** false: returns at once, without waiting for it to serve. */ ready?: boolean } = {},
): Promise<Launched> {
  port ??= await freePort()
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: String(port),
    METRICS_PORT: 'off',
    LOG_LEVEL: 'info',
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    DATABASE_URL: `sqlite://${path.join(dir, 'petstore.db')}`,
    ...SHUTDOWN,
    ...extra,
  }
  const [command, args] =
    how === 'npm start'
      ? ['npm', ['start']]
      : how === 'npx petstore serve'
        ? ['npx', ['petstore', 'serve']]
        : [process.execPath, [BIN, 'serve', ...(how === 'node' ? [] : ['--workers', '2'])]]
  const child = spawn(command, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk))
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  const pid = child.pid
  // A pid of 0 would signal this test's own process group.
  if (pid === undefined) throw new Error(`${how} could not be started`)
  groups.add(processGroup(pid))
  if (ready) await waitUntilReady({ name: how, child, pid, exited, output: () => output }, `http://127.0.0.1:${port}/healthz`, { timeoutMs: 30_000 })
  return { child, pid, exited, output: () => output, port }
}

/** Resolves once nothing answers on `port` any more; fails after `ms`. */
async function released(port: number, ms: number, what: () => string): Promise<number> {
  const started = performance.now()
  for (;;) {
    const answered = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
      () => true,
      () => false,
    )
    const took = performance.now() - started
    if (!answered) return took
    if (took > ms) assert.fail(`still serving ${Math.round(took)} ms after the signal:\n${what()}`)
    await sleep(50)
  }
}

/** The JSON log lines of `output`, whatever else (npm's banner) is there too. */
function logLines(output: string): { msg?: string; signal?: string; time?: number }[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string })
}

/**
 * Resolves once every process of `server` listens. Ready means one worker listens, and a worker still starting
 * has no handler yet: a signal sent to the group then ends it, which is the case of its own test.
 */
async function allListening(server: Launched, how: string): Promise<void> {
  const listening = () =>
    logLines(server.output()).filter((line) => typeof line.msg === 'string' && line.msg.startsWith(`Server listening at http://127.0.0.1:${server.port}`)).length
  await until(() => listening() >= (how === 'node --workers 2' ? 2 : 1), 30_000, () => `not every worker listened:\n${server.output()}`)
}

describe('signals as supervisors send them', { concurrency: 3 }, () => {
  // To the process alone: kill, systemd's KillMode=mixed, `docker stop` to a container's PID 1.
  // To the whole group: systemd's default KillMode=control-group, `timeout`, a process manager; SIGINT
  // to the group is Ctrl-C in a terminal.
  const stops = [
    ['SIGTERM to the process', 'SIGTERM', false],
    ['SIGTERM to its process group', 'SIGTERM', true],
    ['SIGINT to its process group (Ctrl-C)', 'SIGINT', true],
    // Stop signals that close-with-grace answered without a drain, and a `--workers` primary died of at once.
    ['SIGQUIT to the process', 'SIGQUIT', false],
    ['SIGUSR2 to its process group', 'SIGUSR2', true],
  ] as const
  for (const how of ['node', 'node --workers 2', 'npm start', 'npx petstore serve'] as const) {
    for (const [stop, signal, group] of stops) {
      it(`${how}, stopped by ${stop}: drains as for one signal and exits within its bound`, { timeout: 60_000 }, async () => {
        const server = await launch(how)
        if (how === 'node --workers 2') await allListening(server, how)
        let ended: ProcessExit | undefined
        void server.exited.then((exit) => (ended = exit))
        process.kill(group ? -server.pid : server.pid, signal)
        const [first, last] = how === 'node --workers 2' ? ['shutting down workers', 'all workers stopped'] : ['shutting down', 'shut down cleanly']
        const line = (msg: string) => logLines(server.output()).find((line) => line.msg === msg)
        // npm may exit before the server it started: the server's own last line says when it is done. The
        // wait is longer than the bound, so that a stop past it shows how it ended (a SIGKILL by the
        // deadline's watchdog loses the log lines still buffered), and a busy machine's late polls are not
        // counted: the bound is judged by the server's own clock, from its first line of the stop to its last.
        await until(
          () => line(last) !== undefined,
          BOUND_MS + 10_000,
          () => `no "${last}"; ${ended === undefined ? 'still running' : `exited ${JSON.stringify(ended)}`}:\n${server.output()}`,
          20,
        )
        const took = (line(last)?.time ?? 0) - (line(first)?.time ?? Number.NaN)
        assert.ok(took <= BOUND_MS, `"${first}" to "${last}" took ${took} ms, past ${BOUND_MS}:\n${server.output()}`)
        await released(server.port, BOUND_MS, server.output)
        const exit = await within(server.exited, BOUND_MS, () => `${how} did not exit:\n${server.output()}`)
        const messages = logLines(server.output()).map((line) => line.msg ?? '')
        assert.ok(!messages.some((message) => /second|killed by timeout|did not stop in time/.test(message)), server.output())
        // npm's own exit code says how npm ended, not the server; the server's lines say that.
        if (how.startsWith('node')) {
          assert.deepEqual(exit, { code: 0, signal: null }, server.output())
          // npm may end of the signal and the server stop on its own SIGTERM (stopWithNpm); node got this one.
          assert.equal(line(first)?.signal, signal, server.output())
        }
      })
    }
  }
})

describe('npm dying of a signal it does not pass on', () => {
  // npm passes SIGTERM and SIGINT on to its shell; a SIGHUP or SIGKILL to npm alone (ExecReload with npm as
  // the main process, an OOM killer) ends npm and leaves its shell, the server's parent, alive.
  for (const signal of ['SIGHUP', 'SIGKILL'] as const) {
    it(`stops the server npm start started when npm alone dies of ${signal}, instead of leaving it serving, orphaned`, { timeout: 60_000 }, async () => {
      const server = await launch('npm start')
      const started = performance.now()
      process.kill(server.pid, signal)
      await within(server.exited, BOUND_MS, () => `npm did not die of ${signal}`)
      while (!logLines(server.output()).some((line) => line.msg === 'shut down cleanly')) {
        // npm's exit is noticed within half a second, then the server drains as on SIGTERM.
        assert.ok(performance.now() - started < BOUND_MS + 500, `no "shut down cleanly":\n${server.output()}`)
        await sleep(20)
      }
      assert.ok(logLines(server.output()).some((line) => line.msg === 'npm, which started this server, has exited'), server.output())
      await released(server.port, BOUND_MS, server.output)
    })
  }
})

describe('SIGHUP', () => {
  for (const how of ['node', 'node --workers 2'] as const) {
    for (const to of ['process', 'process group'] as const) {
      it(`never stops a plain-HTTP server (${how}, sent to the ${to}): there is nothing to reload, and it says so once`, { timeout: 60_000 }, async () => {
        const server = await launch(how)
        await allListening(server, how)
        // A terminal that closes sends it to the group: the workers leave it to their primary.
        process.kill(to === 'process' ? server.pid : -server.pid, 'SIGHUP')
        const said = () => logLines(server.output()).filter((line) => line.msg === 'SIGHUP: no TLS certificate to reload; still serving')
        await until(() => said().length > 0, 10_000, () => `nothing said of the SIGHUP:\n${server.output()}`)
        const response = await fetch(`http://127.0.0.1:${server.port}/healthz`)
        assert.equal(response.status, 200)
        process.kill(server.pid, 'SIGTERM')
        assert.deepEqual(await server.exited, { code: 0, signal: null }, server.output())
        // Counted once every process has ended, so that a line said late by another is counted too.
        assert.equal(said().length, 1, server.output())
        assert.ok(!logLines(server.output()).some((line) => line.msg === 'worker exited' && line.signal === 'SIGHUP'), server.output())
      })
    }
  }

  it('never stops --workers 2 when it reaches the group while the workers start: a worker it ends is replaced', { timeout: 60_000 }, async () => {
    // A worker still loading Node has no handler yet, and SIGHUP ends it; the primary starts another.
    const server = await launch('node --workers 2', { ready: false })
    await until(() => server.output().includes('starting workers'), 30_000, () => server.output())
    process.kill(-server.pid, 'SIGHUP')
    const lines = () => logLines(server.output())
    await until(
      () => lines().filter((line) => typeof line.msg === 'string' && line.msg.startsWith(`Server listening at http://127.0.0.1:${server.port}`)).length >= 2,
      30_000,
      () => `not both workers listened:\n${server.output()}`,
    )
    assert.ok(
      lines().some((line) => line.msg === 'worker exited' && line.signal === 'SIGHUP'),
      `no worker was still starting when SIGHUP came: the test proved nothing\n${server.output()}`,
    )
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status, 200)
    process.kill(server.pid, 'SIGTERM')
    assert.deepEqual(await server.exited, { code: 0, signal: null }, server.output())
  })
})

describe('a log reader that dies or stops reading', () => {
  // `petstore serve | head -2`, or `| logger` stopped with the group: the reader is gone once the
  // server has said it is shutting down, and lines still come (here a second signal, as the group's).
  for (const signals of [1, 2]) {
    it(`never keeps a shutdown from ending: the reader gone after "shutting down", ${signals} SIGTERM`, { timeout: 60_000 }, async () => {
      const server = await launch('node')
      process.kill(server.pid, 'SIGTERM')
      for (let waited = 0; !server.output().includes('"shutting down"'); waited += 10) {
        assert.ok(waited < 5_000, server.output())
        await sleep(10)
      }
      server.child.stdout?.destroy()
      if (signals === 2) process.kill(server.pid, 'SIGTERM')
      const exit = await within(server.exited, BOUND_MS, () => `did not exit with its log reader gone:\n${server.output()}`)
      assert.deepEqual(exit, { code: 0, signal: null })
    })
  }

  it('ends the process by the deadline when a reader that stopped reading blocks the last write', { timeout: 60_000 }, async () => {
    // stdout is a pipe nobody reads any more: the lines of a few hundred requests fill it, and a write
    // to it would block for ever (a child's stdout is a blocking pipe until Node makes it non-blocking).
    const server = await launch('node')
    server.child.stdout?.pause()
    server.child.stdout?.removeAllListeners('data')
    for (let i = 0; i < 1_500; i++) await fetch(`http://127.0.0.1:${server.port}/v1/pets`).then((response) => response.arrayBuffer())
    const started = performance.now()
    process.kill(server.pid, 'SIGTERM')
    const exit = await within(server.exited, BOUND_MS, () => 'did not exit with its stdout full')
    assert.ok(performance.now() - started < BOUND_MS)
    assert.deepEqual(exit, { code: 0, signal: null })
  })
})

/** Whether a process started from here may write a core file (a fault signal's default), of the service's size, in the checkout. */
const coresWritten = () => !/^Max core file size\s+0\s/m.test(fs.readFileSync('/proc/self/limits', 'utf8'))

describe('a signal of a fault', { skip: coresWritten() && 'core dumps are on (ulimit -c): one would be written into the checkout' }, () => {
  for (const signal of ['SIGABRT', 'SIGSEGV'] as const) {
    it(`${signal} sent with kill ends the process by the signal, as a supervisor must see a fault, instead of a clean exit`, { timeout: 60_000 }, async () => {
      const server = await launch('node')
      process.kill(server.pid, signal)
      const exit = await within(server.exited, BOUND_MS, () => `still running after ${signal}:\n${server.output()}`)
      assert.deepEqual(exit, { code: null, signal }, server.output())
      assert.ok(!logLines(server.output()).some((line) => line.msg === 'shut down cleanly'), server.output())
    })
  }
})

describe('the exit deadline', () => {
  it('holds when the main thread is blocked during the shutdown', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-life-busy-')
    // A request handler stuck in a loop stands for any synchronous call that never returns.
    const hang = "data:text/javascript,process.once('SIGTERM',()=>setTimeout(()=>{for(;;);},100))"
    const server = await startServer({ LOG_LEVEL: 'info', ...SHUTDOWN }, dir, [], { nodeArgs: ['--import', hang] })
    const started = performance.now()
    server.child.kill('SIGTERM')
    const exit = await within(server.exited, BOUND_MS, () => `still running with its main thread blocked:\n${server.output()}`)
    assert.equal(exit.signal, 'SIGKILL')
    assert.ok(performance.now() - started < BOUND_MS)
  })
})

describe('a replacement started while its predecessor drains', () => {
  it('waits for the API and metrics ports, then serves; both exit 0', { timeout: 60_000 }, async () => {
    const dir = trackedTempDir('petstore-life-handover-')
    const [port, metricsPort] = [await freePort(), await freePort()]
    // A drain of 8 s: the replacement starts while its predecessor still holds both ports, even on a machine
    // so busy that starting Node takes seconds (with 2 s, the predecessor was gone before the replacement
    // tried to listen, at a load average of 12-20, and the test proved nothing).
    const drainMs = 8_000
    const options = { dir, port, env: { METRICS_PORT: String(metricsPort), SHUTDOWN_DRAIN_MS: String(drainMs) } }
    const first = await launch('node', options)
    process.kill(first.pid, 'SIGTERM')
    const second = await launch('node', options)
    assert.deepEqual(await first.exited, { code: 0, signal: null }, first.output())
    // The first answered /healthz while it drained: the second's own line says when it listens.
    for (let waited = 0; !second.output().includes('Server listening'); waited += 20) {
      assert.ok(waited < 10_000, second.output())
      await sleep(20)
    }
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200)
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status, 200)
    assert.ok(
      logLines(second.output()).some(
        (line) => line.msg === `PORT ${port} is in use: waiting up to ${drainMs + 3_000 + 500} ms for it, as for a previous instance shutting down`,
      ),
      second.output(),
    )
    process.kill(second.pid, 'SIGTERM')
    assert.deepEqual(await second.exited, { code: 0, signal: null }, second.output())
  })
})

describe('a stop that comes as the port starts listening', () => {
  // Where stop signals start draining (src/cli/serve.cli.ts): the rest of the start takes turns of the event loop
  // of its own, in which connections are answered. With a host name it looks up its addresses, once for Fastify's
  // other addresses and once per extra acceptor; in process, so that the test sees the turns themselves.
  for (const host of ['127.0.0.1', 'localhost']) {
    it(`is handed the server in the turn the port listens; a close begun then waits for the rest of the start and releases the port, every acceptor too (HOST=${host})`, { timeout: 30_000 }, async () => {
      const port = await freePort()
      const config = loadConfig({ ...sqliteDatabaseEnv(trackedTempDir('petstore-life-listening-')), HOST: host, PORT: String(port), METRICS_PORT: 'off', SHUTDOWN_DRAIN_MS: '0' })
      let handed: { server: RunningServer; listening: boolean; started: boolean } | undefined
      let closing: Promise<void> | undefined
      let started = false
      const server = await startInProcess(config, pino({ level: 'silent' }), {
        listening: (running) => {
          assert.equal(handed, undefined, 'handed the server twice')
          handed = { server: running, listening: running.app.server.listening, started }
          closing = running.close()
        },
      })
      started = true
      await closing
      assert.deepEqual(handed && { ...handed, server: handed.server === server }, { server: true, listening: true, started: false })
      // Nothing listens on the port any more: not the server, not an acceptor opened as the stop began.
      const probe = net.createServer()
      await new Promise<void>((resolve, reject) => probe.once('error', reject).listen({ port, host: '127.0.0.1', exclusive: true }, resolve))
      probe.close()
    })
  }
})
