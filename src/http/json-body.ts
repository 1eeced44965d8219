import type { FastifyInstance } from 'fastify'
import { isInteger, parse } from 'lossless-json'
import { ApiError } from '../errors.js'

export const BODY_LIMIT_BYTES = 16 * 1024

/** No valid body nests deeper than 1; the cap keeps hostile bodies from exhausting the parser's stack. */
const MAX_DEPTH = 32

function nestingDepth(text: string): number {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i)
    if (inString) {
      if (char === 0x5c) i++ // backslash: skip the escaped character
      else if (char === 0x22) inString = false
    } else if (char === 0x22) inString = true
    else if (char === 0x5b || char === 0x7b) deepest = Math.max(deepest, ++depth)
    else if (char === 0x5d || char === 0x7d) depth--
  }
  return deepest
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * Parses JSON without losing anything: integer literals become BigInts (JSON.parse would round
 * them above 2^53), other numbers stay numbers, so "1.5" or "1e1" can never pass as an integer.
 * `__proto__` stays an ordinary own property and conflicting duplicate keys are refused.
 */
export function parseJson(text: string): unknown {
  if (nestingDepth(text) > MAX_DEPTH) {
    throw new SyntaxError(`nesting deeper than ${MAX_DEPTH} levels`)
  }
  return parse(text, null, (number) => (isInteger(number) ? BigInt(number) : Number(number)))
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

/** Replaces Fastify's parsers: only UTF-8 `application/json` is accepted; anything else is 415. */
export function registerJsonBodyParser(app: FastifyInstance): void {
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
