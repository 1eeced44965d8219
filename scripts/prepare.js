// npm runs this as `prepare` after `npm install` or `npm ci` in a checkout (never when a package tarball
// is installed): it builds dist/ so that `npm start` works. An install without devDependencies
// (`npm ci --omit=dev`) has no compiler, so it builds nothing: it keeps the dist/ a build step made
// before it, as in a container's build stage, and stops with the way out when there is none.
// Plain JavaScript for any Node that runs npm: the project's own Node may not be installed yet.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'

let compiler
try {
  compiler = createRequire(import.meta.url).resolve('typescript/package.json')
} catch {
  compiler = undefined
}

if (process.env.npm_command === 'pack' || process.env.npm_command === 'publish') {
  // `prepack` has just built dist/ from scratch.
} else if (process.env.npm_command === 'exec' && fs.existsSync('dist/cli.js')) {
  // `npx petstore` in a checkout: npm installs the checkout into its npx cache first (once per folder) and runs
  // this. dist/ is built already, and building it again would rewrite the files a service running from this
  // checkout loads, under it.
} else if (compiler !== undefined) {
  execFileSync(process.execPath, [process.env.npm_execpath, 'run', 'build'], { stdio: 'inherit' })
} else if (!fs.existsSync('dist/cli.js')) {
  process.stderr.write(
    'petstore: dist/ is not built, and an install without devDependencies cannot build it. Deploy the ' +
      'package that `npm pack` makes, or build before leaving devDependencies out: ' +
      '`npm ci && npm prune --omit=dev` (docs/deploying.md, "Installing for production").\n',
  )
  process.exit(1)
}
