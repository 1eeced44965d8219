// Hand-written SVG charts of a benchmark run, readable in any browser: no dependency, and
// the numbers are printed on the bars, so the picture never has to be measured with a ruler.

interface Bar {
  requestsPerSecond: number
  p99Ms: number
}

interface ScenarioBars {
  label: string
  /** None where the run sets no throughput target for the scenario. */
  targetRatio: number | undefined
  /** Median of the per-round ratios, as the tables report it. */
  ratio: number
  baseline: Bar
  service: Bar
  /** The other servers of the run, in the order of the chart's `companions`. */
  companions: Bar[]
  /** Their ratios, printed under the group: e.g. `floor ÷ base 0.62`. */
  notes: string[]
}

export interface BenchmarkChart {
  title: string
  subtitle: string
  /** What the baseline, the service and each companion are, for the legend. */
  legend: { baseline: string; service: string; companions: string[] }
  scenarios: ScenarioBars[]
  /** The service's p99 limit is this many times the baseline's. */
  p99Factor: number
  /** Peak RSS of each server over the whole run, and the service's limit. */
  rssMb: { service: number; baseline: number; companions: { name: string; mb: number }[]; limit: number }
}

const COLORS = { baseline: '#9aa5b1', service: '#2f6fdf', pass: '#1a7f37', miss: '#cf222e', grid: '#e1e4e8', text: '#24292f' }
/** The companions' bars, in turn. */
const COMPANION_COLORS = ['#e0923a', '#8250df']
const companionColor = (index: number) => COMPANION_COLORS[index % COMPANION_COLORS.length] ?? COLORS.baseline
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

/** Grouped bars (baseline, service, companions) per scenario with a y axis; `annotate` adds marks per group. */
function groupedBars(
  panel: Panel,
  title: string,
  groups: { label: string; values: number[] }[],
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
  const barsPerGroup = Math.max(1, ...groups.map((group) => group.values.length))
  const barWidth = Math.min(70, (groupWidth * 0.66) / barsPerGroup)
  const colors = [COLORS.baseline, COLORS.service, ...Array.from({ length: barsPerGroup - 2 }, (_, index) => companionColor(index))]
  groups.forEach((group, index) => {
    const center = panel.x + groupWidth * (index + 0.5)
    const left = center - (barsPerGroup * (barWidth + 4)) / 2 + 2
    const bars = group.values.map((value, bar) => ({ value, x: left + bar * (barWidth + 4), color: colors[bar] ?? COLORS.baseline }))
    for (const bar of bars) {
      const top = scale(bar.value)
      parts.push(
        `<rect x="${bar.x.toFixed(1)}" y="${top.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(panel.y + panel.height - top).toFixed(1)}" fill="${bar.color}"/>`,
      )
      parts.push(text(bar.x + barWidth / 2, top - 4, format(bar.value), `font-size="11" text-anchor="middle" fill="${COLORS.text}"`))
    }
    parts.push(annotate(index, scale, left + barWidth + 4, barWidth))
    parts.push(text(center, panel.y + panel.height + 16, group.label, `font-size="11" text-anchor="middle" fill="${COLORS.text}"`))
  })
  return parts.join('\n')
}

/**
 * One entry per server, then the target's dashes; entries wrap onto another line past `width`. `height`:
 * how far below `y` the last line is.
 */
