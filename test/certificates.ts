import { execFileSync, spawnSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import tls from 'node:tls'

// Certificates made by the openssl command, and TLS clients as they really behave, for the tests of
// HTTPS served by the service itself (test/http/tls.test.ts, and the fault matrix's TLS cells).

/** Why tests that need certificates cannot run here, or false. */
export const opensslSkip = spawnSync('openssl', ['version']).error === undefined ? false : 'the openssl command is not installed: it makes the test certificates'

/** A certificate for localhost and 127.0.0.1, and its key, as PEM files in `dir`. */
export interface Certificate {
  certFile: string
  keyFile: string
  pem: Buffer
  fingerprint: string
}

/**
 * A certificate named `name` in `dir`: self-signed (and so its own CA), or, given an `issuer`, signed by
 * it, as a renewal by the same CA is.
 */
export function makeCertificate(dir: string, name: string, { issuer }: { issuer?: Certificate } = {}): Certificate {
  const certFile = path.join(dir, `${name}-cert.pem`)
  const keyFile = path.join(dir, `${name}-key.pem`)
  const signed = issuer === undefined ? [] : ['-addext', 'basicConstraints=critical,CA:FALSE', '-CA', issuer.certFile, '-CAkey', issuer.keyFile]
  execFileSync(
    'openssl',
    [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
      '-subj', `/CN=${name}`, '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', ...signed,
      '-keyout', keyFile, '-out', certFile,
    ],
    { stdio: 'ignore' },
  )
  const pem = fs.readFileSync(certFile)
  return { certFile, keyFile, pem, fingerprint: new X509Certificate(pem).fingerprint256 }
}

/** The fingerprint of the certificate a new TLS connection to `port` is given, without session resumption. */
export function servedFingerprint(port: number, ca: Buffer[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca }, () => {
      const { fingerprint256 } = socket.getPeerCertificate()
      socket.end()
      resolve(fingerprint256)
    })
    socket.once('error', reject)
  })
}

/** The start of a ClientHello: a record header announcing 200 bytes, and 6 of them. */
export const HALF_CLIENT_HELLO = Buffer.from('16030100c8010000c40303', 'hex')

/** A TCP connection to `port` that sends `bytes` and nothing more, as a client stalled in its TLS handshake would. */
export async function stalledHandshake(port: number, bytes: Buffer): Promise<{ socket: net.Socket; closed: Promise<void> }> {
  const socket = net.connect(port, '127.0.0.1')
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  socket.on('error', () => {})
  await once(socket, 'connect')
  socket.write(bytes)
  return { socket, closed }
}
