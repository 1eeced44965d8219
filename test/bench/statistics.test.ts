import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { medianInterval, roundsSettle } from '../../bench/report.js'

// The bench's verdicts rest on these: a wrong interval would let a run stop early and call noise a verdict.

/** P(Binomial(n, ½) ≤ j), exactly, from binomial coefficients in BigInt. */
function binomialAtMost(n: number, j: number): number {
  let coefficient = 1n
  let sum = 0n
  for (let i = 0; i <= j; i++) {
    sum += coefficient
    coefficient = (coefficient * BigInt(n - i)) / BigInt(i + 1)
  }
  return Number((sum * 1_000_000_000n) / 2n ** BigInt(n)) / 1e9
}

/** A seeded generator, so that the coverage below is the same on every run. */
function random(seed: number): () => number {
  let state = seed
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31
    return state / 2 ** 31
  }
}

describe('the 95 % interval of a median (bench/report.ts)', () => {
  it('has none below 6 values, where even the extremes cover less than 95 %', () => {
    for (let n = 0; n < 6; n++) assert.equal(medianInterval(Array.from({ length: n }, (_, i) => i)), undefined)
  })

  it('is the narrowest pair of order statistics that covers at least 95 %, for every n from 6 to 150', () => {
    for (let n = 6; n <= 150; n++) {
      const values = Array.from({ length: n }, (_, i) => n - i) // n..1: unsorted
      const interval = medianInterval(values)
      assert.ok(interval !== undefined, `n=${n}`)
      const k = interval.low
      assert.equal(interval.high, n + 1 - k, `n=${n}: not symmetric`)
      assert.ok(1 - 2 * binomialAtMost(n, k - 1) >= 0.95, `n=${n}: [${k}, ${n + 1 - k}] covers less than 95 %`)
      assert.ok(1 - 2 * binomialAtMost(n, k) < 0.95, `n=${n}: [${k + 1}, ${n - k}] would cover 95 % too`)
    }
  })

  it('holds the true median of a skewed distribution in about 95 % of samples of 12, 24 and 36', () => {
    const next = random(7)
    for (const n of [12, 24, 36]) {
      let covered = 0
      const samples = 4000
      for (let sample = 0; sample < samples; sample++) {
        // Exponential, median ln 2.
        const interval = medianInterval(Array.from({ length: n }, () => -Math.log(1 - next())))
        if (interval !== undefined && interval.low <= Math.LN2 && Math.LN2 <= interval.high) covered++
      }
      const coverage = covered / samples
      assert.ok(coverage >= 0.945 && coverage <= 0.985, `n=${n}: coverage ${coverage}`)
    }
  })

  it('leaves out rounds without a value', () => {
    assert.deepEqual(medianInterval([Number.NaN, 1, 2, 3, 4, 5, 6, Number.NaN]), { low: 1, high: 6 })
  })
})

describe('when a scenario has rounds enough (roundsSettle)', () => {
  const rounds = (ratios: number[], p99 = 1) => ratios.map((serviceFloorRatio) => ({ serviceFloorRatio, serviceFloorP99Ratio: p99 }))
  const around = (centre: number, n: number) => Array.from({ length: n }, (_, i) => centre + ((i % 5) - 2) * 0.02)

  it('settles once the interval is wholly above or wholly below the target, met or missed alike', () => {
    assert.equal(roundsSettle(rounds(around(0.95, 12)), 0.85), true)
    assert.equal(roundsSettle(rounds(around(0.7, 12)), 0.85), true)
  })

  it('runs on while the interval reaches the target', () => {
    assert.equal(roundsSettle(rounds(around(0.86, 12)), 0.85), false)
    assert.equal(roundsSettle(rounds(around(0.84, 36)), 0.85), false)
  })

  it('runs on while the p99 ratio is within the noise of its own target, 2', () => {
    const p99 = around(2, 12)
    const judged = around(0.95, 12).map((serviceFloorRatio, i) => ({ serviceFloorRatio, serviceFloorP99Ratio: p99[i] ?? 0 }))
    assert.equal(roundsSettle(judged, 0.85), false)
  })

  it('does not settle on 5 rounds, however far from the target', () => {
    assert.equal(roundsSettle(rounds([2, 2, 2, 2, 2]), 0.85), false)
  })
})
