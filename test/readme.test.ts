import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitUntilReady } from '../scripts/petstore-process.js'
import { ROOT } from './helper.js'
import { type ProcessExit, cleanupProcesses, freePort, trackedTempDir } from './processes.js'

// The README and the guides are executable: a reader copies their examples, so this file runs them. Every
// `sh` block runs in the order of DOCUMENTS (the README, then the guides in the order the README lists
// them), command by command, in one bash session in the project folder (so `$KEY` carries over, as in a
// reader's terminal), against a server started with `npm start` on a new database, and what each command
// prints is compared with what the document shows under it.
//
// What may differ from the document, and nothing else:
// - the ports: the server gets free ones instead of 8080 and 9464 (both are rewritten, in commands and
//   in the answers shown), and the database is a new file instead of ./data/petstore.db (rewritten too);
// - values that differ from run to run: keys and key ids (a README key id stands for the same key all
//   along, and a later command that names it gets the real one), instants, ETags, the days until the sunset;
// - headers of an `-i` answer that the document leaves out (those it shows must be there, in that order);
// - npm's own warnings about this machine's npm configuration (`npm warn …`).
//
// How a document's block is written:
// - a command, its continuation lines ending in `\`, then its output as `# ` lines (`#` alone for an
//   empty line); a command with no `#` lines under it must print nothing;
// - or terminal style: `$ command` and its output under it, as printed;
// - an HTML comment `<!-- readme-test: … -->` just before a block says how it is run:
//   `npm start` (the README's quick start: its install is .ci/run's, which the test suite runs in; `npm start`
//   is started in the background), `ci` (the README's development commands: they must be .ci/run's),
//   `within 20s` (the output may lag, as the README says: the command is repeated until it matches).

after(cleanupProcesses)

/** Why the examples cannot run here, or false: they need bash and curl, as a reader does. */
const toolsSkip = ['bash', 'curl'].flatMap((tool) =>
  spawnSync(tool, ['--version'], { stdio: 'ignore' }).error === undefined ? [] : [tool],
)
const examplesSkip: string | false =
  toolsSkip.length > 0 && `${toolsSkip.join(' and ')} not found: install with apt-get install ${toolsSkip.join(' ')} (CI does)`

/** The documents whose examples run, in the order they run: each guide's follow on from the ones before. */
const DOCUMENTS = [
  'README.md',
  'docs/api.md',
  'docs/cli.md',
  'docs/deploying.md',
  'docs/observing.md',
  'docs/security-and-recovery.md',
  'docs/configuration.md',
  'docs/development.md',
]
/** Guides whose shell blocks are shown, not run (`bash`): a production install, nginx and systemd need a machine of their own. */
const SHOWN_ONLY = ['docs/deploying.md']
const TEXT = new Map(DOCUMENTS.map((file) => [file, fs.readFileSync(path.join(ROOT, file), 'utf8')]))
const README_PORT = '8080'
const README_METRICS_PORT = '9464'
const README_DATABASE = './data/petstore.db'

interface Example {
  command: string
  expected: string[]
  /** Where the document shows it (`README.md:12`), for failure messages. */
  line: string
}

interface Block {
  directive: string | undefined
  line: string
  examples: Example[]
}

/** Every `sh` block of `file`, in order, split into commands and the output shown for each. */
function readBlocks(file: string, markdown: string): Block[] {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```sh') continue
    const directive = /^<!-- readme-test: (.+) -->$/.exec(lines[i - 1] ?? '')?.[1]
    const body: { text: string; line: string }[] = []
    let j = i + 1
    for (; lines[j] !== '```'; j++) {
      if (j >= lines.length) throw new Error(`${file}:${i + 1}: unterminated sh block`)
      body.push({ text: lines[j] ?? '', line: `${file}:${j + 1}` })
    }
    blocks.push({ directive, line: `${file}:${i + 1}`, examples: body.some((l) => l.text.startsWith('$ ')) ? terminal(body) : commented(body) })
    i = j
  }
  return blocks
}

/** `$ command` lines, each followed by its output. */
function terminal(body: { text: string; line: string }[]): Example[] {
  const examples: Example[] = []
  for (const { text, line } of body) {
    if (text.startsWith('$ ')) examples.push({ command: text.slice(2), expected: [], line })
    else examples.at(-1)?.expected.push(text)
  }
  for (const example of examples) while (example.expected.at(-1) === '') example.expected.pop()
  return examples
}

