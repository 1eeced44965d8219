// The benchmark's report: medians over rounds, the verdicts against the targets, the tables on the
// terminal, and the results JSON under bench/results/ (ignored by git; see bench/README.md).
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { ROOT, round } from '../scripts/petstore-process.js'
import type { LoadResult } from './load.js'
import { CONNECTIONS, P99_FACTOR, RSS_LIMIT_MB, type Scenario } from './scenarios.js'

const RESULTS_DIR = path.join(import.meta.dirname, 'results')

/** /proc reports KiB; the limit is read as 120 × 10^6 bytes, the stricter reading. */
export const megabytes = (kb: number) => round((kb * 1024) / 1e6, 1)

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  if (sorted.length === 0) return Number.NaN
  return sorted.length % 2 === 1 ? (sorted[middle] ?? Number.NaN) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
export const count = (n: number) => Math.round(n).toLocaleString('en-US')
const verdict = (pass: boolean | undefined) => (pass === undefined ? '–' : pass ? 'PASS' : 'MISS')

export type EngineName = 'sqlite' | 'postgres'

/**
 * Servers measured in every round after the service, reported next to the baseline: on PostgreSQL the
 * postgres.js baseline (for the driver choice), on both engines the floor (Fastify with the mandated
 * libraries on the baseline's store: what those libraries cost by themselves). The targets never involve them.
 */
export type CompanionId = 'postgresJs' | 'floor'

interface CompanionSpec {
  /** In progress lines, failure messages and the names of the pets it creates. */
  name: string
  /** Its row in a scenario's table. */
  row: string
  /** Its columns in the summary. */
  column: string
  /** What its ratio (its req/s ÷ the baseline's of the same round) says, in full and in the summary. */
  ratio: string
  ratioColumn: string
  /** Also reported: service req/s ÷ its req/s of the same round, in full and in the summary. */
  serviceRatio?: { label: string; column: string }
}

export const COMPANIONS: Record<CompanionId, CompanionSpec> = {
  postgresJs: {
    name: 'postgres.js',
    row: 'baseline (postgres.js)',
    column: 'pjs',
    ratio: 'postgres.js ÷ node-postgres',
    ratioColumn: 'pjs ÷ pg',
  },
  floor: {
    name: 'floor',
    row: 'floor',
    column: 'floor',
    ratio: 'floor ÷ baseline',
    ratioColumn: 'floor ÷ base',
    serviceRatio: { label: 'service ÷ floor', column: 'svc ÷ floor' },
  },
}

const COMPANION_IDS = Object.keys(COMPANIONS) as CompanionId[]

type RatioKey = `${CompanionId}Ratio`
type ServiceRatioKey = `service${Capitalize<CompanionId>}Ratio`
/** Where a companion's ratios are kept in rounds and medians: `floorRatio`, `serviceFloorRatio`. */
export const ratioKey = (id: CompanionId): RatioKey => `${id}Ratio`
export const serviceRatioKey = (id: CompanionId) => `service${id.charAt(0).toUpperCase()}${id.slice(1)}Ratio` as ServiceRatioKey

/** Per server, as in the rounds: a companion only in the runs that measure it. */
export type PerServer<T> = { baseline: T; service: T } & { [K in CompanionId]?: T }

/** A companion's ratios: its req/s ÷ the baseline's, and where its spec asks, the service's ÷ its. */
type CompanionRatios = { [K in RatioKey | ServiceRatioKey]?: number }

export type Round = PerServer<LoadResult> &
  CompanionRatios & {
    /** Service req/s ÷ baseline req/s. */
    ratio: number
  }

interface Side {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
}

export interface ScenarioReport {
  id: string
  label: string
  /** None where the issue sets none for this engine. */
  targetRatio: number | undefined
  warmup: PerServer<LoadResult>
  rounds: Round[]
  median: PerServer<Side> &
    CompanionRatios & {
      ratio: number
      /** Service p99 ÷ baseline p99 of the same round, median over rounds. */
      p99Ratio: number
    }
  /** VmHWM after the scenario: the peak since the process started. */
  peakRssMb: PerServer<number>
  /** VmRSS after the scenario. */
  rssAfterMb: PerServer<number>
  /** `ratio` is undefined where there is no target. */
  pass: { ratio: boolean | undefined; p99: boolean; rss: boolean }
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
  })
  const ratio = round(median(rounds.map((r) => r.ratio)), 3)
  const p99Ratio = round(median(rounds.map((r) => r.service.latencyMs.p99 / r.baseline.latencyMs.p99)), 2)
  const targetRatio = scenario.targetRatio[engine]
  const medians: ScenarioReport['median'] = {
    ratio,
    p99Ratio,
    baseline: side(rounds.map((r) => r.baseline)),
    service: side(rounds.map((r) => r.service)),
  }
  for (const id of COMPANION_IDS) {
    const results = rounds.flatMap((r) => r[id] ?? [])
    if (results.length === 0) continue
    medians[id] = side(results)
    for (const key of [ratioKey(id), serviceRatioKey(id)]) {
      const ratios = rounds.flatMap((r) => r[key] ?? [])
      if (ratios.length > 0) medians[key] = round(median(ratios), 3)
    }
  }
  return {
    id: scenario.id,
    label: scenario.label,
    targetRatio,
    warmup,
    rounds,
    median: medians,
    ...memory,
    pass: {
      ratio: targetRatio === undefined ? undefined : ratio >= targetRatio,
      p99: p99Ratio <= P99_FACTOR,
      rss: peakRssMb.service <= RSS_LIMIT_MB,
    },
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows
    .map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  '))
    .join('\n')
}

