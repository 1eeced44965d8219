import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { freePort } from './processes.js'

/** Why Redis tests cannot run here, or undefined when `redis-server` is installed. */
export const REDIS_MISSING =
  spawnSync('redis-server', ['--version']).status === 0
    ? undefined
    : 'redis-server is not installed (apt-get install redis-server); the Redis tests are skipped'

export interface RedisServer {
  url: string
  stop(): Promise<void>
}

/** A throwaway Redis on a free port of 127.0.0.1, without persistence. */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort()
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  )
  const url = `redis://127.0.0.1:${port}`
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on('error', () => {})
  for (let i = 0; i < 100; i++) {
    try {
      await probe.connect()
      await probe.ping()
      break
    } catch {
      await sleep(50)
    }
  }
  probe.disconnect()
  return {
    url,
    async stop() {
      if (child.exitCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    },
  }
}