/** Commands (with `\` continuations) each followed by its output as `# ` lines; blank lines between. */
function commented(body: { text: string; line: string }[]): Example[] {
  const examples: Example[] = []
  let continued = false
  for (const { text, line } of body) {
    if (text === '') {
      // A blank line ends a command: `continued` is set false below.
    } else if (text === '#' || text.startsWith('# ')) {
      const example = examples.at(-1)
      if (example === undefined) throw new Error(`${line}: output shown before any command`)
      example.expected.push(text.slice(2))
    } else if (continued) {
      const example = examples.at(-1)
      if (example !== undefined) example.command += `\n${text}`
    } else {
      examples.push({ command: text, expected: [], line })
    }
    continued = text.endsWith('\\')
  }
  return examples
}

/** A value that may differ between the README and a run; `bind`: one README value stands for one real value. */
const VARIABLE = [
  { pattern: String.raw`key_[A-Za-z0-9]{16}`, bind: true },
  { pattern: String.raw`ps_(?:live|test)_[A-Za-z0-9]{32}`, bind: true },
  { pattern: String.raw`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`, bind: false },
  { pattern: String.raw`"[A-Za-z0-9_-]{27}"`, bind: false }, // an ETag
  { pattern: String.raw`\d+(?= days left)`, bind: false },
  { pattern: String.raw`(?<="daysLeft": )\d+`, bind: false },
]
const ANY_VARIABLE = new RegExp(VARIABLE.map((v) => `(${v.pattern})`).join('|'), 'g')

/** `text` as a regular expression that matches it literally (RegExp.escape is not in Node 22). */
function escape(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')
}

/** The real values that the README's keys and key ids stand for in this run. */
const bindings = new Map<string, string>()

/** Whether `actual` is `expected` but for the values above; records the bindings a match makes. */
function matchLine(expected: string, actual: string): boolean {
  const captured: string[] = []
  let source = '^'
  let last = 0
  for (const match of expected.matchAll(ANY_VARIABLE)) {
    source += escape(expected.slice(last, match.index))
    const kind = VARIABLE[match.slice(1).findIndex((group) => group !== undefined)]
    const bound = bindings.get(match[0])
    if (kind?.bind === true && bound !== undefined) {
      source += escape(bound)
    } else {
      source += `(${kind?.pattern ?? ''})`
      captured.push(match[0])
    }
    last = match.index + match[0].length
  }
  source += `${escape(expected.slice(last))}$`
  const found = new RegExp(source).exec(actual)
  if (found === null) return false
  captured.forEach((readmeValue, index) => {
    if (VARIABLE.some((v) => v.bind && new RegExp(`^${v.pattern}$`).test(readmeValue))) {
      bindings.set(readmeValue, found[index + 1] ?? '')
    }
  })
  return true
}

/**
 * Why `actual` is not what the README shows, or undefined when it is. An `-i` answer is a status line,
 * headers, an empty line and the body: the README's headers must be among the real ones, in order;
 * the status line and the body must be exact.
 */
function difference(expected: string[], actual: string[]): string | undefined {
  if (expected[0]?.startsWith('HTTP/') === true) {
    const split = (lines: string[]): [string[], string[]] => {
      const blank = lines.indexOf('')
      return blank === -1 ? [lines, []] : [lines.slice(0, blank), lines.slice(blank + 1)]
    }
    const [expectedHead, expectedBody] = split(expected)
    const [actualHead, actualBody] = split(actual)
    if (!matchLine(expectedHead[0] ?? '', actualHead[0] ?? '')) return 'the status line differs'
    let at = 1
    for (const header of expectedHead.slice(1)) {
      while (at < actualHead.length && !matchLine(header, actualHead[at] ?? '')) at++
      if (at === actualHead.length) return `no header "${header}" (in this order)`
      at++
    }
    return sameLines(expectedBody, actualBody) ? undefined : 'the body differs'
  }
  return sameLines(expected, actual) ? undefined : 'the output differs'
}

function sameLines(expected: string[], actual: string[]): boolean {
  return expected.length === actual.length && expected.every((line, i) => matchLine(line, actual[i] ?? ''))
}

