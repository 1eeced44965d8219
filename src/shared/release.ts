import fs from 'node:fs'

let version: string | undefined

/**
 * This release's version: package.json's, which ships beside src/ and dist/ and is the one place it is
 * written (docs/development.md, "Releasing"). Read once, when first asked.
 */
export function releaseVersion(): string {
  version ??= (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
  return version
}
