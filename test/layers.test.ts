import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

// The layering of src/ (docs/development.md, "The layers"; ADR 14), checked on the import statements.

const SRC = path.join(import.meta.dirname, '..', 'src')

/** Plumbing: what every layer may use, and which uses no feature and nothing that composes them. */
const PLUMBING = ['shared', 'storage', 'http', 'tracing', 'logger.ts', 'errors.ts', 'config.ts']
const FEATURES = ['pets', 'api-keys', 'idempotency', 'deprecations', 'copy']
/** What composes the features: the repositories on an engine, the app, the process, the commands. */
const COMPOSITION = ['repositories.ts', 'app.ts', 'process', 'cli', 'cli.ts']
/** A feature's own command: composition kept beside the feature it commands, by name. */
const FEATURE_COMMANDS = ['api-keys/keys.cli.ts', 'deprecations/deprecations.cli.ts', 'copy/copy.cli.ts']

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.join(dir, file))
}

/** The files under src/ that `file` imports, as paths relative to src/ (`pets/pets.service.ts`). */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8')
  const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+'(\.[^']+)'|import\('(\.[^']+)'\)/g)].map((match) => match[1] ?? match[2] ?? '')
  return specifiers.map((specifier) => path.relative(SRC, path.resolve(path.dirname(file), specifier)).replace(/\.js$/, '.ts'))
}

const top = (relative: string) => relative.split(path.sep)[0] ?? ''

describe('the layers of src/', () => {
  it('give every entry at the top of src/ exactly one layer', () => {
    const layered = [...PLUMBING, ...FEATURES, ...COMPOSITION]
    assert.deepEqual(
      fs.readdirSync(SRC).filter((entry) => layered.filter((named) => named === entry).length !== 1),
      [],
      'an entry in no layer (or in two): add it to PLUMBING, FEATURES or COMPOSITION',
    )
    assert.deepEqual(layered.filter((entry) => !fs.existsSync(path.join(SRC, entry))), [], 'a layer names an entry that is gone')
    assert.deepEqual(FEATURE_COMMANDS.filter((file) => !fs.existsSync(path.join(SRC, file))), [], 'a feature command that is gone')
  })

  it('keep plumbing free of every feature and of what composes them', () => {
    const plumbing = PLUMBING.flatMap((entry) => (entry.endsWith('.ts') ? [path.join(SRC, entry)] : sourceFiles(path.join(SRC, entry))))
    assert.ok(plumbing.length > 40, `only ${plumbing.length} plumbing files found`)
    const crossings = plumbing.flatMap((file) =>
      importsOf(file)
        .filter((imported) => [...FEATURES, ...COMPOSITION].includes(top(imported)))
        .map((imported) => `${path.relative(SRC, file)} imports ${imported}`),
    )
    assert.deepEqual(crossings, [])
  })

  it('keep the features from importing what composes them, and from importing each other in a cycle', () => {
    const edges = new Map<string, Set<string>>()
    const crossings: string[] = []
    for (const feature of FEATURES) {
      for (const file of sourceFiles(path.join(SRC, feature)).filter((file) => !FEATURE_COMMANDS.includes(path.relative(SRC, file)))) {
        for (const imported of importsOf(file)) {
          const to = top(imported)
          if (COMPOSITION.includes(to)) crossings.push(`${path.relative(SRC, file)} imports ${imported}`)
          if (FEATURES.includes(to) && to !== feature) edges.set(feature, (edges.get(feature) ?? new Set()).add(to))
        }
      }
    }
    assert.deepEqual(crossings, [])
    const cycles = [...edges].flatMap(([from, tos]) => [...tos].filter((to) => edges.get(to)?.has(from)).map((to) => `${from} ⇄ ${to}`))
    assert.deepEqual(cycles, [])
  })

  it('leave at most six files directly in src/: the entry point, the app, configuration and the truly shared', () => {
    const files = fs.readdirSync(SRC).filter((file) => file.endsWith('.ts'))
    assert.ok(files.length <= 6, files.join(', '))
    assert.ok(files.includes('cli.ts') && files.includes('app.ts'), files.join(', '))
  })
})
