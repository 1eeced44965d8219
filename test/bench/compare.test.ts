import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { describe, it } from 'node:test'
import type { LoadResult } from '../../bench/load.js'
import { roundRatios } from '../../bench/report.js'
import { ROOT } from '../helper.js'

/** A run's result with this rate; the rest as a load generator would report it. */
const result = (requestsPerSecond: number): LoadResult => ({
  durationS: 1,
  requests: requestsPerSecond,
  requestsPerSecond,
  latencyMs: { mean: 2, p50: 2, p90: 3, p99: 4, max: 5 },
  non2xx: 0,
  errors: 0,
  timeouts: 0,
  statusCodes: { 200: requestsPerSecond },
  serverCpuUsPerRequest: 40,
})

describe('npm run bench -- --compare (another build in the same rounds)', () => {
  it("reports the other build's rate over the service's of the same round, not the baseline's or the floor's", () => {
    const ratios = roundRatios({ baseline: result(30_000), service: result(16_000), floor: result(20_000), other: result(18_000) })
    assert.equal(ratios.otherRatio, 1.125)
    assert.equal(ratios.serviceFloorRatio, 0.8)
  })

  it('refuses a bin that is not a file as a usage error, before it builds or starts anything', () => {
    const missing = path.join(ROOT, 'no-such-build', 'bin', 'petstore.js')
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--compare', missing, '--no-build'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
    assert.equal(run.status, 2, run.stderr)
    assert.match(run.stderr, new RegExp(`--compare: no file ${missing.replaceAll('/', '\\/')}`))
    assert.match(run.stderr, /Usage: npm run bench .*\[-- --compare <bin>\]/)
    assert.equal(run.stdout, '')
  })
})
