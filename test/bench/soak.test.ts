import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Answers, SOAK_BOUNDS, type SoakSample, judgeSoak, p99Between, slope } from '../../bench/soak-verdict.js'

// The soak's verdict: memory flat after warm-up, the read cache within its budget, the tail of the last
// minute against the first, no failed answer. A wrong bound here would pass a leak or fail a flat run.

const BUDGET = 8 * 1024 * 1024

/** A sample every 5 s over `durationS`, RSS from `rss(atS)`, the cache at `cache(atS)` bytes of BUDGET. */
function samples(durationS: number, rss: (atS: number) => number, cache: (atS: number) => number | undefined = () => 1e6): SoakSample[] {
  return Array.from({ length: durationS / 5 + 1 }, (_, i) => {
    const atS = i * 5
    const bytes = cache(atS)
    return { atS, rssMb: rss(atS), ...(bytes === undefined ? {} : { cacheBytes: bytes, cacheBudgetBytes: BUDGET }) }
  })
}

/** `perSecond` answers a second over `durationS`, each taking `latency(atS, i)` ms. */
function answers(durationS: number, latency: (atS: number, i: number) => number, perSecond = 100): Answers {
  const atS: number[] = []
  const latencyMs: number[] = []
  for (let i = 0; i < durationS * perSecond; i++) {
    const at = i / perSecond
    atS.push(at)
    latencyMs.push(latency(at, i))
  }
  return { atS, latencyMs }
}

const clean = { non2xx: 0, socketErrors: 0 }
/** 5 ms, and 20 ms for one answer in a hundred and fifty: p99 about 5 ms. */
const steady = (_atS: number, i: number) => (i % 150 === 0 ? 20 : 5)
const failed = (verdict: ReturnType<typeof judgeSoak>) => verdict.checks.filter((check) => !check.pass).map((check) => check.name)

