// Hand-written SVG charts of a benchmark run, readable in any browser: no dependency, and
// the numbers are printed on the bars, so the picture never has to be measured with a ruler.

interface ScenarioBars {
  label: string
  /** None where the run sets no throughput target for the scenario. */
  targetRatio: number | undefined
  /** Median of the per-round ratios, as the tables report it. */
  ratio: number
  baseline: { requestsPerSecond: number; p99Ms: number }
  service: { requestsPerSecond: number; p99Ms: number }
}

export interface BenchmarkChart {
  title: string
  subtitle: string
  scenarios: ScenarioBars[]
  /** The service's p99 limit is this many times the baseline's. */
  p99Factor: number
  /** Peak RSS of the service and of the baseline over the whole run, and the service's limit. */
  rssMb: { service: number; baseline: number; limit: number }
}

const COLORS = { baseline: '#9aa5b1', service: '#2f6fdf', pass: '#1a7f37', miss: '#cf222e', grid: '#e1e4e8', text: '#24292f' }
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"'

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

function text(x: number, y: number, content: string, attributes = ''): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attributes}>${escapeXml(content)}</text>`
}

/** A round axis maximum above `value` whose quarters are round too. */
function niceMax(value: number): number {
  if (!(value > 0)) return 1
  const power = 10 ** Math.floor(Math.log10(value))
  return [1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10].map((step) => step * power).find((candidate) => candidate >= value) ?? 10 * power
}

const thousands = (n: number) => Math.round(n).toLocaleString('en-US')

interface Panel {
  x: number
  y: number
  width: number
  height: number
}

/** Grouped bars (baseline, service) per scenario with a y axis; `annotate` adds marks per group. */
function groupedBars(
  panel: Panel,
  title: string,
  groups: { label: string; baseline: number; service: number }[],
  format: (value: number) => string,
  axisMax: number,
  annotate: (index: number, scale: (value: number) => number, serviceX: number, barWidth: number) => string,
): string {
  const parts = [text(panel.x, panel.y - 12, title, `font-size="14" font-weight="600" fill="${COLORS.text}"`)]
  const scale = (value: number) => panel.y + panel.height - (Math.min(value, axisMax) / axisMax) * panel.height
  for (let tick = 0; tick <= 4; tick++) {
    const value = (axisMax * tick) / 4
    const y = scale(value)
    parts.push(`<line x1="${panel.x}" x2="${panel.x + panel.width}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="${COLORS.grid}"/>`)
    parts.push(text(panel.x - 6, y + 4, format(value), `font-size="11" text-anchor="end" fill="${COLORS.text}"`))
  }
  const groupWidth = panel.width / groups.length
  const barWidth = Math.min(70, groupWidth * 0.3)
  groups.forEach((group, index) => {
    const center = panel.x + groupWidth * (index + 0.5)
    const bars = [
      { value: group.baseline, x: center - barWidth - 2, color: COLORS.baseline },
      { value: group.service, x: center + 2, color: COLORS.service },
    ]
    for (const bar of bars) {
      const top = scale(bar.value)
      parts.push(
        `<rect x="${bar.x.toFixed(1)}" y="${top.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(panel.y + panel.height - top).toFixed(1)}" fill="${bar.color}"/>`,
      )
      parts.push(text(bar.x + barWidth / 2, top - 4, format(bar.value), `font-size="11" text-anchor="middle" fill="${COLORS.text}"`))
    }
    parts.push(annotate(index, scale, center + 2, barWidth))
    parts.push(text(center, panel.y + panel.height + 16, group.label, `font-size="11" text-anchor="middle" fill="${COLORS.text}"`))
  })
  return parts.join('\n')
}

function legend(x: number, y: number): string {
  return [
    `<rect x="${x}" y="${y - 10}" width="12" height="12" fill="${COLORS.baseline}"/>`,
    text(x + 16, y, 'baseline (bare node:http, in-memory array)', `font-size="12" fill="${COLORS.text}"`),
    `<rect x="${x + 290}" y="${y - 10}" width="12" height="12" fill="${COLORS.service}"/>`,
    text(x + 306, y, 'service (petstore serve, SQLite, logging at info)', `font-size="12" fill="${COLORS.text}"`),
    `<line x1="${x + 620}" x2="${x + 650}" y1="${y - 4}" y2="${y - 4}" stroke="${COLORS.miss}" stroke-width="2" stroke-dasharray="5 3"/>`,
    text(x + 656, y, 'target', `font-size="12" fill="${COLORS.text}"`),
  ].join('\n')
}

