import type { FastifyInstance } from 'fastify'
import { isInteger, parse } from 'lossless-json'
import { ApiError } from '../errors.js'

export const BODY_LIMIT_BYTES = 16 * 1024

/** No valid body nests deeper than 1; the cap keeps hostile bodies from exhausting the parser's stack. */
const MAX_DEPTH = 32

/** What `shape` learns of a text in one pass, outside its strings. */
interface Shape {
  deepest: number
  /** Commas at depth 1: a top-level object's members, less one. */
  topLevelCommas: number
  /** Whether every number is an integer literal of at most 15 digits, which a double holds exactly. */
  smallIntegersOnly: boolean
}

function shape(text: string): Shape {
  let depth = 0
  let deepest = 0
  let topLevelCommas = 0
  let smallIntegersOnly = true
  let digits = -1 // the digits of the number being read; -1 outside a number
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i)
    if (inString) {
      if (char === 0x5c) i++ // backslash: skip the escaped character
      else if (char === 0x22) inString = false
      continue
    }
    if (char >= 0x30 && char <= 0x39) {
      digits = digits === -1 ? 1 : digits + 1
      if (digits > 15) smallIntegersOnly = false
      continue
    }
    if (digits !== -1 && (char === 0x2e || char === 0x65 || char === 0x45 || char === 0x2b)) smallIntegersOnly = false // . e E +
    digits = char === 0x2d ? 0 : -1 // a minus sign starts a number
    if (char === 0x22) inString = true
    else if (char === 0x5b || char === 0x7b) deepest = Math.max(deepest, ++depth)
    else if (char === 0x5d || char === 0x7d) depth--
    else if (char === 0x2c && depth === 1) topLevelCommas++
  }
  return { deepest, topLevelCommas, smallIntegersOnly }
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

const exactNumber = (number: string) => (isInteger(number) ? BigInt(number) : Number(number))

/**
 * Parses JSON without losing anything: integer literals become BigInts (JSON.parse would round
 * them above 2^53), other numbers stay numbers, so "1.5" or "1e1" can never pass as an integer.
 * `__proto__` stays an ordinary own property and conflicting duplicate keys are refused.
 *
 * lossless-json does all of that and names what is wrong in a text it refuses, at a greater cost than
 * JSON.parse. So a text that nests no deeper than 1 (every valid body) and whose numbers are all
 * integer literals of at most 15 digits is read by JSON.parse, which accepts the same texts and gives
 * the same values there once its numbers are made BigInts (`__proto__` stays an own property too), except
 * for a key given twice, of which it keeps the last: its value is taken only when every member of the
 * text is a key of the object. Anything else is lossless-json's, to read or to refuse with its message.
 */
export function parseJson(text: string): unknown {
  const { deepest, topLevelCommas, smallIntegersOnly } = shape(text)
  if (deepest > MAX_DEPTH) {
    throw new SyntaxError(`nesting deeper than ${MAX_DEPTH} levels`)
  }
  if (deepest <= 1 && smallIntegersOnly) {
    const value = parsedByJsonParse(text, topLevelCommas)
    if (value !== undefined) return value
  }
  return parse(text, null, exactNumber)
}

/** JSON.parse's value of `text` with BigInt integers, or undefined where lossless-json is to read it. */
function parsedByJsonParse(text: string, topLevelCommas: number): unknown {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value === 'number') return BigInt(value)
  if (typeof value !== 'object' || value === null) return value
  const members = value as Record<string, unknown>
  let keys = 0
  for (const key in members) {
    keys++
    const member = members[key]
    // An own data property, `__proto__` included: assigning it sets that property, not the prototype.
    if (typeof member === 'number') members[key] = BigInt(member)
  }
  if (Array.isArray(value) || keys === 0 || keys === topLevelCommas + 1) return value
  return undefined
}

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/gi

/** The first charset parameter of `contentType` that is not UTF-8, if any. */
function foreignCharset(contentType: string): string | undefined {
  // Most clients send a bare `application/json`: without a parameter there is no charset to scan for.
  if (!contentType.includes(';')) return undefined
  for (const match of contentType.matchAll(CHARSET)) {
    const name = match[1] ?? ''
    if (!/^utf-?8$/i.test(name)) return name
  }
  return undefined
}

/** Whether a Content-Encoding header's codings are all `identity` (or none): the body is as sent. */
function identityOnly(contentEncoding: string): boolean {
  for (const coding of contentEncoding.split(',')) {
    const name = coding.trim()
    if (name !== '' && name.toLowerCase() !== 'identity') return false
  }
  return true
}

/** A request whose body Fastify reads: its head says one follows, and it is not a GET or HEAD, whose body Fastify ignores. */
function bodyIsRead({ method, headers }: { method: string; headers: { 'content-length'?: string; 'transfer-encoding'?: string } }): boolean {
  if (method === 'GET' || method === 'HEAD') return false
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0')
}

/**
 * Replaces Fastify's parsers: only UTF-8 `application/json` is accepted; anything else is 415. So is a
 * body with a Content-Encoding (RFC 9110 §15.5.16): the service decodes none, and a JSON text labelled
 * gzip would otherwise be stored as it came, a gzipped one refused as not UTF-8. That is decided from
 * the head, after authentication and the scope, before a byte of the body is read.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const coding = request.headers['content-encoding']
    if (coding === undefined || identityOnly(coding) || !bodyIsRead(request)) {
      done(null, payload)
      return
    }
    done(
      new ApiError('unsupported_content_encoding', `The body is sent with Content-Encoding: ${coding.slice(0, 40)}; send it without one (identity).`, {
        'accept-encoding': 'identity',
      }),
    )
  })
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: BODY_LIMIT_BYTES },
    (request, body: Buffer, done) => {
      const charset = foreignCharset(request.headers['content-type'] ?? '')
      if (charset !== undefined) {
        done(new ApiError('unsupported_media_type', `Unsupported charset "${charset}": send UTF-8 JSON.`))
        return
      }
      let text: string
      try {
        text = utf8.decode(body)
      } catch {
        done(new ApiError('invalid_request', 'The request body is not valid UTF-8.'))
        return
      }
      if (text.trim() === '') {
        done(new ApiError('invalid_request', 'The request body is empty: send a JSON object.'))
        return
      }
      try {
        done(null, parseJson(text))
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error)
        done(new ApiError('invalid_request', `The request body is not valid JSON: ${reason}.`))
      }
    },
  )
}
