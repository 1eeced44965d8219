// The benchmark's report: medians over rounds, the verdicts against the targets, the tables on the
// terminal, and the results JSON under bench/results/ (ignored by git; see bench/README.md).
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { ROOT, round } from '../scripts/petstore-process.js'
import type { LoadResult } from './load.js'
import { CONNECTIONS, P99_FACTOR, type Scenario } from './scenarios.js'

const RESULTS_DIR = path.join(import.meta.dirname, 'results')

/** /proc reports KiB; MB here are 10^6 bytes. */
export const megabytes = (kb: number) => round((kb * 1024) / 1e6, 1)

/** The q-quantile of the values, linear between the two nearest ranks (q = 0.5: the median). */
export function quantile(values: readonly number[], q: number): number {
  const sorted = values.filter((value) => !Number.isNaN(value)).sort((a, b) => a - b)
  const at = (sorted.length - 1) * q
  const below = sorted[Math.floor(at)] ?? Number.NaN
  const above = sorted[Math.ceil(at)] ?? Number.NaN
  return below + (above - below) * (at - Math.floor(at))
}

const median = (values: readonly number[]) => quantile(values, 0.5)

/**
 * A 95 % confidence interval for the median of what the values sample, free of any assumption about their
 * distribution: the k-th smallest and k-th largest value, k the largest for which fewer than k of n fair
 * coin tosses land heads with probability ≤ 2.5 % (each round falls below the true median with
 * probability ½). Undefined below 6 values, where no such k exists.
 */
export function medianInterval(values: readonly number[]): { low: number; high: number } | undefined {
  const sorted = values.filter((value) => !Number.isNaN(value)).sort((a, b) => a - b)
  const n = sorted.length
  // P(Binomial(n, ½) ≤ j), summed term by term.
  let term = 0.5 ** n
  let below = term
  let k = 0
  for (let j = 0; below <= 0.025 && j < n; j++) {
    k = j + 1
    term = (term * (n - j)) / (j + 1)
    below += term
  }
  const low = sorted[k - 1]
  const high = sorted[n - k]
  return k === 0 || low === undefined || high === undefined ? undefined : { low, high }
}

/**
 * Whether the rounds decide on which side of `target` the median lies: its 95 % interval lies wholly on one
 * side, so that more rounds would not turn the verdict (another run still may: bench/README.md).
 */
function settled(values: readonly number[], target: number): boolean {
  const interval = medianInterval(values)
  return interval !== undefined && (interval.low > target || interval.high < target)
}

type JudgedRatios = Pick<Ratios, 'serviceFloorRatio' | 'serviceFloorP99Ratio' | 'serviceFloorCpuRatio'>

/**
 * What a scenario is judged against on one engine: the least service ÷ floor, the most service p99 ÷ floor
 * p99, and, where judged, the most service CPU per request ÷ floor CPU per request (all medians over rounds).
 */
export interface Targets {
  floorRatio: number
  p99Factor: number
  cpuFloorRatio?: number
}

export function targetsOf(scenario: Scenario, engine: EngineName): Targets {
  const cpuFloorRatio = scenario.targetFloorCpuRatio?.[engine]
  return { floorRatio: scenario.targetFloorRatio[engine], p99Factor: P99_FACTOR, ...(cpuFloorRatio === undefined ? {} : { cpuFloorRatio }) }
}

/** Per judged ratio: whether its median meets the target (`pass`), and whether the rounds settle that verdict (`sure`). */
interface Verdicts {
  pass: { throughput: boolean; p99: boolean; cpu?: boolean }
  sure: { throughput: boolean; p99: boolean; cpu?: boolean }
}

/**
 * The verdicts of the ratios judged over rounds: each median against its target, and whether its 95 %
 * interval lies wholly on one side of it. The CPU ratio only where `targets` has one.
 */
