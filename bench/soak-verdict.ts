// The soak's verdict (bench/soak.ts): what a run of minutes under a steady mixed load must show, as pure
// functions of what it sampled, so that the bounds are tested (test/bench/soak.test.ts) and stated once.
import { quantile } from './report.js'

/** The bounds a soak is judged against, per engine (bench/README.md, The soak). */
export const SOAK_BOUNDS = {
  /**
   * The first third of the held load is warm-up: code still being compiled, the read cache filling, the
   * heap finding its size. Memory is judged over the two thirds after it.
   */
  warmupShare: 1 / 3,
  /**
   * RSS flat: the last third's highest sample at most the highest before it plus this (no new high), or its
   * lowest at most the middle third's lowest plus this (no new low). V8 collects its old generation in a
   * sawtooth whose period is of the order of the thirds: a third's lowest sample follows where the major
   * collections fall, and its highest how far the heap grew before one, so either alone rises without growth
   * (findings.md, The soak's bounds, The soak's RSS rule). Growth raises both, as what survives a collection
   * stays. The slope is reported.
   */
  rssSlackMb: 10,
  /** The tail: p99 of the last span at most this many times p99 of the first. */
  p99Factor: 1.5,
  /** The spans whose p99 are compared: the first and the last minute, or third of a shorter run. */
  p99SpanS: 60,
} as const

export interface SoakSample {
  /** Seconds since the held load began. */
  atS: number
  /** The server's resident memory (VmRSS), 10^6 bytes. */
  rssMb: number
  /** The read cache's petstore_read_cache_bytes and _budget_bytes, when /metrics answered. */
  cacheBytes?: number
  cacheBudgetBytes?: number
}

/** Every answer of the held load: when it came (seconds since the load began) and how long it took. */
export interface Answers {
  atS: readonly number[]
  latencyMs: readonly number[]
}

interface Check {
  name: string
  pass: boolean
  /** What was measured, as printed. */
  figure: string
  /** The bound, as printed. */
  bound: string
}

export interface SoakVerdict {
  pass: boolean
  checks: Check[]
  /** The figures the checks rest on, for the results JSON. */
  figures: {
    rssMaxBeforeLastMb: number
    rssMaxLastMb: number
    rssMinMiddleMb: number
    rssMinLastMb: number
    /** Reported, not judged (SOAK_BOUNDS.rssSlackMb says why). */
    rssSlopeMbPerMinute: number
    cacheMaxBytes: number
    cacheBudgetBytes: number
    cacheSamples: number
    p99FirstMs: number
    p99LastMs: number
    spanS: number
  }
}

/** The least-squares slope of y over x; NaN below two distinct x. */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length
  const meanX = points.reduce((sum, p) => sum + p.x, 0) / n
  const meanY = points.reduce((sum, p) => sum + p.y, 0) / n
  let covariance = 0
  let variance = 0
  for (const { x, y } of points) {
    covariance += (x - meanX) * (y - meanY)
    variance += (x - meanX) ** 2
  }
  return variance === 0 ? Number.NaN : covariance / variance
}

/** The p99 of the answers that came in [fromS, toS), and how many there were. */
export function p99Between(answers: Answers, fromS: number, toS: number): { p99Ms: number; count: number } {
  const latencies: number[] = []
  answers.atS.forEach((at, i) => {
    if (at >= fromS && at < toS) latencies.push(answers.latencyMs[i] ?? Number.NaN)
  })
  return { p99Ms: quantile(latencies, 0.99), count: latencies.length }
}

const mb = (value: number) => `${value.toFixed(1)} MB`
const ms = (value: number) => `${value.toFixed(1)} ms`

/**
 * A soak of `durationS` seconds of held load: memory flat after warm-up (the last third's peak against the
 * peaks before it, or its trough against the middle third's), the read cache never over its budget, the last
 * span's p99 against the first's, and no answer outside 2xx nor socket error.
 */
