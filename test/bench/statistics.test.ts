import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { judgeRatios, medianInterval, roundsSettle, targetsOf } from '../../bench/report.js'
import { SCENARIOS, type ScenarioId } from '../../bench/scenarios.js'

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
  const targets = { floorRatio: 0.85, p99Factor: 1.5 }
  const rounds = (ratios: number[], p99 = 1, cpu = 1) =>
    ratios.map((serviceFloorRatio) => ({ serviceFloorRatio, serviceFloorP99Ratio: p99, serviceFloorCpuRatio: cpu }))
  const around = (centre: number, n: number) => Array.from({ length: n }, (_, i) => centre + ((i % 5) - 2) * 0.02)

  it('settles once the interval is wholly above or wholly below the target, met or missed alike', () => {
    assert.equal(roundsSettle(rounds(around(0.95, 12)), targets), true)
    assert.equal(roundsSettle(rounds(around(0.7, 12)), targets), true)
  })

  it('runs on while the interval reaches the target', () => {
    assert.equal(roundsSettle(rounds(around(0.86, 12)), targets), false)
    assert.equal(roundsSettle(rounds(around(0.84, 36)), targets), false)
  })

  it('runs on while the p99 ratio is within the noise of its own target, 1.5', () => {
    const p99 = around(1.5, 12)
    const judged = around(0.95, 12).map((serviceFloorRatio, i) => ({ serviceFloorRatio, serviceFloorP99Ratio: p99[i] ?? 0, serviceFloorCpuRatio: 1 }))
    assert.equal(roundsSettle(judged, targets), false)
  })

  it('runs on while a judged CPU ratio is within the noise of its target, and ignores it where none is judged', () => {
    const cpu = around(1.15, 12)
    const judged = around(0.95, 12).map((serviceFloorRatio, i) => ({ serviceFloorRatio, serviceFloorP99Ratio: 1, serviceFloorCpuRatio: cpu[i] ?? 0 }))
    assert.equal(roundsSettle(judged, { ...targets, cpuFloorRatio: 1.15 }), false)
    assert.equal(roundsSettle(judged, targets), true)
  })

  it('does not settle on 5 rounds, however far from the target', () => {
    assert.equal(roundsSettle(rounds([2, 2, 2, 2, 2]), targets), false)
  })
})

describe('the verdicts of the ratios judged over rounds (judgeRatios)', () => {
  const rounds = (floor: number[], p99: number[], cpu: number[]) =>
    floor.map((serviceFloorRatio, i) => ({ serviceFloorRatio, serviceFloorP99Ratio: p99[i] ?? Number.NaN, serviceFloorCpuRatio: cpu[i] ?? Number.NaN }))
  const twelve = (value: number) => Array.from({ length: 12 }, (_, i) => value + ((i % 3) - 1) * 0.001)

  it('judges the median of each ratio against its target, the CPU ratio only where the scenario has one', () => {
    const judged = judgeRatios(rounds(twelve(0.92), twelve(1.4), twelve(1.2)), { floorRatio: 0.9, p99Factor: 1.5 })
    assert.deepEqual(judged.pass, { throughput: true, p99: true })
    assert.deepEqual(judged.sure, { throughput: true, p99: true })
    const withCpu = judgeRatios(rounds(twelve(0.92), twelve(1.6), twelve(1.2)), { floorRatio: 0.9, p99Factor: 1.5, cpuFloorRatio: 1.15 })
    assert.deepEqual(withCpu.pass, { throughput: true, p99: false, cpu: false })
    assert.deepEqual(withCpu.sure, { throughput: true, p99: true, cpu: true })
  })

  it('passes a CPU ratio whose median is at the target, as printed to two decimals', () => {
    // Rounds spread evenly over 1.097-1.207, median 1.152: printed 1.15, at the target, and within the noise of it.
    const cpu = Array.from({ length: 12 }, (_, i) => 1.152 + (i - 5.5) * 0.01)
    const judged = judgeRatios(rounds(twelve(1), twelve(1), cpu), { floorRatio: 0.9, p99Factor: 1.5, cpuFloorRatio: 1.15 })
    assert.equal(judged.pass.cpu, true)
    assert.equal(judged.sure.cpu, false)
  })

  it('leaves out rounds without a CPU figure', () => {
    const cpu = [...twelve(1.1).slice(0, 10), Number.NaN, Number.NaN]
    assert.equal(judgeRatios(rounds(twelve(1), twelve(1), cpu), { floorRatio: 0.9, p99Factor: 1.5, cpuFloorRatio: 1.15 }).pass.cpu, true)
  })
})

describe("issue 42's targets (bench/scenarios.ts)", () => {
  const scenario = (id: ScenarioId) => SCENARIOS.find((candidate) => candidate.id === id) ?? assert.fail(id)

  it('asks 0.90 of the floor and at most 1.15 × its CPU per request of get one and list 20 on SQLite', () => {
    for (const id of ['getOne', 'list20'] as const) assert.deepEqual(targetsOf(scenario(id), 'sqlite'), { floorRatio: 0.9, p99Factor: 1.5, cpuFloorRatio: 1.15 })
  })

  it('keeps issue 24 for list 100 and create on SQLite, with the p99 at most 1.5 × the floor', () => {
    assert.deepEqual(targetsOf(scenario('list100'), 'sqlite'), { floorRatio: 0.85, p99Factor: 1.5 })
    assert.deepEqual(targetsOf(scenario('create'), 'sqlite'), { floorRatio: 0.7, p99Factor: 1.5 })
  })

  it('asks 0.85 of the PostgreSQL floor and p99 at most 1.5 × its p99 on every scenario, CPU not judged', () => {
    for (const { id } of SCENARIOS) assert.deepEqual(targetsOf(scenario(id), 'postgres'), { floorRatio: 0.85, p99Factor: 1.5 })
  })
})