export function judgeRatios(rounds: readonly JudgedRatios[], targets: Targets): Verdicts {
  const values = (key: keyof JudgedRatios) => rounds.map((r) => r[key])
  // Rounded as summarise rounds the medians it prints, so that a verdict never contradicts its figure.
  const medianOf = (key: keyof JudgedRatios, digits: number) => round(median(values(key)), digits)
  const verdicts: Verdicts = {
    pass: { throughput: medianOf('serviceFloorRatio', 3) >= targets.floorRatio, p99: medianOf('serviceFloorP99Ratio', 2) <= targets.p99Factor },
    sure: { throughput: settled(values('serviceFloorRatio'), targets.floorRatio), p99: settled(values('serviceFloorP99Ratio'), targets.p99Factor) },
  }
  if (targets.cpuFloorRatio !== undefined) {
    verdicts.pass.cpu = medianOf('serviceFloorCpuRatio', 2) <= targets.cpuFloorRatio
    verdicts.sure.cpu = settled(values('serviceFloorCpuRatio'), targets.cpuFloorRatio)
  }
  return verdicts
}

/** Whether a scenario's rounds settle every judged ratio: a run adds rounds until they do (rounds.ts). */
export function roundsSettle(rounds: readonly JudgedRatios[], targets: Targets): boolean {
  const { sure } = judgeRatios(rounds, targets)
  return sure.throughput && sure.p99 && sure.cpu !== false
}

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
export const count = (n: number) => Math.round(n).toLocaleString('en-US')
/** PASS or MISS by the median; `?` when the median's 95 % interval reaches the target, so that noise could turn it. */
const verdict = (pass: boolean, sure = true) => (pass ? 'PASS' : 'MISS') + (sure ? '' : '?')
const percent = (share: number) => `${Math.round(share * 100)} %`

export type EngineName = 'sqlite' | 'postgres'

/**
 * Servers measured in every round after the service and the floor, reported and never judged: on
 * PostgreSQL the postgres.js baseline, for the driver choice, and with `--pooler` the service with its
 * queries unnamed (DATABASE_PREPARED_STATEMENTS=false), straight to PostgreSQL and through PgBouncer in
 * transaction mode, for what a transaction pooler costs a request (issue 29); with `--compare`, another
 * build of the service, for what a change wins.
 */
export type CompanionId = 'postgresJs' | 'unnamed' | 'pooled' | 'other'

interface CompanionSpec {
  /** In progress lines, failure messages and the names of the pets it creates. */
  name: string
  /** Its row in a scenario's table. */
  row: string
  /** Its columns in the summary. */
  column: string
  /** What its ratio (its req/s ÷ the req/s of `against` in the same round) says, in full and in the summary. */
  ratio: string
  ratioColumn: string
  against: 'baseline' | 'service'
}

export const COMPANIONS: Record<CompanionId, CompanionSpec> = {
  postgresJs: {
    name: 'postgres.js',
    row: 'baseline (postgres.js)',
    column: 'pjs',
    ratio: 'postgres.js ÷ node-postgres',
    ratioColumn: 'pjs ÷ pg',
    against: 'baseline',
  },
  unnamed: {
    name: 'unnamed service',
    row: 'service (unnamed)',
    column: 'unnamed',
    ratio: 'service unnamed ÷ service named',
    ratioColumn: 'unnamed ÷ svc',
    against: 'service',
  },
  pooled: {
    name: 'service via PgBouncer',
    row: 'service (unnamed, PgBouncer)',
    column: 'pgb',
    ratio: 'service unnamed via PgBouncer ÷ service named',
    ratioColumn: 'pgb ÷ svc',
    against: 'service',
  },
  other: {
    name: 'other build',
    row: 'service (other build)',
    column: 'other',
    ratio: 'other build ÷ service',
    ratioColumn: 'other ÷ svc',
    against: 'service',
  },
}

const COMPANION_IDS = Object.keys(COMPANIONS) as CompanionId[]

type RatioKey = `${CompanionId}Ratio`
/** Where a companion's ratio is kept in rounds and medians: `postgresJsRatio`. */
const ratioKey = (id: CompanionId): RatioKey => `${id}Ratio`

