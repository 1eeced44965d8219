// wrk as the benchmark's load generator: the Lua script that sends a scenario's requests (the same as
// load.ts sends through autocannon), its arguments, and its text output read into a LoadResult. The
// orchestrator (rounds.ts) spawns wrk itself, a process of its own, so no Node start-up precedes a round.
import type { LoadOptions, LoadResult } from './load.js'
import { SCENARIOS } from './scenarios.js'

/** A Lua string literal. */
const lua = (text: string) => JSON.stringify(text)

/** wrk's script for a scenario: the same requests as autocannon's, built in Lua. */
export function wrkScript(options: LoadOptions, ids: readonly string[]): string {
  const lines = [`wrk.headers["Authorization"] = ${lua(`Bearer ${options.key}`)}`]
  if (options.scenario === 'getOne') {
    // The same stride walk over every seeded id as the autocannon run.
    lines.push(
      `local ids = { ${ids.map(lua).join(', ')} }`,
      `local stride = (#ids % 7919 == 0) and 1 or 7919`,
      'local index = 0',
      'request = function()',
      '  index = (index + stride) % #ids',
      '  return wrk.format("GET", "/v1/pets/" .. ids[index + 1])',
      'end',
    )
  } else if (options.scenario === 'create') {
    const statuses = ['"available"', '"pending"', '"sold"']
    lines.push(
      'wrk.method = "POST"',
      'wrk.headers["Content-Type"] = "application/json"',
      `local prefix = ${lua(options.namePrefix)}`,
      `local statuses = { ${statuses.map((status) => lua(`,"status":${status}`)).join(', ')}, "" }`,
      'local n = 0',
      'request = function()',
      '  n = n + 1',
      '  local body = string.format(\'{"name":"%s-%d","categoryId":%d%s}\', prefix, n, 1 + (n * 7) % 50, statuses[n % 4 + 1])',
      '  return wrk.format(nil, nil, nil, body)',
      'end',
    )
  }
  return lines.join('\n') + '\n'
}

/** wrk's arguments for one run with the script at `scriptPath`. */
export function wrkArgs(options: LoadOptions, scriptPath: string): string[] {
  const route = SCENARIOS.find((candidate) => candidate.id === options.scenario)?.path
  if (route === undefined) throw new Error(`wrk: unknown scenario "${options.scenario}"`)
  const url = options.baseUrl + (options.scenario === 'getOne' ? '/v1/pets' : route)
  // One thread: the machine's other core is the server's.
  return ['-t1', `-c${options.connections}`, `-d${options.durationS}s`, '--timeout', '10s', '--latency', '-s', scriptPath, url]
}

/** `4.10ms`, `950.00us`, `1.02s`, `2.00m` → milliseconds. */
function wrkDuration(text: string | undefined): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text ?? '')
  if (match === null) return Number.NaN
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm']
  return Math.round(Number(match[1]) * scale * 100) / 100
}

/** wrk's output (stdout and stderr) and exit code → the run's result. */
export function parseWrk(code: number | null, output: string): LoadResult {
  const total = /(\d+) requests in ([\d.]+)(\w+)/.exec(output)
  if (code !== 0 || total === null) throw new Error(`wrk failed (exit ${code}):\n${output}`)
  const requests = Number(total[1])
  const durationS = wrkDuration(`${total[2]}${total[3]}`) / 1000
  const latency = /Latency\s+(\S+)\s+(\S+)\s+(\S+)/.exec(output)
  const percentile = (p: number) => wrkDuration(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(output)?.[1])
  const sockets = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output)
  const timeouts = Number(sockets?.[4] ?? 0)
  const errors = Number(sockets?.[1] ?? 0) + Number(sockets?.[2] ?? 0) + Number(sockets?.[3] ?? 0) + timeouts
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0)
  return {
    durationS,
    requests,
    requestsPerSecond: Math.round((requests / durationS) * 10) / 10,
    latencyMs: {
      mean: wrkDuration(latency?.[1]),
      p50: percentile(50),
      p90: percentile(90),
      p99: percentile(99),
      max: wrkDuration(latency?.[3]),
    },
    non2xx,
    errors,
    timeouts,
    // wrk counts answers outside 2xx/3xx without their codes.
    statusCodes: { '2xx/3xx': requests - non2xx, other: non2xx },
  }
}