function legend(x: number, y: number, width: number, entries: { label: string; color: string }[]): { svg: string; height: number } {
  const parts: string[] = []
  let at = x
  let line = y
  // About 6.5 px per character at 12 px: close enough to keep entries apart.
  const place = (label: string) => {
    const needed = 16 + label.length * 6.5 + 24
    if (at + needed > x + width && at > x) {
      at = x
      line += 18
    }
    const start = at
    at += needed
    return start
  }
  for (const entry of entries) {
    const start = place(entry.label)
    parts.push(`<rect x="${start.toFixed(1)}" y="${line - 10}" width="12" height="12" fill="${entry.color}"/>`)
    parts.push(text(start + 16, line, entry.label, `font-size="12" fill="${COLORS.text}"`))
  }
  const start = place('target') + 20
  parts.push(`<line x1="${(start - 20).toFixed(1)}" x2="${(start + 10).toFixed(1)}" y1="${line - 4}" y2="${line - 4}" stroke="${COLORS.miss}" stroke-width="2" stroke-dasharray="5 3"/>`)
  parts.push(text(start + 16, line, 'target', `font-size="12" fill="${COLORS.text}"`))
  return { svg: parts.join('\n'), height: line - y }
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
  const bars = (g: ScenarioBars) => [g.baseline, g.service, ...g.companions]
  const rpsMax = niceMax(Math.max(...groups.flatMap((g) => bars(g).map((bar) => bar.requestsPerSecond))) * 1.15)
  const p99Max = niceMax(Math.max(...groups.flatMap((g) => [chart.p99Factor * g.baseline.p99Ms, ...bars(g).map((bar) => bar.p99Ms)])) * 1.15)
  const rssPass = chart.rssMb.service <= chart.rssMb.limit
  const key = legend(left, 76, plotWidth, [
    { label: chart.legend.baseline, color: COLORS.baseline },
    { label: chart.legend.service, color: COLORS.service },
    ...chart.legend.companions.map((label, index) => ({ label, color: companionColor(index) })),
  ])
  // Everything below the legend moves down by its extra lines.
  const top = key.height
  const throughput: Panel = { x: left, y: 120 + top, width: plotWidth, height: 260 }
  const body = [
    text(left, 30, chart.title, `font-size="18" font-weight="700" fill="${COLORS.text}"`),
    text(left, 50, chart.subtitle, `font-size="12" fill="${COLORS.text}"`),
    key.svg,
    groupedBars(
      throughput,
      'Throughput, req/s (median of rounds; higher is better)',
      groups.map((g) => ({ label: g.label, values: bars(g).map((bar) => bar.requestsPerSecond) })),
      thousands,
      rpsMax,
      (index, scale, serviceX, barWidth) => {
        const g = groups[index]
        if (g === undefined) return ''
        // Under the scenario's name, where they cannot collide with a neighbour's bars.
        const under = throughput.y + throughput.height + 34
        const center = throughput.x + (throughput.width / groups.length) * (index + 0.5)
        const notes = g.notes.map((note, line) => text(center, under + 16 + 15 * line, note, `font-size="11" text-anchor="middle" fill="${COLORS.text}"`))
        if (g.targetRatio === undefined) return notes.join('\n')
        // The target as a height: the req/s the service needs next to this baseline.
        const y = scale(g.targetRatio * g.baseline.requestsPerSecond)
        const pass = g.ratio >= g.targetRatio
        return [
          `<line x1="${(serviceX - 6).toFixed(1)}" x2="${(serviceX + barWidth + 6).toFixed(1)}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="${COLORS.miss}" stroke-width="2" stroke-dasharray="5 3"/>`,
          text(
            center,
            under,
            `ratio ${g.ratio.toFixed(2)}, target ≥ ${g.targetRatio.toFixed(2)}: ${pass ? 'PASS' : 'MISS'}`,
            `font-size="12" font-weight="600" text-anchor="middle" fill="${pass ? COLORS.pass : COLORS.miss}"`,
          ),
          ...notes,
        ].join('\n')
      },
    ),
    groupedBars(
      { x: left, y: 480 + top, width: plotWidth, height: 180 },
      `Latency p99, ms (median of rounds; limit ${chart.p99Factor} × the baseline's for the service; lower is better)`,
      groups.map((g) => ({ label: g.label, values: bars(g).map((bar) => bar.p99Ms) })),
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
      715 + top,
      `Peak RSS (VmHWM): service ${chart.rssMb.service.toFixed(1)} MB (limit ${chart.rssMb.limit} MB, ${rssPass ? 'PASS' : 'MISS'}), baseline ${chart.rssMb.baseline.toFixed(1)} MB` +
        chart.rssMb.companions.map(({ name, mb }) => `, ${name} ${mb.toFixed(1)} MB`).join(''),
      `font-size="13" font-weight="600" fill="${rssPass ? COLORS.pass : COLORS.miss}"`,
    ),
  ]
  return svgDocument(width, 735 + top, body)
}