/**
 * Per server, as in the rounds. The service is judged against the floor (Fastify with the mandated
 * libraries on the baseline's store); the baseline (bare node:http) and the companions are reported.
 */
export type PerServer<T> = { baseline: T; service: T; floor: T } & { [K in CompanionId]?: T }

/** A companion's req/s ÷ its `against`'s, in the runs that measure it. */
type CompanionRatios = { [K in RatioKey]?: number }

/** The ratios of one round, or their medians over rounds. */
interface Ratios {
  /** Service req/s ÷ floor req/s: judged against the scenario's target. */
  serviceFloorRatio: number
  /** Service p99 ÷ floor p99: judged against P99_FACTOR. */
  serviceFloorP99Ratio: number
  /** Service req/s ÷ baseline req/s: reported. */
  serviceBaselineRatio: number
  /** Floor req/s ÷ baseline req/s, what the mandated libraries cost by themselves: reported. */
  floorBaselineRatio: number
  /** Service CPU per request ÷ baseline CPU per request (each server's process, /proc): reported. */
  serviceBaselineCpuRatio: number
  /**
   * Service CPU per request ÷ floor CPU per request: the cost of a request whatever the load generator left
   * each server of the CPU. Judged where the scenario has a `targetFloorCpuRatio`, else reported.
   */
  serviceFloorCpuRatio: number
}

/**
 * How a ratio spread over the rounds: its quartiles (the median is in `median`), its extremes, and the 95 %
 * confidence interval of its median (medianInterval).
 */
interface Spread {
  q1: number
  q3: number
  min: number
  max: number
  medianLow?: number
  medianHigh?: number
}

const RATIO_KEYS = [
  'serviceFloorRatio',
  'serviceFloorP99Ratio',
  'serviceBaselineRatio',
  'floorBaselineRatio',
  'serviceBaselineCpuRatio',
  'serviceFloorCpuRatio',
] as const satisfies readonly (keyof Ratios)[]

export type Round = PerServer<LoadResult> &
  CompanionRatios &
  Ratios & {
    /**
     * The share of the machine's CPU (every core) that processes outside the bench used during the round:
     * what a shared machine took from the servers and the load generator.
     */
    othersCpuShare?: number
  }

interface Side {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  /** The server process's CPU time per request, µs. */
  cpuUsPerRequest: number
}

export interface ScenarioReport {
  id: string
  label: string
  /** The least median service ÷ floor on this engine. */
  targetFloorRatio: number
  /** Where judged on this engine, the most median service CPU per request ÷ floor CPU per request. */
  targetFloorCpuRatio?: number
  warmup: PerServer<LoadResult>
  rounds: Round[]
  median: PerServer<Side> & CompanionRatios & Ratios
  /** Each ratio's spread over the rounds. */
  spread: { [K in keyof Ratios | RatioKey]?: Spread }
  /** The share of the machine's CPU that other processes used, median and most over rounds. */
  othersCpuShare: { median: number; max: number }
  /** VmHWM after the scenario: the peak since the process started. */
  peakRssMb: PerServer<number>
  /** VmRSS after the scenario. */
  rssAfterMb: PerServer<number>
  /**
   * Each against the floor: the median service ÷ floor, the median p99 ratio, the service's peak RSS, and
   * where judged (`targetFloorCpuRatio`) the median CPU per request ratio.
   */
  pass: Verdicts['pass'] & { peakRss: boolean }
  /** Whether the median's 95 % interval lies wholly on the side of the target that `pass` says. */
  sure: Verdicts['sure']
}

