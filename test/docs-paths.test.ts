import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

// The documents name the repository's files, and a file that moves or goes leaves them pointing at nothing:
// a reader then looks for a test, a script or a guide that is not there. This file holds every document to
// the tree as it is: each path cited under the folders below exists, each link resolves, each anchor names a
// heading of its file, and no guide grows past what one reader takes in. It reads files only.

// Not helper.ts's ROOT: that module loads the whole app, and nothing here needs it.
const ROOT = path.resolve(import.meta.dirname, '..')

/** The folders whose paths the documents cite; a path under any other (`/etc`, `./data`) is the reader's. */
const CITED_FOLDERS = ['src', 'test', 'scripts', 'bench', 'ops', 'docs', 'clients']

/** The largest a guide under docs/ may be: past it, a guide is two readers' and should be split. */
const GUIDE_MAX_BYTES = 32 * 1024

/** `dir`'s markdown files, any depth, as paths from the root with `/`. */
function markdownUnder(dir: string): string[] {
  if (!fs.existsSync(path.join(ROOT, dir))) return []
  return fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.md'))
    .map((file) => `${dir}/${file.split(path.sep).join('/')}`)
    .sort()
}

/** The documents held to the tree: the README, the guides, the ADRs and the spec, the benchmark's and the client's READMEs, ops' notes. */
const DOCUMENTS = ['README.md', ...markdownUnder('docs'), 'bench/README.md', 'clients/typescript/README.md', ...markdownUnder('ops')]

/** The guides: docs/*.md, not the ADRs nor the spec. */
const GUIDES = DOCUMENTS.filter((file) => /^docs\/[^/]+\.md$/.test(file))

/**
 * A path under one of CITED_FOLDERS, at the start of a word: `test/run.ts` in `node --import tsx test/run.ts`,
 * but not the `docs` of `http://localhost:8080/docs`, nor a path in git's history (`git show df18f44:bench/FINDINGS.md`).
 */
const CITED_PATH = new RegExp(String.raw`(?<![\w./@~:-])(?:${CITED_FOLDERS.join('|')})/[^\s\`'"()[\],;|]*`, 'g')

/** A glob (`test/**\/*.test.ts`) or a placeholder (`bench/results/<name>.json`, `src/…`) stands for paths; it cites none. */
const PATTERN = /[*?<>{}$…]|\.\.\./

/**
 * The folders .gitignore names (`dist/`, `test/artifacts/`): what a build or a test run makes, absent from a
 * fresh checkout, so a path under one is cited as output and not held to the tree.
 */