export function judgeSoak(run: {
  durationS: number
  samples: readonly SoakSample[]
  answers: Answers
  failures: { non2xx: number; socketErrors: number }
  bounds?: typeof SOAK_BOUNDS
}): SoakVerdict {
  const bounds = run.bounds ?? SOAK_BOUNDS
  const { durationS, samples } = run
  const warmupEndS = durationS * bounds.warmupShare
  const lastThirdS = durationS - (durationS - warmupEndS) / 2
  const rss = (from: number, to: number) => samples.filter((s) => s.atS >= from && s.atS < to).map((s) => s.rssMb)
  // Math.max of no samples is -Infinity: a third without a sample fails the check below.
  const rssMinMiddleMb = Math.min(...rss(warmupEndS, lastThirdS))
  const rssMinLastMb = Math.min(...rss(lastThirdS, Number.POSITIVE_INFINITY))
  const rssMaxBeforeLastMb = Math.max(...rss(0, lastThirdS))
  const rssMaxLastMb = Math.max(...rss(lastThirdS, Number.POSITIVE_INFINITY))
  const settled = samples.filter((s) => s.atS >= warmupEndS)
  const rssSlopeMbPerMinute = slope(settled.map((s) => ({ x: s.atS / 60, y: s.rssMb })))

  const cacheRead = samples.filter((s) => s.cacheBytes !== undefined && s.cacheBudgetBytes !== undefined)
  const cacheMaxBytes = Math.max(...cacheRead.map((s) => s.cacheBytes ?? Number.NaN))
  const cacheBudgetBytes = Math.min(...cacheRead.map((s) => s.cacheBudgetBytes ?? Number.NaN))
  const cacheOver = cacheRead.filter((s) => (s.cacheBytes ?? 0) > (s.cacheBudgetBytes ?? 0)).length

  const spanS = Math.min(bounds.p99SpanS, durationS / 3)
  const first = p99Between(run.answers, 0, spanS)
  const last = p99Between(run.answers, durationS - spanS, Number.POSITIVE_INFINITY)

  const { non2xx, socketErrors } = run.failures
  const notAbove = (lastMb: number, beforeMb: number) => Number.isFinite(lastMb) && Number.isFinite(beforeMb) && lastMb <= beforeMb + bounds.rssSlackMb
  const checks: Check[] = [
    {
      name: "RSS flat: the last third's highest and lowest against those before it",
      pass: notAbove(rssMaxLastMb, rssMaxBeforeLastMb) || notAbove(rssMinLastMb, rssMinMiddleMb),
      figure:
        `highest ${mb(rssMaxLastMb)} against ${mb(rssMaxBeforeLastMb)}, lowest ${mb(rssMinLastMb)} against the middle third's ${mb(rssMinMiddleMb)} ` +
        `(reported: slope after warm-up ${rssSlopeMbPerMinute >= 0 ? '+' : ''}${rssSlopeMbPerMinute.toFixed(1)} MB/min)`,
      bound: `either ≤ before + ${bounds.rssSlackMb} MB`,
    },
    {
      name: 'read cache within its budget at every sample',
      pass: cacheRead.length > 0 && cacheOver === 0 && cacheRead.length === samples.length,
      figure:
        cacheRead.length === 0
          ? 'never read from /metrics'
          : `at most ${mb(cacheMaxBytes / 1e6)} of ${mb(cacheBudgetBytes / 1e6)}, over it in ${cacheOver} of ${cacheRead.length} samples` +
            (cacheRead.length === samples.length ? '' : `, ${samples.length - cacheRead.length} samples unread`),
      bound: '≤ budget, every sample read',
    },
    {
      name: `p99 of the last ${spanS} s against the first ${spanS} s`,
      pass: first.count > 0 && last.count > 0 && last.p99Ms <= bounds.p99Factor * first.p99Ms,
      figure: `${ms(last.p99Ms)} against ${ms(first.p99Ms)} (${(last.p99Ms / first.p99Ms).toFixed(2)} ×; ${last.count} and ${first.count} answers)`,
      bound: `≤ ${bounds.p99Factor} ×`,
    },
    {
      name: 'every answer 2xx, no socket error',
      pass: non2xx === 0 && socketErrors === 0,
      figure: `${non2xx} non-2xx, ${socketErrors} socket errors`,
      bound: '0',
    },
  ]
  return {
    pass: checks.every((check) => check.pass),
    checks,
    figures: {
      rssMinMiddleMb,
      rssMinLastMb,
      rssMaxBeforeLastMb,
      rssMaxLastMb,
      rssSlopeMbPerMinute: Math.round(rssSlopeMbPerMinute * 1000) / 1000,
      cacheMaxBytes,
      cacheBudgetBytes,
      cacheSamples: cacheRead.length,
      p99FirstMs: first.p99Ms,
      p99LastMs: last.p99Ms,
      spanS,
    },
  }
}