/** The ratios of a round: the servers were measured seconds apart. */
export function roundRatios(results: PerServer<LoadResult>): Ratios & CompanionRatios {
  const { baseline, service, floor } = results
  const ratios: Ratios & CompanionRatios = {
    serviceFloorRatio: round(service.requestsPerSecond / floor.requestsPerSecond, 3),
    serviceFloorP99Ratio: round(service.latencyMs.p99 / floor.latencyMs.p99, 3),
    serviceBaselineRatio: round(service.requestsPerSecond / baseline.requestsPerSecond, 3),
    floorBaselineRatio: round(floor.requestsPerSecond / baseline.requestsPerSecond, 3),
    serviceBaselineCpuRatio: round((service.serverCpuUsPerRequest ?? Number.NaN) / (baseline.serverCpuUsPerRequest ?? Number.NaN), 3),
    serviceFloorCpuRatio: round((service.serverCpuUsPerRequest ?? Number.NaN) / (floor.serverCpuUsPerRequest ?? Number.NaN), 3),
  }
  for (const id of COMPANION_IDS) {
    const result = results[id]
    if (result !== undefined) ratios[ratioKey(id)] = round(result.requestsPerSecond / results[COMPANIONS[id].against].requestsPerSecond, 3)
  }
  return ratios
}

/** The companions measured in this scenario, in the order of COMPANIONS. */
const companionsOf = (report: ScenarioReport) => COMPANION_IDS.filter((id) => report.median[id] !== undefined)