describe('the soak verdict (bench/soak-verdict.ts)', () => {
  it('meets its bounds when memory grows in warm-up only, then saws up and down, and the tail holds', () => {
    // 120 MB rising to 150 MB over the first minute, then ±4 MB around it.
    const rss = (atS: number) => (atS < 60 ? 120 + atS / 2 : 150 + 4 * Math.sin(atS / 7))
    const verdict = judgeSoak({ durationS: 180, samples: samples(180, rss), answers: answers(180, steady), failures: clean })
    assert.deepEqual(failed(verdict), [])
    assert.equal(verdict.pass, true)
    assert.equal(verdict.figures.spanS, 60)
  })

  it('meets its bounds under a sawtooth of 40 MB every 100 s, as V8 collects the old generation, and with none in the last third', () => {
    const sawtooth = (atS: number) => 145 + 40 * ((atS % 100) / 100)
    assert.deepEqual(failed(judgeSoak({ durationS: 180, samples: samples(180, sawtooth), answers: answers(180, steady), failures: clean })), [])
    // Collected at 20 s, then growing to the old high by the end: the lows rise by 30 MB, the highs do not.
    const late = (atS: number) => (atS < 20 ? 160 + atS : 145 + (atS - 20) / 4.5)
    const verdict = judgeSoak({ durationS: 180, samples: samples(180, late), answers: answers(180, steady), failures: clean })
    assert.deepEqual(failed(verdict), [])
    assert.ok(verdict.figures.rssMinLastMb > verdict.figures.rssMinMiddleMb + 10)
  })

  it("meets its bounds when the last third holds the run's highest peak, 25 MB over the others, and its troughs are where they were", () => {
    // Troughs at 150 MB every 40 s; peaks of 180 MB, but 205 MB in the last third.
    const peaks = (atS: number) => 150 + ((atS % 40) / 40) * (atS >= 140 && atS < 180 ? 55 : 30)
    const verdict = judgeSoak({ durationS: 180, samples: samples(180, peaks), answers: answers(180, steady), failures: clean })
    assert.deepEqual(failed(verdict), [])
    assert.ok(verdict.figures.rssMaxLastMb > verdict.figures.rssMaxBeforeLastMb + 10, JSON.stringify(verdict.figures))
  })

  it('misses growth of 12 MB a minute after warm-up under a sawtooth, by its new highs and lows', () => {
    const leak = (atS: number) => 145 + (atS / 60) * 12 + 20 * ((atS % 50) / 50)
    const verdict = judgeSoak({ durationS: 180, samples: samples(180, leak), answers: answers(180, steady), failures: clean })
    assert.deepEqual(failed(verdict), ["RSS flat: the last third's highest and lowest against those before it"])
    assert.ok(verdict.figures.rssSlopeMbPerMinute > 10, String(verdict.figures.rssSlopeMbPerMinute))
  })

  it('sees growth of 6 MB a minute in a run of 6 minutes, where 3 minutes are too short for it', () => {
    const leak = (atS: number) => 150 + (atS / 60) * 6
    assert.equal(judgeSoak({ durationS: 180, samples: samples(180, leak), answers: answers(180, steady), failures: clean }).pass, true)
    assert.equal(judgeSoak({ durationS: 360, samples: samples(360, leak), answers: answers(360, steady), failures: clean }).pass, false)
  })

  it('misses a read cache over its budget in any sample, and one never read', () => {
    const over = judgeSoak({ durationS: 180, samples: samples(180, () => 150, (atS) => (atS === 100 ? BUDGET + 1 : BUDGET)), answers: answers(180, steady), failures: clean })
    assert.deepEqual(failed(over), ['read cache within its budget at every sample'])
    const unread = judgeSoak({ durationS: 180, samples: samples(180, () => 150, () => undefined), answers: answers(180, steady), failures: clean })
    assert.deepEqual(failed(unread), ['read cache within its budget at every sample'])
  })

  it(`misses a last minute whose p99 is over ${SOAK_BOUNDS.p99Factor} × the first's, and passes one at it`, () => {
    const slower = (factor: number) => (atS: number, i: number) => steady(atS, i) * (atS >= 120 ? factor : 1)
    assert.deepEqual(failed(judgeSoak({ durationS: 180, samples: samples(180, () => 150), answers: answers(180, slower(1.6)), failures: clean })), [
      'p99 of the last 60 s against the first 60 s',
    ])
    assert.deepEqual(failed(judgeSoak({ durationS: 180, samples: samples(180, () => 150), answers: answers(180, slower(1.5)), failures: clean })), [])
  })

  it('compares thirds rather than minutes in a run shorter than three minutes', () => {
    const verdict = judgeSoak({ durationS: 60, samples: samples(60, () => 150), answers: answers(60, steady), failures: clean })
    assert.equal(verdict.figures.spanS, 20)
    assert.equal(verdict.pass, true)
  })

  it('misses any answer outside 2xx and any socket error', () => {
    const run = { durationS: 180, samples: samples(180, () => 150), answers: answers(180, steady) }
    assert.deepEqual(failed(judgeSoak({ ...run, failures: { non2xx: 1, socketErrors: 0 } })), ['every answer 2xx, no socket error'])
    assert.deepEqual(failed(judgeSoak({ ...run, failures: { non2xx: 0, socketErrors: 1 } })), ['every answer 2xx, no socket error'])
  })
})

describe('the pieces of the soak verdict', () => {
  it('fits the least-squares slope, and has none for a single point in time', () => {
    assert.equal(slope([{ x: 0, y: 1 }, { x: 1, y: 3 }, { x: 2, y: 5 }]), 2)
    assert.equal(slope([{ x: 0, y: 1 }, { x: 1, y: 0 }, { x: 2, y: 1 }]), 0)
    assert.ok(Number.isNaN(slope([{ x: 1, y: 1 }, { x: 1, y: 2 }])))
  })

  it('takes the p99 of the answers in a span of time only', () => {
    const run = answers(10, (atS) => (atS < 5 ? 1 : 100))
    assert.deepEqual(p99Between(run, 0, 5), { p99Ms: 1, count: 500 })
    assert.deepEqual(p99Between(run, 5, 10), { p99Ms: 100, count: 500 })
  })
})