/** One bash, fed command by command like a reader's terminal: variables carry over. */
class Shell {
  private readonly bash: ChildProcess
  private output = ''
  private commands = 0

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    this.bash = spawn('bash', ['--noprofile', '--norc'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] })
    this.bash.stdout?.setEncoding('utf8').on('data', (chunk: string) => (this.output += chunk))
    this.bash.stderr?.setEncoding('utf8').on('data', (chunk: string) => (this.output += chunk))
  }

  /** What `command` printed, stdout and stderr together as on a terminal, without npm's own warnings. */
  async run(command: string, timeoutMs = 60_000): Promise<string[]> {
    const done = `README-TEST-DONE-${++this.commands}`
    this.output = ''
    this.bash.stdin?.write(`{\n${command}\n} </dev/null 2>&1\nprintf '\\n%s\\n' ${done}\n`)
    const deadline = Date.now() + timeoutMs
    while (!this.output.includes(`\n${done}\n`)) {
      if (Date.now() > deadline) throw new Error(`no end after ${timeoutMs} ms; printed so far:\n${this.output}`)
      await sleep(20)
    }
    const printed = this.output.slice(0, this.output.indexOf(`\n${done}\n`))
    return printed
      .replace(/\r/g, '')
      .replace(/\n+$/, '')
      .split('\n')
      .filter((line) => !line.startsWith('npm warn '))
      .filter((line, i, all) => !(all.length === 1 && line === ''))
  }

  close(): void {
    this.bash.stdin?.end()
  }
}

