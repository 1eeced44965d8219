// The benchmark's report: medians over rounds, the verdicts against the targets, the tables on the
// terminal, and the results JSON and SVG chart under bench/results/.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { ROOT, round } from '../scripts/petstore-process.js'
import { benchmarkSvg } from './chart.js'
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

export interface Round {
  baseline: LoadResult
  service: LoadResult
  /** Service req/s ÷ baseline req/s. */
  ratio: number
  /** PostgreSQL runs: the postgres.js baseline, and its req/s ÷ the node-postgres baseline's. */
  postgresJs?: LoadResult
  postgresJsRatio?: number
}

interface Side {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
}

/** Per server, as in the rounds: the postgres.js baseline on PostgreSQL runs only. */
interface PerServer<T> {
  baseline: T
  service: T
  postgresJs?: T
}

export interface ScenarioReport {
  id: string
  label: string
  /** None where the issue sets none for this engine. */
  targetRatio: number | undefined
  warmup: PerServer<LoadResult>
  rounds: Round[]
  median: PerServer<Side> & {
    ratio: number
    /** Service p99 ÷ baseline p99 of the same round, median over rounds. */
    p99Ratio: number
    postgresJsRatio?: number
  }
  /** VmHWM after the scenario: the peak since the process started. */
  peakRssMb: PerServer<number>
  /** VmRSS after the scenario. */
  rssAfterMb: PerServer<number>
  /** `ratio` is undefined where there is no target. */
  pass: { ratio: boolean | undefined; p99: boolean; rss: boolean }
}

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
  const postgresJs = rounds.flatMap((r) => (r.postgresJs === undefined ? [] : [r.postgresJs]))
  const postgresJsRatios = rounds.flatMap((r) => (r.postgresJsRatio === undefined ? [] : [r.postgresJsRatio]))
  return {
    id: scenario.id,
    label: scenario.label,
    targetRatio,
    warmup,
    rounds,
    median: {
      ratio,
      p99Ratio,
      baseline: side(rounds.map((r) => r.baseline)),
      service: side(rounds.map((r) => r.service)),
      ...(postgresJs.length === 0 ? {} : { postgresJs: side(postgresJs), postgresJsRatio: round(median(postgresJsRatios), 3) }),
    },
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

export function printScenario(report: ScenarioReport): void {
  const { median: m } = report
  const row = (name: string, side: Side | undefined, rss: number | undefined) =>
    side === undefined ? [] : [[name, count(side.requestsPerSecond), String(side.p50Ms), String(side.p99Ms), rss?.toFixed(1) ?? '']]
  console.log(
    [
      '',
      `${report.label}   (${report.rounds.length} rounds, ${CONNECTIONS} connections)`,
      table([
        ['', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'],
        ...row(m.postgresJs === undefined ? 'baseline' : 'baseline (node-postgres)', m.baseline, report.peakRssMb.baseline),
        ...row('service', m.service, report.peakRssMb.service),
        ...row('baseline (postgres.js)', m.postgresJs, report.peakRssMb.postgresJs),
      ]).replace(/^/gm, '  '),
      `  ratio service/baseline ${m.ratio.toFixed(2)} (rounds ${report.rounds.map((r) => r.ratio.toFixed(2)).join(' ')})   target ${target(report)}   ${verdict(report.pass.ratio)}`,
      `  service p99 ÷ baseline p99 ${m.p99Ratio.toFixed(2)}   target ≤ ${P99_FACTOR}   ${verdict(report.pass.p99)}`,
      `  service peak RSS ${report.peakRssMb.service.toFixed(1)} MB   target ≤ ${RSS_LIMIT_MB} MB   ${verdict(report.pass.rss)}`,
      ...(m.postgresJsRatio === undefined
        ? []
        : [`  postgres.js ÷ node-postgres ${m.postgresJsRatio.toFixed(2)} (rounds ${report.rounds.map((r) => r.postgresJsRatio?.toFixed(2) ?? '?').join(' ')})`]),
    ].join('\n'),
  )
}

function printSummary(reports: ScenarioReport[]): void {
  const withPostgresJs = reports.some((r) => r.median.postgresJs !== undefined)
  console.log(
    '\nSummary (medians over rounds; ratio = service req/s ÷ baseline req/s of the same round' +
      (withPostgresJs ? '; the baseline is node-postgres, pjs the postgres.js baseline' : '') +
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
          ...(withPostgresJs ? ['pjs req/s', 'pjs p99 ms', 'pjs ÷ pg'] : []),
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
          ...(withPostgresJs
            ? [count(r.median.postgresJs?.requestsPerSecond ?? Number.NaN), String(r.median.postgresJs?.p99Ms ?? ''), r.median.postgresJsRatio?.toFixed(2) ?? '']
            : []),
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

function resultFiles(startedAt: Date, suffix: string): { json: string; svg: string } {
  fs.mkdirSync(RESULTS_DIR, { recursive: true })
  const stem = path.join(RESULTS_DIR, `${startedAt.toISOString().replace(/[:.]/g, '-')}${suffix}`)
  return { json: `${stem}.json`, svg: `${stem}.svg` }
}


/**
 * Prints the summary, writes the results JSON (everything `header` says about the run, and every round)
 * and the chart; true when every target was met.
 */
export function writeReport(
  run: { engine: EngineName; mode: string; rounds: number; roundS: number; seedPets: number; startedAt: Date; header: object },
  reports: ScenarioReport[],
): boolean {
  const { startedAt } = run
  printSummary(reports)
  const peakRss = { service: Math.max(...reports.map((r) => r.peakRssMb.service)), baseline: Math.max(...reports.map((r) => r.peakRssMb.baseline)) }
  const allPass = reports.every((r) => r.pass.ratio !== false && r.pass.p99 && r.pass.rss)
  const files = resultFiles(startedAt, `-${run.engine}${run.mode === 'quick' ? '-quick' : ''}`)
  fs.writeFileSync(
    files.json,
    JSON.stringify({ ...run.header, targets: { p99Factor: P99_FACTOR, rssLimitMb: RSS_LIMIT_MB }, peakRssMb: peakRss, allTargetsMet: allPass, scenarios: reports }, null, 2) + '\n',
  )
  fs.writeFileSync(
    files.svg,
    benchmarkSvg({
      title: `petstore benchmark on ${run.engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${run.mode} run, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      subtitle: `${run.rounds} interleaved rounds of ${run.roundS} s per server, ${CONNECTIONS} connections, ${count(run.seedPets)} pets; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
      scenarios: reports.map((r) => ({
        label: r.label.replace(/^(GET|POST) /, '$1 ').replace('?status=available&limit=100', '?status=…&limit=100'),
        targetRatio: r.targetRatio,
        ratio: r.median.ratio,
        baseline: { requestsPerSecond: r.median.baseline.requestsPerSecond, p99Ms: r.median.baseline.p99Ms },
        service: { requestsPerSecond: r.median.service.requestsPerSecond, p99Ms: r.median.service.p99Ms },
      })),
      p99Factor: P99_FACTOR,
      rssMb: { ...peakRss, limit: RSS_LIMIT_MB },
    }),
  )
  console.log(`\n${allPass ? 'ALL TARGETS MET' : 'TARGETS MISSED: see MISS above'}`)
  console.log(`Results: ${path.relative(process.cwd(), files.json)}\nChart:   ${path.relative(process.cwd(), files.svg)}`)
  return allPass
}
