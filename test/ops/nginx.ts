import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import type http from 'node:http'
import https from 'node:https'
import path from 'node:path'
import { type NodeProcess, ROOT } from '../../scripts/petstore-process.js'
import type { Certificate } from '../certificates.js'

// Debian's nginx serving the repository's configuration (ops/nginx/petstore.conf) in front of instances
// a test started: test/ops/nginx.test.ts (restarts behind it) and test/upgrade/rolling-upgrade.test.ts
// (two releases behind it).

/** Debian's nginx, when installed. */
const NGINX = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin']
  .map((dir) => path.join(dir, 'nginx'))
  .find((file) => fs.existsSync(file))

/** Why nginx cannot be run here, or false. */
export const nginxSkip: string | false = NGINX === undefined ? 'nginx is not installed (apt-get install nginx)' : false

const CONF = path.join(ROOT, 'ops', 'nginx', 'petstore.conf')

/** `text` with each `[from, to]` replaced, each `from` found exactly once: a change to the file that drops one fails here. */
function replaceOnce(text: string, replacements: [string, string][]): string {
  return replacements.reduce((result, [from, to]) => {
    const count = result.split(from).length - 1
    assert.equal(count, 1, `${path.relative(ROOT, CONF)} holds "${from}" ${count} times, not once`)
    return result.replace(from, () => to)
  }, text)
}

export interface Nginx extends NodeProcess {
  port: number
  /**
   * The access log, one line per request: status, method, URI, the instances tried and what each answered, when
   * the answer was sent (epoch seconds, to the millisecond) and the Idempotency-Key (`-` without one).
   */
  accessLog(): string[]
  /** The error log's lines but those of connections refused, which nginx retries on the next instance. */
  errors(): string[]
}

/**
 * nginx in the foreground, as one process (a master's workers would outlive a SIGKILL to it), in `dir`,
 * serving the repository's configuration on `port` with `certificate`, in front of `upstreams`.
 */
export async function startNginx(dir: string, { port, upstreams, certificate }: { port: number; upstreams: number[]; certificate: Certificate }): Promise<Nginx> {
  if (NGINX === undefined) throw new Error('nginx is not installed')
  const site = path.join(dir, 'petstore.conf')
  fs.writeFileSync(
    site,
    replaceOnce(fs.readFileSync(CONF, 'utf8'), [
      ...upstreams.map((upstream, i): [string, string] => [`server 127.0.0.1:${3001 + i}`, `server 127.0.0.1:${upstream}`]),
      ['listen 443 ssl http2;', `listen 127.0.0.1:${port} ssl http2;`],
      ['/etc/letsencrypt/live/api.example.com/fullchain.pem', certificate.certFile],
      ['/etc/letsencrypt/live/api.example.com/privkey.pem', certificate.keyFile],
    ]),
  )
  const accessLog = path.join(dir, 'access.log')
  const errorLog = path.join(dir, 'error.log')
  const main = path.join(dir, 'nginx.conf')
  fs.writeFileSync(
    main,
    [
      'events { worker_connections 1024; }',
      'http {',
      // Debian's build keeps these under /var/lib/nginx.
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((name) => `  ${name}_temp_path ${path.join(dir, name)};`),
      // When it was answered (epoch seconds) and its Idempotency-Key, if any: which instance made a keyed create.
      "  log_format upstreams '$status $request_method $request_uri tried $upstream_addr answered $upstream_status at $msec key $http_idempotency_key';",
      `  access_log ${accessLog} upstreams;`,
      `  include ${site};`,
      '}',
    ].join('\n'),
  )
  const child = spawn(NGINX, ['-p', dir, '-c', main, '-g', `daemon off; master_process off; pid ${path.join(dir, 'nginx.pid')}; error_log ${errorLog} warn;`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  if (child.pid === undefined) throw new Error('nginx could not be started')
  // Whatever ends the test file: nothing tracks nginx but the file that started it.
  process.once('exit', () => child.kill('SIGKILL'))
  let piped = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (piped += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (piped += chunk))
  const read = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '')
  const nginx: Nginx = {
    name: 'nginx',
    child,
    pid: child.pid,
    port,
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve((nginx.exit = { code, signal })))),
    output: () => `${piped}${read(errorLog).split('\n').slice(-30).join('\n')}`,
    accessLog: () => read(accessLog).split('\n').filter((line) => line !== ''),
    errors: () => read(errorLog).split('\n').filter((line) => line !== '' && !line.includes('(111: Connection refused)')),
  }
  return nginx
}

/** An answer read whole. */
export interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
}

/** One request to nginx on `port`, over HTTPS trusting `ca`, on a connection of its own unless `agent`; 40 s at most. */
export function requestThroughNginx(
  port: number | undefined,
  ca: Buffer[],
  method: string,
  url: string,
  { headers = {}, body, agent, localAddress }: { headers?: Record<string, string>; body?: string; agent?: https.Agent; localAddress?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = https.request({ host: '127.0.0.1', port, method, path: url, headers, ca, agent: agent ?? false, localAddress, timeout: 40_000 }, (response) => {
      let text = ''
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }))
      response.on('error', reject)
    })
    request.on('timeout', () => request.destroy(new Error('no answer within 40 s')))
    request.on('error', reject)
    request.end(body)
  })
}