export function summarise(
  scenario: Scenario,
  engine: EngineName,
  warmup: ScenarioReport['warmup'],
  rounds: Round[],
  memory: Pick<ScenarioReport, 'peakRssMb' | 'rssAfterMb'>,
): ScenarioReport {
  const { peakRssMb } = memory
  const side = (results: LoadResult[]): Side => ({
    requestsPerSecond: round(median(results.map((r) => r.requestsPerSecond)), 1),
    p50Ms: round(median(results.map((r) => r.latencyMs.p50)), 2),
    p99Ms: round(median(results.map((r) => r.latencyMs.p99)), 2),
    cpuUsPerRequest: round(median(results.map((r) => r.serverCpuUsPerRequest ?? Number.NaN)), 1),
  })
  const medianOf = (key: keyof Ratios, digits: number) => round(median(rounds.map((r) => r[key])), digits)
  const spread: ScenarioReport['spread'] = {}
  for (const key of [...RATIO_KEYS, ...COMPANION_IDS.map(ratioKey)]) {
    const values = rounds.flatMap((r) => r[key] ?? [])
    if (values.length > 0) {
      const interval = medianInterval(values)
      spread[key] = {
        q1: round(quantile(values, 0.25), 3),
        q3: round(quantile(values, 0.75), 3),
        min: Math.min(...values),
        max: Math.max(...values),
        medianLow: interval?.low,
        medianHigh: interval?.high,
      }
    }
  }
  const targets = targetsOf(scenario, engine)
  const judged = judgeRatios(rounds, targets)
  const medians: ScenarioReport['median'] = {
    serviceFloorRatio: medianOf('serviceFloorRatio', 3),
    serviceFloorP99Ratio: medianOf('serviceFloorP99Ratio', 2),
    serviceBaselineRatio: medianOf('serviceBaselineRatio', 3),
    floorBaselineRatio: medianOf('floorBaselineRatio', 3),
    serviceBaselineCpuRatio: medianOf('serviceBaselineCpuRatio', 3),
    serviceFloorCpuRatio: medianOf('serviceFloorCpuRatio', 2),
    baseline: side(rounds.map((r) => r.baseline)),
    service: side(rounds.map((r) => r.service)),
    floor: side(rounds.map((r) => r.floor)),
  }
  for (const id of COMPANION_IDS) {
    const results = rounds.flatMap((r) => r[id] ?? [])
    if (results.length === 0) continue
    medians[id] = side(results)
    medians[ratioKey(id)] = round(median(rounds.flatMap((r) => r[ratioKey(id)] ?? [])), 3)
  }
  return {
    id: scenario.id,
    label: scenario.label,
    targetFloorRatio: targets.floorRatio,
    ...(targets.cpuFloorRatio === undefined ? {} : { targetFloorCpuRatio: targets.cpuFloorRatio }),
    warmup,
    rounds,
    median: medians,
    spread,
    othersCpuShare: {
      median: round(median(rounds.map((r) => r.othersCpuShare ?? Number.NaN)), 3),
      max: Math.max(...rounds.map((r) => r.othersCpuShare ?? Number.NaN)),
    },
    ...memory,
    pass: { ...judged.pass, peakRss: peakRssMb.service <= peakRssMb.floor },
    sure: judged.sure,
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows
    .map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  '))
    .join('\n')
}

const target = (report: ScenarioReport) => `≥ ${report.targetFloorRatio.toFixed(2)}`
/** The CPU target where judged (`≤ 1.15`), else empty. */
const cpuTarget = (report: ScenarioReport) => (report.targetFloorCpuRatio === undefined ? '' : `≤ ${report.targetFloorCpuRatio.toFixed(2)}`)
/** The CPU verdict where judged, else empty. */
const cpuVerdict = (report: ScenarioReport) => (report.pass.cpu === undefined ? '' : verdict(report.pass.cpu, report.sure.cpu))

/** A ratio's median over rounds and its interquartile range: `0.62`, `0.60-0.64`. */
function medianAndIqr(report: ScenarioReport, key: keyof Ratios | RatioKey): [string, string] {
  const spread = report.spread[key]
  return [report.median[key]?.toFixed(2) ?? '?', spread === undefined ? '?' : `${spread.q1.toFixed(2)}-${spread.q3.toFixed(2)}`]
}

/** The 95 % interval of a ratio's median: `0.58-0.66`. */
function interval(report: ScenarioReport, key: keyof Ratios | RatioKey): string {
  const { medianLow, medianHigh } = report.spread[key] ?? {}
  return medianLow === undefined || medianHigh === undefined ? '?' : `${medianLow.toFixed(2)}-${medianHigh.toFixed(2)}`
}

/** `label 0.62 (IQR 0.60-0.64, 12 rounds)`; a judged ratio adds its median's interval: `(median 0.58-0.66 at 95 %, IQR …)`. */
function ratioText(report: ScenarioReport, label: string, key: keyof Ratios | RatioKey, judged = false): string {
  const [median, iqr] = medianAndIqr(report, key)
  return `${label} ${median} (${judged ? `median ${interval(report, key)} at 95 %, ` : ''}IQR ${iqr}, ${report.rounds.length} rounds)`
}

/** `0.62 (0.60-0.64)` for the summary: the interquartile range, or a judged ratio's median interval. */
function ratioCell(report: ScenarioReport, key: keyof Ratios | RatioKey, judged = false): string {
  const [median, iqr] = medianAndIqr(report, key)
  return `${median} (${judged ? interval(report, key) : iqr})`
}

export function printScenario(report: ScenarioReport): void {
  const { median: m, peakRssMb, pass, sure } = report
  const row = (name: string, side: Side | undefined, rss: number | undefined) =>
    side === undefined
      ? []
      : [[name, count(side.requestsPerSecond), String(side.p50Ms), String(side.p99Ms), rss?.toFixed(1) ?? '', side.cpuUsPerRequest.toFixed(1)]]
  const companions = companionsOf(report)
  console.log(
    [
      '',
      `${report.label}   (${report.rounds.length} rounds, ${CONNECTIONS} connections; ` +
        `other processes took ${percent(report.othersCpuShare.median)} of the CPU, up to ${percent(report.othersCpuShare.max)} in a round)`,
      table([
        ['', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB', 'CPU µs/req'],
        ...row(m.postgresJs === undefined ? 'baseline' : 'baseline (node-postgres)', m.baseline, peakRssMb.baseline),
        ...row('service', m.service, peakRssMb.service),
        ...row('floor', m.floor, peakRssMb.floor),
        ...companions.flatMap((id) => row(COMPANIONS[id].row, m[id], peakRssMb[id])),
      ]).replace(/^/gm, '  '),
      `  ${ratioText(report, 'service ÷ floor', 'serviceFloorRatio', true)}   target ${target(report)}   ${verdict(pass.throughput, sure.throughput)}`,
      `  ${ratioText(report, 'service p99 ÷ floor p99', 'serviceFloorP99Ratio', true)}   target ≤ ${P99_FACTOR}   ${verdict(pass.p99, sure.p99)}`,
      `  service peak RSS ${peakRssMb.service.toFixed(1)} MB   target ≤ floor's ${peakRssMb.floor.toFixed(1)} MB   ${verdict(pass.peakRss)}`,
      `  ${ratioText(report, 'service CPU per request ÷ floor CPU per request', 'serviceFloorCpuRatio', report.pass.cpu !== undefined)}` +
        (report.pass.cpu === undefined ? '' : `   target ${cpuTarget(report)}   ${cpuVerdict(report)}`),
      `  ${ratioText(report, 'service ÷ baseline', 'serviceBaselineRatio')}`,
      `  ${ratioText(report, 'floor ÷ baseline', 'floorBaselineRatio')}`,
      `  ${ratioText(report, 'service CPU per request ÷ baseline CPU per request', 'serviceBaselineCpuRatio')}`,
      ...companions.map((id) => `  ${ratioText(report, COMPANIONS[id].ratio, ratioKey(id))}`),
    ].join('\n'),
  )
}

function printSummary(reports: ScenarioReport[]): void {
  const companions = COMPANION_IDS.filter((id) => reports.some((r) => r.median[id] !== undefined))
  console.log(
    '\nSummary (medians over rounds; in brackets the 95 % interval of a judged median, else the interquartile range of the rounds; ' +
      'MISS? or PASS?: that interval reaches the target; judged against the floor of the same round: service req/s ÷ floor req/s, ' +
      `service p99 ≤ ${P99_FACTOR} × floor p99, service peak RSS ≤ floor peak RSS, and where a target is shown service CPU per request ÷ floor's; ` +
      "floor: Fastify with pino, prom-client and @fastify/rate-limit on the baseline's store" +
      (companions.includes('postgresJs') ? '; the baseline is node-postgres, pjs the postgres.js baseline' : '') +
      (companions.includes('pooled')
        ? '; unnamed: the service with DATABASE_PREPARED_STATEMENTS=false, pgb: the same through PgBouncer in transaction mode, each ÷ the service'
        : '') +
      ')\n' +
      table([
        [
          'scenario',
          'svc req/s',
          'floor req/s',
          'svc ÷ floor (95 %)',
          'target',
          '',
          'p99 ms svc',
          'p99 ms floor',
          'p99 svc ÷ floor (95 %)',
          `≤ ${P99_FACTOR}×`,
          'RSS MB svc',
          'RSS MB floor',
          '≤ floor',
          'base req/s',
          'base p99 ms',
          'svc ÷ base',
          'floor ÷ base',
          'CPU µs svc',
          'CPU µs floor',
          'CPU µs base',
          'CPU svc ÷ floor',
          'target',
          '',
          'CPU svc ÷ base',
          'others CPU',
          ...companions.flatMap((id) => {
            const { column, ratioColumn } = COMPANIONS[id]
            return [`${column} req/s`, `${column} p99 ms`, `${column} RSS MB`, ratioColumn]
          }),
        ],
        ...reports.map((r) => [
          r.label,
          count(r.median.service.requestsPerSecond),
          count(r.median.floor.requestsPerSecond),
          ratioCell(r, 'serviceFloorRatio', true),
          target(r),
          verdict(r.pass.throughput, r.sure.throughput),
          String(r.median.service.p99Ms),
          String(r.median.floor.p99Ms),
          ratioCell(r, 'serviceFloorP99Ratio', true),
          verdict(r.pass.p99, r.sure.p99),
          r.peakRssMb.service.toFixed(1),
          r.peakRssMb.floor.toFixed(1),
          verdict(r.pass.peakRss),
          count(r.median.baseline.requestsPerSecond),
          String(r.median.baseline.p99Ms),
          r.median.serviceBaselineRatio.toFixed(2),
          r.median.floorBaselineRatio.toFixed(2),
          r.median.service.cpuUsPerRequest.toFixed(1),
          r.median.floor.cpuUsPerRequest.toFixed(1),
          r.median.baseline.cpuUsPerRequest.toFixed(1),
          ratioCell(r, 'serviceFloorCpuRatio', r.pass.cpu !== undefined),
          cpuTarget(r),
          cpuVerdict(r),
          r.median.serviceBaselineCpuRatio.toFixed(2),
          percent(r.othersCpuShare.median),
          ...companions.flatMap((id) => [
            count(r.median[id]?.requestsPerSecond ?? Number.NaN),
            String(r.median[id]?.p99Ms ?? ''),
            r.peakRssMb[id]?.toFixed(1) ?? '',
            r.median[ratioKey(id)]?.toFixed(2) ?? '',
          ]),
        ]),
      ]),
  )
}

export function machine() {
  const cpus = os.cpus()
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    availableParallelism: os.availableParallelism(),
    totalMemoryMb: Math.round(os.totalmem() / 1e6),
    loadAverageAtStart: os.loadavg().map((value) => round(value, 2)),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  }
}

/** The commit measured, and whether src/ differed from it: results are compared by commit. */
export async function revision(): Promise<{ commit: string; srcChanged: boolean } | undefined> {
  try {
    const git = (args: string[]) => promisify(execFile)('git', args, { cwd: ROOT, timeout: 10_000 }).then(({ stdout }) => stdout.trim())
    return { commit: await git(['rev-parse', 'HEAD']), srcChanged: (await git(['status', '--porcelain', '--', 'src'])) !== '' }
  } catch {
    return undefined
  }
}

/** bench/results/<ISO timestamp><suffix>.json, the folder made if missing: the bench's and the soak's. */
export function resultFile(startedAt: Date, suffix: string): string {
  fs.mkdirSync(RESULTS_DIR, { recursive: true })
  return path.join(RESULTS_DIR, `${startedAt.toISOString().replace(/[:.]/g, '-')}${suffix}.json`)
}

/**
 * Prints the summary and writes the results JSON (everything `header` says about the run, and every
 * round); true when every target was met.
 */
export function writeReport(
  run: { engine: EngineName; mode: string; rounds: number; roundS: number; seedPets: number; startedAt: Date; header: object },
  reports: ScenarioReport[],
): boolean {
  const { startedAt } = run
  printSummary(reports)
  const peakOf = (server: keyof PerServer<number>) => Math.max(...reports.map((r) => r.peakRssMb[server] ?? Number.NaN))
  const companions = COMPANION_IDS.filter((id) => reports.some((r) => r.median[id] !== undefined))
  const peakRss: PerServer<number> = { service: peakOf('service'), baseline: peakOf('baseline'), floor: peakOf('floor') }
  for (const id of companions) peakRss[id] = peakOf(id)
  const allPass = reports.every((r) => r.pass.throughput && r.pass.p99 && r.pass.peakRss && r.pass.cpu !== false)
  const targets = {
    serviceFloorRatioAtLeast: Object.fromEntries(reports.map((r) => [r.id, r.targetFloorRatio])),
    serviceFloorP99RatioAtMost: P99_FACTOR,
    servicePeakRssAtMost: 'floor',
    serviceFloorCpuRatioAtMost: Object.fromEntries(reports.flatMap((r) => (r.targetFloorCpuRatio === undefined ? [] : [[r.id, r.targetFloorCpuRatio]]))),
  }
  const file = resultFile(startedAt, `-${run.engine}${run.mode === 'quick' ? '-quick' : ''}`)
  const unsure = reports.filter((r) => !r.sure.throughput || !r.sure.p99 || r.sure.cpu === false).length
  const verdictsSure = unsure === 0
  fs.writeFileSync(file, JSON.stringify({ ...run.header, targets, peakRssMb: peakRss, allTargetsMet: allPass, verdictsSure, scenarios: reports }, null, 2) + '\n')
  const noise = verdictsSure ? '' : `; ${unsure} of ${reports.length} scenarios within the noise of a target (PASS? or MISS?)`
  console.log(`\n${allPass ? 'ALL TARGETS MET' : 'TARGETS MISSED: see MISS above'}${noise}`)
  console.log(`Results: ${path.relative(process.cwd(), file)}`)
  return allPass
}
