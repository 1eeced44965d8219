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
import { CONNECTIONS, P99_LIMIT_MS, RSS_LIMIT_MB, type Scenario } from './scenarios.js'

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
const verdict = (pass: boolean) => (pass ? 'PASS' : 'MISS')

export interface Round {
  baseline: LoadResult
  service: LoadResult
  ratio: number
}

export interface ScenarioReport {
  id: string
  label: string
  targetRatio: number
  warmup: { baseline: LoadResult; service: LoadResult }
  rounds: Round[]
  median: {
    ratio: number
    baseline: { requestsPerSecond: number; p50Ms: number; p99Ms: number }
    service: { requestsPerSecond: number; p50Ms: number; p99Ms: number }
  }
  /** VmHWM after the scenario: the peak since the process started. */
  peakRssMb: { service: number; baseline: number }
  /** VmRSS after the scenario. */
  rssAfterMb: { service: number; baseline: number }
  pass: { ratio: boolean; p99: boolean; rss: boolean }
}

export function summarise(
  scenario: Scenario,
  warmup: ScenarioReport['warmup'],
  rounds: Round[],
  memory: Pick<ScenarioReport, 'peakRssMb' | 'rssAfterMb'>,
): ScenarioReport {
  const { peakRssMb } = memory
  const side = (which: 'baseline' | 'service') => ({
    requestsPerSecond: round(median(rounds.map((r) => r[which].requestsPerSecond)), 1),
    p50Ms: median(rounds.map((r) => r[which].latencyMs.p50)),
    p99Ms: median(rounds.map((r) => r[which].latencyMs.p99)),
  })
  const ratio = round(median(rounds.map((r) => r.ratio)), 3)
  const service = side('service')
  return {
    id: scenario.id,
    label: scenario.label,
    targetRatio: scenario.targetRatio,
    warmup,
    rounds,
    median: { ratio, baseline: side('baseline'), service },
    ...memory,
    pass: { ratio: ratio >= scenario.targetRatio, p99: service.p99Ms <= P99_LIMIT_MS, rss: peakRssMb.service <= RSS_LIMIT_MB },
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  return rows
    .map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  '))
    .join('\n')
}

export function printScenario(report: ScenarioReport): void {
  const { median: m } = report
  console.log(
    [
      '',
      `${report.label}   (${report.rounds.length} rounds, ${CONNECTIONS} connections)`,
      table([
        ['', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB'],
        ['baseline', count(m.baseline.requestsPerSecond), String(m.baseline.p50Ms), String(m.baseline.p99Ms), report.peakRssMb.baseline.toFixed(1)],
        ['service', count(m.service.requestsPerSecond), String(m.service.p50Ms), String(m.service.p99Ms), report.peakRssMb.service.toFixed(1)],
      ]).replace(/^/gm, '  '),
      `  ratio service/baseline ${m.ratio.toFixed(2)} (rounds ${report.rounds.map((r) => r.ratio.toFixed(2)).join(' ')})   target ≥ ${report.targetRatio.toFixed(2)}   ${verdict(report.pass.ratio)}`,
      `  service p99 ${m.service.p99Ms} ms   target ≤ ${P99_LIMIT_MS} ms   ${verdict(report.pass.p99)}`,
      `  service peak RSS ${report.peakRssMb.service.toFixed(1)} MB   target ≤ ${RSS_LIMIT_MB} MB   ${verdict(report.pass.rss)}`,
    ].join('\n'),
  )
}

function printSummary(reports: ScenarioReport[]): void {
  console.log(
    '\nSummary (medians over rounds; ratio = service req/s ÷ baseline req/s of the same round)\n' +
      table([
        ['scenario', 'baseline req/s', 'service req/s', 'ratio', 'target', '', 'p99 ms', '≤ 5', 'peak RSS MB', '≤ 120'],
        ...reports.map((r) => [
          r.label,
          count(r.median.baseline.requestsPerSecond),
          count(r.median.service.requestsPerSecond),
          r.median.ratio.toFixed(2),
          `≥ ${r.targetRatio.toFixed(2)}`,
          verdict(r.pass.ratio),
          String(r.median.service.p99Ms),
          verdict(r.pass.p99),
          r.peakRssMb.service.toFixed(1),
          verdict(r.pass.rss),
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
  run: { mode: string; rounds: number; roundS: number; seedPets: number; startedAt: Date; header: object },
  reports: ScenarioReport[],
): boolean {
  const { startedAt } = run
  printSummary(reports)
  const peakRss = { service: Math.max(...reports.map((r) => r.peakRssMb.service)), baseline: Math.max(...reports.map((r) => r.peakRssMb.baseline)) }
  const allPass = reports.every((r) => r.pass.ratio && r.pass.p99 && r.pass.rss)
  const files = resultFiles(startedAt, run.mode === 'quick' ? '-quick' : '')
  fs.writeFileSync(
    files.json,
    JSON.stringify({ ...run.header, targets: { p99LimitMs: P99_LIMIT_MS, rssLimitMb: RSS_LIMIT_MB }, peakRssMb: peakRss, allTargetsMet: allPass, scenarios: reports }, null, 2) + '\n',
  )
  fs.writeFileSync(
    files.svg,
    benchmarkSvg({
      title: `petstore benchmark, ${run.mode} run, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      subtitle: `${run.rounds} interleaved rounds of ${run.roundS} s per server, ${CONNECTIONS} connections, ${count(run.seedPets)} pets; ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}`,
      scenarios: reports.map((r) => ({
        label: r.label.replace(/^(GET|POST) /, '$1 ').replace('?status=available&limit=100', '?status=…&limit=100'),
        targetRatio: r.targetRatio,
        ratio: r.median.ratio,
        baseline: { requestsPerSecond: r.median.baseline.requestsPerSecond, p99Ms: r.median.baseline.p99Ms },
        service: { requestsPerSecond: r.median.service.requestsPerSecond, p99Ms: r.median.service.p99Ms },
      })),
      p99LimitMs: P99_LIMIT_MS,
      rssMb: { ...peakRss, limit: RSS_LIMIT_MB },
    }),
  )
  console.log(`\n${allPass ? 'ALL TARGETS MET' : 'TARGETS MISSED: see MISS above'}`)
  console.log(`Results: ${path.relative(process.cwd(), files.json)}\nChart:   ${path.relative(process.cwd(), files.svg)}`)
  return allPass
}