const IGNORED_FOLDERS = fs
  .readFileSync(path.join(ROOT, '.gitignore'), 'utf8')
  .split('\n')
  .filter((line) => /^[^#!*?[]+\/$/.test(line.trim()))
  .map((line) => line.trim().replace(/^\//, ''))

/** Whether `cited` is under a folder .gitignore names: `dist/` at any depth, `test/artifacts/` from the root. */
function isOutput(cited: string): boolean {
  return IGNORED_FOLDERS.some((folder) => (folder.slice(0, -1).includes('/') ? `${cited}/`.startsWith(folder) : `/${cited}/`.includes(`/${folder}`)))
}

interface Line {
  file: string
  number: number
  text: string
  /** Inside a fenced code block: its text is code throughout, with no inline markup or link. */
  fenced: boolean
}

/** Each line of `file`, knowing whether it is inside a fenced code block. */
function linesOf(file: string): Line[] {
  let fence: string | undefined
  return fs
    .readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .map((text, index) => {
      const marker = /^ {0,3}(`{3,}|~{3,})/.exec(text)?.[1]
      const opensOrCloses = marker !== undefined && (fence === undefined || (marker[0] === fence[0] && marker.length >= fence.length))
      const fenced = fence !== undefined || opensOrCloses
      if (opensOrCloses) fence = fence === undefined ? marker : undefined
      return { file, number: index + 1, text, fenced }
    })
}

/** A line's text without its link targets, which the link check resolves from the document's folder. */
function textOf(line: Line): string {
  return line.fenced ? line.text : line.text.replace(/\]\([^)]*\)/g, ']')
}

/** The link targets of a line outside fenced blocks (inline code is text, not links). */
function linksOf(line: Line): string[] {
  if (line.fenced) return []
  const prose = line.text.replace(/(`+).+?\1/g, '')
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?/g), ...prose.matchAll(/^\s*\[[^\]]+\]:\s*<?([^\s>]+)/g)].map((match) => match[1] ?? '')
}

/** The folder of the package `file` belongs to: a path it cites is read from there (clients/typescript's `src/`) or from the root. */
function packageRootOf(file: string): string {
  for (let dir = path.dirname(path.join(ROOT, file)); dir.startsWith(ROOT); dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir
  }
  return ROOT
}

/** Plain text of a heading as GitHub renders it: code, links, images and HTML reduced to their text. */
function headingText(markdown: string): string {
  return markdown
    .replace(/\s+#+\s*$/, '')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '')
}

/**
 * The anchors GitHub gives `file`'s headings (github-slugger: lower case, every character but letters, digits,
 * marks, `_`, `-` and spaces removed, each space a `-`; a repeated slug gets `-1`, `-2`, …), and the ids and
 * names of its HTML anchors.
 */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>()
  for (const line of linesOf(file)) {
    for (const match of line.text.matchAll(/<a\s[^>]*\b(?:id|name)="([^"]+)"/g)) anchors.add(match[1] ?? '')
    const heading = line.fenced ? undefined : /^ {0,3}#{1,6}\s+(.*)$/.exec(line.text)?.[1]
    if (heading === undefined) continue
    const slug = headingText(heading)
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-')
    let unique = slug
    for (let n = 1; anchors.has(unique); n++) unique = `${slug}-${n}`
    anchors.add(unique)
  }
  return anchors
}

const LINES = DOCUMENTS.flatMap(linesOf)

describe('the documents', () => {
  it('cite only paths that exist under src/, test/, scripts/, bench/, ops/, docs/ and clients/, in code or in prose', () => {
    const misses: string[] = []
    let cited = 0
    for (const line of LINES) {
      for (const [token] of textOf(line).matchAll(CITED_PATH)) {
        if (PATTERN.test(token)) continue
        // `test/run.ts:12` and `docs/api.md#errors` cite test/run.ts and docs/api.md; a sentence's full stop is not part of a path.
        const cite = token.replace(/#.*$/, '').replace(/(?::\d+)+:?$|[.:]+$/, '')
        if (isOutput(cite)) continue
        cited++
        const exists = [packageRootOf(line.file), ROOT].some((root) => fs.existsSync(path.join(root, cite)))
        if (!exists) misses.push(`${line.file}:${line.number}: ${cite}`)
      }
    }
    assert.ok(cited > 100, `only ${cited} paths found: the pattern is broken`)
    assert.equal(misses.length, 0, `${misses.length} paths cited that do not exist:\n${misses.join('\n')}`)
  })

  it('link only to files that exist, and through an #anchor only to a heading of the file linked', () => {
    const misses: string[] = []
    const anchors = new Map<string, Set<string>>()
    let linked = 0
    for (const line of LINES) {
      for (const link of linksOf(line)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue
        linked++
        const [target = '', anchor] = decodeURI(link).split('#')
        // GitHub reads a link from the document's folder, and one that starts with `/` from the repository's root.
        const fromRoot = target.startsWith('/') ? target.slice(1) : path.posix.join(path.posix.dirname(line.file), target)
        const resolved = target === '' ? line.file : path.posix.normalize(fromRoot)
        if (!fs.existsSync(path.join(ROOT, resolved))) {
          misses.push(`${line.file}:${line.number}: ${link}: no ${resolved}`)
        } else if (anchor !== undefined && resolved.endsWith('.md')) {
          const known = anchors.get(resolved) ?? anchorsOf(resolved)
          anchors.set(resolved, known)
          if (!known.has(anchor)) misses.push(`${line.file}:${line.number}: ${link}: no heading "${anchor}" in ${resolved}`)
        }
      }
    }
    assert.ok(linked > 100, `only ${linked} links found: the pattern is broken`)
    assert.equal(misses.length, 0, `${misses.length} links that lead nowhere:\n${misses.join('\n')}`)
  })

  it(`keep each guide under docs/ within ${GUIDE_MAX_BYTES / 1024} KB`, () => {
    assert.ok(GUIDES.length >= 4, `only ${GUIDES.length} guides found under docs/`)
    const over = GUIDES.map((file) => ({ file, bytes: fs.statSync(path.join(ROOT, file)).size })).filter(({ bytes }) => bytes > GUIDE_MAX_BYTES)
    assert.deepEqual(
      over.map(({ file, bytes }) => `${file}: ${bytes} bytes`),
      [],
      `guides over ${GUIDE_MAX_BYTES} bytes: split each by its reader's task`,
    )
  })
})