/** The anchors GitHub gives the headings of a markdown document. */
function anchorsOf(markdown: string): Set<string> {
  return new Set(
    markdown
      .split('\n')
      .filter((line) => /^#{1,6} /.test(line))
      .map((line) =>
        line
          .replace(/^#+ /, '')
          .toLowerCase()
          .replace(/[^\p{L}\p{N} _-]/gu, '')
          .replace(/ /g, '-'),
      ),
  )
}

describe('the README and the guides', () => {
  const blocks = DOCUMENTS.flatMap((file) => readBlocks(file, TEXT.get(file) ?? ''))

  it('link nothing outside the repository, and every link they make resolves, anchors included', () => {
    let count = 0
    for (const file of DOCUMENTS) {
      const markdown = TEXT.get(file) ?? ''
      const links = [...markdown.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] ?? '')
      assert.ok(links.length > 3, `${file}: only ${links.length} links found: the pattern is broken`)
      count += links.length
      for (const link of links) {
        if (/^https?:\/\//.test(link)) continue
        const [target = '', anchor] = link.split('#')
        const resolved = target === '' ? path.join(ROOT, file) : path.resolve(ROOT, path.dirname(file), target)
        assert.ok(resolved.startsWith(ROOT + path.sep), `${file}: link ${link} points outside the repository`)
        assert.ok(fs.existsSync(resolved), `${file}: link ${link}: no such file in the repository`)
        if (anchor !== undefined) {
          assert.ok(resolved.endsWith('.md'), `${file}: link ${link}: an anchor in a file that is not markdown`)
          assert.ok(anchorsOf(fs.readFileSync(resolved, 'utf8')).has(anchor), `${file}: link ${link}: no such heading`)
        }
      }
    }
    assert.ok(count > 60, `only ${count} links found in all: the pattern is broken`)
  })

  it('give each topic one home: no guide repeats a heading of another', () => {
    const seen = new Map<string, string>()
    for (const file of DOCUMENTS) {
      for (const line of (TEXT.get(file) ?? '').split('\n')) {
        if (!/^## /.test(line)) continue
        const other = seen.get(line)
        assert.equal(other, undefined, `"${line}" is in ${other ?? ''} and in ${file}`)
        seen.set(line, file)
      }
    }
  })

  it('tells CI to run exactly what it tells a developer to run', () => {
    const [development, ...more] = blocks.filter((block) => block.directive === 'ci')
    assert.ok(development !== undefined && more.length === 0, 'one block marked <!-- readme-test: ci -->')
    assert.match(development.line, /^README\.md:/, 'the development commands are in the README')
    const commands = (text: string): string[] =>
      text
        .split('\n')
        .map((line) => line.replace(/\s+#.*$/, '').trim())
        .filter((line) => line !== '' && !line.startsWith('#'))
    const ci = commands(fs.readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8')).filter(
      (line) => !/^(set |cd |node --version$|npm --version$)/.test(line),
    )
    assert.deepEqual(ci, development.examples.flatMap((example) => commands(example.command)))
    const [quickStart, ...moreStarts] = blocks.filter((block) => block.directive === 'npm start')
    assert.ok(quickStart !== undefined && moreStarts.length === 0, 'one block marked <!-- readme-test: npm start -->')
    assert.match(quickStart.line, /^README\.md:/, 'the quick start is in the README')
    const [install, start, ...others] = quickStart.examples.map((example) => example.command)
    assert.ok(install !== undefined && ci.includes(install), `the quick start installs as CI does (${install ?? 'nothing'})`)
    assert.deepEqual([start, ...others], ['npm start'], 'the quick start then runs npm start, and nothing else')
  })

  it('answers every shell example as it shows, in order, against a server started as it says', { skip: examplesSkip }, async (t) => {
    const dir = trackedTempDir('petstore-readme-')
    const [port, metricsPort] = [await freePort(), await freePort()]
    const database = path.join(dir, 'petstore.db')
    const local = (text: string): string =>
      text
        .replaceAll(`localhost:${README_PORT}`, `localhost:${port}`)
        .replaceAll(`localhost:${README_METRICS_PORT}`, `localhost:${metricsPort}`)
        .replaceAll(README_DATABASE, database)
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      DATABASE_URL: `sqlite://${database}`,
      // A busy machine must not turn an answer the README shows into 503 overloaded.
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    }
    for (const name of ['PETSTORE_ENV', 'PUBLIC_BASE_URL', 'PRODUCTION_BASE_URL', 'STAGING_BASE_URL', 'REDIS_URL', 'LOG_LEVEL']) {
      env[name] = undefined
    }
    const shell = new Shell(ROOT, env)
    t.after(() => shell.close())
    let started = false
    let ran = 0

    for (const block of blocks) {
      if (block.directive === 'ci') continue
      if (block.directive === 'npm start') {
        const server = spawn('npm', ['start'], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
        let output = ''
        server.stdout.setEncoding('utf8').on('data', (chunk: string) => (output = (output + chunk).slice(-20_000)))
        server.stderr.setEncoding('utf8').on('data', (chunk: string) => (output = (output + chunk).slice(-20_000)))
        const exited = new Promise<ProcessExit>((resolve) => server.once('exit', (code, signal) => resolve({ code, signal })))
        t.after(async () => {
          // npm start's whole process group: npm, its shell and the service.
          if (server.pid !== undefined && server.exitCode === null) process.kill(-server.pid, 'SIGTERM')
          await Promise.race([exited, sleep(10_000)])
          if (server.pid !== undefined && server.exitCode === null) process.kill(-server.pid, 'SIGKILL')
        })
        const npmStart = { name: 'npm start', child: server, pid: server.pid ?? 0, exited, output: () => output }
        await waitUntilReady(npmStart, `http://127.0.0.1:${port}/healthz`, { timeoutMs: 30_000 })
        started = true
        continue
      }
      assert.ok(started, `${block.line}: an example before the server is started`)
      const within = block.directive === undefined ? 0 : Number(/^within (\d+)s$/.exec(block.directive)?.[1] ?? NaN) * 1000
      assert.ok(!Number.isNaN(within), `${block.line}: unknown directive "${block.directive ?? ''}"`)
      for (const example of block.examples) {
        const command = [...bindings].reduce((text, [readme, real]) => text.replaceAll(readme, real), local(example.command))
        const expected = example.expected.map(local)
        const deadline = Date.now() + within
        for (;;) {
          const actual = await shell.run(command)
          const why = difference(expected, actual)
          if (why === undefined) break
          if (Date.now() < deadline) {
            await sleep(500)
            continue
          }
          assert.fail(
            `${example.line}: ${why}.\n$ ${example.command}\n--- the document shows:\n${expected.join('\n')}\n--- it printed:\n${actual.join('\n')}`,
          )
        }
        ran++
      }
    }
    assert.ok(ran >= 15, `only ${ran} examples ran: the documents or their parsing changed`)
    for (const file of DOCUMENTS) {
      const shown = blocks.filter((block) => block.line.startsWith(`${file}:`) && block.directive !== 'ci').length
      assert.ok(shown > 0 || SHOWN_ONLY.includes(file) || !/^```(?:sh|bash)$/m.test(TEXT.get(file) ?? ''), `${file}: its shell examples did not run`)
    }
  })
})