function svgDocument(width: number, height: number, body: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    ...body,
    '</svg>',
    '',
  ].join('\n')
}

/** Req/s per scenario with the ratio and where the target puts the service; p99 against its limit. */
export function benchmarkSvg(chart: BenchmarkChart): string {
  const width = 1000
  const left = 80
  const plotWidth = width - left - 30
  const groups = chart.scenarios
  const rpsMax = niceMax(Math.max(...groups.map((g) => Math.max(g.baseline.requestsPerSecond, g.service.requestsPerSecond))) * 1.15)
  const p99Max = niceMax(Math.max(...groups.map((g) => Math.max(chart.p99Factor * g.baseline.p99Ms, g.service.p99Ms))) * 1.15)
  const rssPass = chart.rssMb.service <= chart.rssMb.limit
  const throughput: Panel = { x: left, y: 120, width: plotWidth, height: 260 }
  const body = [
    text(left, 30, chart.title, `font-size="18" font-weight="700" fill="${COLORS.text}"`),
    text(left, 50, chart.subtitle, `font-size="12" fill="${COLORS.text}"`),
    legend(left, 76),
    groupedBars(
      throughput,
      'Throughput, req/s (median of rounds; higher is better)',
      groups.map((g) => ({ label: g.label, baseline: g.baseline.requestsPerSecond, service: g.service.requestsPerSecond })),
      thousands,
      rpsMax,
      (index, scale, serviceX, barWidth) => {
        const g = groups[index]
        if (g?.targetRatio === undefined) return ''
        // The target as a height: the req/s the service needs next to this baseline.
        const y = scale(g.targetRatio * g.baseline.requestsPerSecond)
        const pass = g.ratio >= g.targetRatio
        return [
          `<line x1="${(serviceX - 6).toFixed(1)}" x2="${(serviceX + barWidth + 6).toFixed(1)}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="${COLORS.miss}" stroke-width="2" stroke-dasharray="5 3"/>`,
          text(
            serviceX - 2,
            // Under the scenario's name, where it cannot collide with a neighbour's bars.
            throughput.y + throughput.height + 34,
            `ratio ${g.ratio.toFixed(2)}, target ≥ ${g.targetRatio.toFixed(2)}: ${pass ? 'PASS' : 'MISS'}`,
            `font-size="12" font-weight="600" text-anchor="middle" fill="${pass ? COLORS.pass : COLORS.miss}"`,
          ),
        ].join('\n')
      },
    ),
    groupedBars(
      { x: left, y: 480, width: plotWidth, height: 180 },
      `Latency p99, ms (median of rounds; limit ${chart.p99Factor} × the baseline's for the service; lower is better)`,
      groups.map((g) => ({ label: g.label, baseline: g.baseline.p99Ms, service: g.service.p99Ms })),
      (value) => (value >= 10 ? String(Math.round(value)) : value.toFixed(1).replace(/\.0$/, '')),
      p99Max,
      (index, scale, serviceX, barWidth) => {
        const g = groups[index]
        if (g === undefined) return ''
        const y = scale(chart.p99Factor * g.baseline.p99Ms)
        return `<line x1="${(serviceX - 6).toFixed(1)}" x2="${(serviceX + barWidth + 6).toFixed(1)}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="${COLORS.miss}" stroke-width="2" stroke-dasharray="5 3"/>`
      },
    ),
    text(
      left,
      715,
      `Peak RSS (VmHWM): service ${chart.rssMb.service.toFixed(1)} MB (limit ${chart.rssMb.limit} MB, ${rssPass ? 'PASS' : 'MISS'}), baseline ${chart.rssMb.baseline.toFixed(1)} MB`,
      `font-size="13" font-weight="600" fill="${rssPass ? COLORS.pass : COLORS.miss}"`,
    ),
  ]
  return svgDocument(width, 735, body)
}