const target = (report: ScenarioReport) => (report.targetRatio === undefined ? 'none' : `≥ ${report.targetRatio.toFixed(2)}`)

/** `label 0.62 (rounds 0.60 0.64)`, or nothing when the rounds have no such ratio. */
function ratioLine(report: ScenarioReport, label: string, key: RatioKey | ServiceRatioKey): string[] {
  const value = report.median[key]
  return value === undefined ? [] : [`  ${label} ${value.toFixed(2)} (rounds ${report.rounds.map((r) => r[key]?.toFixed(2) ?? '?').join(' ')})`]
}

export function printScenario(report: ScenarioReport): void {
  const { median: m } = report
  const row = (name: string, side: Side | undefined, rss: number | undefined) =>
    side === undefined ? [] : [[name, count(side.requestsPerSecond), String(side.p50Ms), String(side.p99Ms), rss?.toFixed(1) ?? '']]
  const companions = companionsOf(report)
  console.log(
    [
      '',
      `${report.label}   (${report.rounds.length} rounds, ${CONNECTIONS} connections)`,
      table([
        ['', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'],
        ...row(m.postgresJs === undefined ? 'baseline' : 'baseline (node-postgres)', m.baseline, report.peakRssMb.baseline),
        ...row('service', m.service, report.peakRssMb.service),
        ...companions.flatMap((id) => row(COMPANIONS[id].row, m[id], report.peakRssMb[id])),
      ]).replace(/^/gm, '  '),
      `  ratio service/baseline ${m.ratio.toFixed(2)} (rounds ${report.rounds.map((r) => r.ratio.toFixed(2)).join(' ')})   target ${target(report)}   ${verdict(report.pass.ratio)}`,
      `  service p99 ÷ baseline p99 ${m.p99Ratio.toFixed(2)}   target ≤ ${P99_FACTOR}   ${verdict(report.pass.p99)}`,
      `  service peak RSS ${report.peakRssMb.service.toFixed(1)} MB   target ≤ ${RSS_LIMIT_MB} MB   ${verdict(report.pass.rss)}`,
      ...companions.flatMap((id) => {
        const { ratio, serviceRatio } = COMPANIONS[id]
        return [...ratioLine(report, ratio, ratioKey(id)), ...(serviceRatio === undefined ? [] : ratioLine(report, serviceRatio.label, serviceRatioKey(id)))]
      }),
    ].join('\n'),
  )
}

function printSummary(reports: ScenarioReport[]): void {
  const companions = COMPANION_IDS.filter((id) => reports.some((r) => r.median[id] !== undefined))
  const notes = companions.map((id) =>
    id === 'postgresJs'
      ? 'the baseline is node-postgres, pjs the postgres.js baseline'
      : "floor: Fastify with pino, prom-client and @fastify/rate-limit on the baseline's store",
  )
  console.log(
    '\nSummary (medians over rounds; ratio = service req/s ÷ baseline req/s of the same round' +
      notes.map((note) => `; ${note}`).join('') +
      ')\n' +
      table([
        [
          'scenario',
          'baseline req/s',
          'service req/s',
          'ratio',
          'target',
          '',
          'p99 ms base',
          'p99 ms svc',
          `≤ ${P99_FACTOR}×`,
          'peak RSS MB',
          `≤ ${RSS_LIMIT_MB}`,
          ...companions.flatMap((id) => {
            const { column, ratioColumn, serviceRatio } = COMPANIONS[id]
            return [`${column} req/s`, `${column} p99 ms`, `${column} RSS MB`, ratioColumn, ...(serviceRatio === undefined ? [] : [serviceRatio.column])]
          }),
        ],
        ...reports.map((r) => [
          r.label,
          count(r.median.baseline.requestsPerSecond),
          count(r.median.service.requestsPerSecond),
          r.median.ratio.toFixed(2),
          target(r),
          verdict(r.pass.ratio),
          String(r.median.baseline.p99Ms),
          String(r.median.service.p99Ms),
          verdict(r.pass.p99),
          r.peakRssMb.service.toFixed(1),
          verdict(r.pass.rss),
          ...companions.flatMap((id) => [
            count(r.median[id]?.requestsPerSecond ?? Number.NaN),
            String(r.median[id]?.p99Ms ?? ''),
            r.peakRssMb[id]?.toFixed(1) ?? '',
            r.median[ratioKey(id)]?.toFixed(2) ?? '',
            ...(COMPANIONS[id].serviceRatio === undefined ? [] : [r.median[serviceRatioKey(id)]?.toFixed(2) ?? '']),
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

function resultFile(startedAt: Date, suffix: string): string {
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
  const peakRss: PerServer<number> = { service: peakOf('service'), baseline: peakOf('baseline') }
  for (const id of companions) peakRss[id] = peakOf(id)
  const allPass = reports.every((r) => r.pass.ratio !== false && r.pass.p99 && r.pass.rss)
  const file = resultFile(startedAt, `-${run.engine}${run.mode === 'quick' ? '-quick' : ''}`)
  fs.writeFileSync(
    file,
    JSON.stringify({ ...run.header, targets: { p99Factor: P99_FACTOR, rssLimitMb: RSS_LIMIT_MB }, peakRssMb: peakRss, allTargetsMet: allPass, scenarios: reports }, null, 2) + '\n',
  )
  console.log(`\n${allPass ? 'ALL TARGETS MET' : 'TARGETS MISSED: see MISS above'}`)
  console.log(`Results: ${path.relative(process.cwd(), file)}`)
  return allPass
}
