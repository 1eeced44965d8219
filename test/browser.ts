import fs from 'node:fs'
import { type Browser, chromium } from 'playwright-core'

// A real browser for the tests that need one: Debian's `chromium` package, driven by playwright-core
// (which downloads nothing). Where it is not installed those tests skip, saying how to get it.

const CHROMIUM_PATH = '/usr/bin/chromium'

/** `false` when Chromium is installed, else why the browser tests are skipped (for `describe`'s `skip`). */
export const chromiumSkip: string | false = fs.existsSync(CHROMIUM_PATH)
  ? false
  : `Chromium not found at ${CHROMIUM_PATH}: install it with apt-get install chromium (CI does)`

/** Headless Chromium; no GPU, no sandbox (containers run as root) and no calls home of its own. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    timeout: 15_000,
  })
}
