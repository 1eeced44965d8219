import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { explainedPackages, majorsBehind } from '../scripts/deps.js'

// `npm run deps` asks the registry, so it is not run here; what it decides from the answers is.

const ROOT = path.resolve(import.meta.dirname, '..')

describe('npm run deps', () => {
  it('counts the majors behind, the minor on a 0.x line, and nothing for a version ahead of latest', () => {
    assert.equal(majorsBehind('24.19.2', '26.6.6'), 2)
    assert.equal(majorsBehind('5.9.3', '5.9.4'), 0)
    assert.equal(majorsBehind('0.28.18', '0.29.9'), 1)
    assert.equal(majorsBehind('0.222.0', '0.301.0'), 79)
    assert.equal(majorsBehind('0.34.52', '1.4.3'), 1)
    assert.equal(majorsBehind('13.2.0', '12.11.1'), 0)
    assert.equal(majorsBehind('18.4.0-beta.17', '18.4.0-beta.17'), 0)
  })

  it('reads the packages of the Dependencies section of the development guide, and only that section', () => {
    const guide = ['## Releasing', '| `left-pad` | 1 | x | y |', '## Dependencies', '', '| Package | Held |', '|---|---|', '| `typescript` | 5.9 |', '| `@types/node` | 22 |', '## The test suite', '| `eslint` | 9 |'].join('\n')
    assert.deepEqual([...explainedPackages(guide)], ['typescript', '@types/node'])
  })

  it('finds every package the guide explains among the direct dependencies', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: object; devDependencies: object }
    const direct = new Set([...Object.keys(manifest.dependencies), ...Object.keys(manifest.devDependencies)])
    const explained = explainedPackages(fs.readFileSync(path.join(ROOT, 'docs', 'development.md'), 'utf8'))
    assert.ok(explained.size > 0, 'the guide has no Dependencies table')
    assert.deepEqual([...explained].filter((name) => !direct.has(name)), [])
  })
})
