/*
 * The request rules of the API guide (docs/api.md), written a second time from the text and without
 * importing anything from src/: the fuzz tests hold every answer of the service against these
 * verdicts, so a rule the service gets wrong cannot also be wrong in the judge. Where the guide
 * leaves a detail open, the comment says which reading is taken and why.
 */

export const BODY_LIMIT_BYTES = 16 * 1024
const INT64_MAX = 2n ** 63n - 1n
const NAME_MAX_CODE_POINTS = 200
const PET_STATUSES: readonly string[] = ['available', 'pending', 'sold']
const LIMIT_DEFAULT = 20

/** What createPet must answer for a body, sent as `Content-Type: application/json`. */
export type CreateVerdict =
  | { valid: true; name: string; categoryId: string; status?: string }
  | { valid: false; status: 400 | 413; why: string }

/*
 * White space as the schema's `pattern: "\\S"` reads it: JSON Schema patterns are ECMA-262
 * regular expressions, whose \s is WhiteSpace plus LineTerminator. Spelt out rather than written
 * as /\s/ so that the judge does not share the service's regular expression.
 */
const WHITE_SPACE = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
  0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff,
])

/** `bytes` as text if they are well-formed UTF-8: a strict decoder would change nothing in a round trip. */
function decodeUtf8Exactly(bytes: Uint8Array): string | undefined {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const text = buffer.toString('utf8')
  return Buffer.from(text, 'utf8').equals(buffer) ? text : undefined
}

export type Scalar = { type: 'string'; value: string } | { type: 'number'; raw: string } | { type: 'literal'; raw: string }

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }

class Invalid extends Error {}

/**
 * RFC 8259, but only as deep as a valid body (or a pet) goes: a top-level object whose members
 * are scalars, numbers kept as their text. A member whose value is an object or array makes a
 * body invalid whatever else it holds (no field takes one, and other properties are refused), so
 * it is not parsed further. Throws `Invalid` naming the first fault.
 */
export function readFlatObject(text: string): Map<string, Scalar> {
  let i = 0
  const fail = (why: string): never => {
    throw new Invalid(`${why} at ${i}`)
  }
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i] ?? '')) i++
  }
  const string = (): string => {
    if (text[i] !== '"') fail('string expected')
    i++
    let out = ''
    for (;;) {
      if (i >= text.length) fail('unterminated string')
      const unit = text.charCodeAt(i)
      if (unit === 0x22) break
      if (unit < 0x20) fail('control character in string')
      if (unit !== 0x5c) {
        out += text.charAt(i)
        i++
        continue
      }
      const escape = text[i + 1] ?? ''
      const escaped = ESCAPES[escape]
      if (escape === 'u') {
        const hex = text.slice(i + 2, i + 6)
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape')
        out += String.fromCharCode(parseInt(hex, 16))
        i += 6
      } else if (escaped !== undefined) {
        out += escaped
        i += 2
      } else fail('bad escape')
    }
    i++
    return out
  }
  const scalar = (): Scalar => {
    const c = text[i]
    if (c === '"') return { type: 'string', value: string() }
    if (c === '{' || c === '[') fail('a nested value')
    for (const literal of ['true', 'false', 'null']) {
      if (text.startsWith(literal, i)) {
        i += literal.length
        return { type: 'literal', raw: literal }
      }
    }
    NUMBER.lastIndex = i
    const match = NUMBER.exec(text)
    if (match === null) return fail('value expected')
    i += match[0].length
    return { type: 'number', raw: match[0] }
  }
  const same = (a: Scalar, b: Scalar): boolean => {
    const identity = (scalar: Scalar): string => (scalar.type === 'string' ? `"${scalar.value}` : scalar.raw)
    return identity(a) === identity(b)
  }

  const members = new Map<string, Scalar>()
  ws()
  if (text[i] !== '{') fail('the body is not a JSON object')
  i++
  ws()
  if (text[i] === '}') i++
  else {
    for (;;) {
      const key = string()
      ws()
      if (text[i] !== ':') fail('colon expected')
      i++
      ws()
      const value = scalar()
      // "Duplicate keys with different values → 400": an exact repeat changes nothing.
      const previous = members.get(key)
      if (previous !== undefined && !same(previous, value)) fail(`duplicate key '${key}' with another value`)
      members.set(key, value)
      ws()
      if (text[i] === ',') {
        i++
        ws()
        continue
      }
      if (text[i] === '}') {
        i++
        break
      }
      fail('comma or } expected')
    }
  }
  ws()
  if (i !== text.length) fail('text after the object')
  return members
}

function hasLoneSurrogate(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) i++
      else return true
    } else if (unit >= 0xdc00 && unit <= 0xdfff) return true
  }
  return false
}

/** Why `name` breaks the API guide's rule for names, or undefined if it keeps it. */
function nameProblem(name: string): string | undefined {
  if (hasLoneSurrogate(name)) return 'a lone surrogate'
  if (name.includes('\u0000')) return 'U+0000'
  const codePoints = [...name].map((char) => char.codePointAt(0) ?? 0)
  if (codePoints.length < 1 || codePoints.length > NAME_MAX_CODE_POINTS) return `${codePoints.length} code points`
  if (codePoints.every((point) => WHITE_SPACE.has(point))) return 'only white space'
  return undefined
}

/** Decimal digits of an integer in [minimum, maximum], with no sign, leading zero or exponent. */
function isIntegerDigits(text: string, minimum: bigint, maximum: bigint): boolean {
  return /^[1-9][0-9]*$/.test(text) && text.length <= 20 && BigInt(text) >= minimum && BigInt(text) <= maximum
}

/** The API guide's createPet rules, applied to the exact bytes of a body. */
export function referenceCreatePet(bytes: Uint8Array): CreateVerdict {
  const invalid = (why: string): CreateVerdict => ({ valid: false, status: 400, why })
  if (bytes.byteLength > BODY_LIMIT_BYTES) return { valid: false, status: 413, why: 'over 16 KiB' }
  let text = decodeUtf8Exactly(bytes)
  if (text === undefined) return invalid('not UTF-8')
  // RFC 8259 §8.1 lets a parser ignore a byte order mark; the guide says nothing, so one is allowed.
  if (text.startsWith('\ufeff')) text = text.slice(1)
  let members: Map<string, Scalar>
  try {
    members = readFlatObject(text)
  } catch (error) {
    if (error instanceof Invalid) return invalid(error.message)
    throw error
  }
  for (const key of members.keys()) {
    if (key !== 'name' && key !== 'categoryId' && key !== 'status') return invalid(`unknown property '${key}'`)
  }
  const name = members.get('name')
  const categoryId = members.get('categoryId')
  const status = members.get('status')
  if (name?.type !== 'string') return invalid('name is not a string')
  const problem = nameProblem(name.value)
  if (problem !== undefined) return invalid(`name has ${problem}`)
  if (categoryId?.type !== 'number' || !isIntegerDigits(categoryId.raw, 1n, INT64_MAX)) {
    return invalid('categoryId is not an integer literal from 1 to 2^63-1')
  }
  if (status === undefined) return { valid: true, name: name.value, categoryId: categoryId.raw }
  if (status.type !== 'string' || !PET_STATUSES.includes(status.value)) return invalid('status is not in the enum')
  return { valid: true, name: name.value, categoryId: categoryId.raw, status: status.value }
}

/** application/x-www-form-urlencoded parsing as the WHATWG URL standard defines it. */
export function formDecode(query: string): [string, string][] {
  const decode = (text: string): string => {
    const bytes: number[] = []
    const plain = Buffer.from(text.replaceAll('+', ' '), 'utf8')
    for (let i = 0; i < plain.length; i++) {
      const hex = plain.subarray(i + 1, i + 3).toString('latin1')
      if (plain[i] === 0x25 && /^[0-9a-fA-F]{2}$/.test(hex)) {
        bytes.push(parseInt(hex, 16))
        i += 2
      } else bytes.push(plain[i] ?? 0)
    }
    return Buffer.from(bytes).toString('utf8')
  }
  return query
    .split('&')
    .filter((sequence) => sequence !== '')
    .map((sequence) => {
      const at = sequence.indexOf('=')
      return at === -1 ? [decode(sequence), ''] : [decode(sequence.slice(0, at)), decode(sequence.slice(at + 1))]
    })
}

export type ListVerdict =
  | { valid: true; limit: number; status?: string; afterId: bigint }
  | { valid: false; why: string }

/**
 * The id a cursor starts after, if `cursor` is one the API guide's rules accept with this status:
 * base64url (exactly as the service writes it) of `p1:<status or nothing>:<id from 1 to int64 max>`.
 */
function cursorAfterId(cursor: string, status: string | undefined): bigint | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) return undefined
  const text = Buffer.from(cursor, 'base64url').toString('latin1')
  if (Buffer.from(text, 'latin1').toString('base64url') !== cursor) return undefined
  const [version, issuedFor, id, ...rest] = text.split(':')
  if (version !== 'p1' || rest.length > 0 || id === undefined || !isIntegerDigits(id, 1n, INT64_MAX)) return undefined
  return issuedFor === (status ?? '') ? BigInt(id) : undefined
}

/** The API guide's listPets rules, applied to the query string the server receives (without `?`). */
export function referenceListQuery(query: string): ListVerdict {
  const seen = new Map<string, string>()
  for (const [name, value] of formDecode(query)) {
    if (name !== 'limit' && name !== 'status' && name !== 'cursor') return { valid: false, why: `unknown parameter '${name}'` }
    if (seen.has(name)) return { valid: false, why: `'${name}' repeated` }
    seen.set(name, value)
  }
  const limit = seen.get('limit')
  const status = seen.get('status')
  if (limit !== undefined && !isIntegerDigits(limit, 1n, 100n)) return { valid: false, why: 'bad limit' }
  if (status !== undefined && !PET_STATUSES.includes(status)) return { valid: false, why: 'bad status' }
  const cursor = seen.get('cursor')
  const afterId = cursor === undefined ? 0n : cursorAfterId(cursor, status)
  if (afterId === undefined) return { valid: false, why: 'bad cursor, or one for another status' }
  const verdict: ListVerdict = { valid: true, limit: limit === undefined ? LIMIT_DEFAULT : Number(limit), afterId }
  if (status !== undefined) verdict.status = status
  return verdict
}

/** True when the decoded `petId` path segment can name a pet. */
export function isValidPetId(segment: string): boolean {
  return isIntegerDigits(segment, 1n, INT64_MAX)
}

/**
 * True when an `Authorization` value presents `key`: the word Bearer in any case, one or more
 * spaces, the key itself. (Leading and trailing white space never reaches the server: HTTP
 * parsers strip it, and the fuzz tests strip it too.)
 */
export function presentsKey(authorization: string | undefined, key: string): boolean {
  if (authorization === undefined) return false
  const match = /^bearer +(\S+)$/i.exec(authorization)
  return match?.[1] === key
}

/** The API guide's rule for echoing `X-Request-Id`. */
export function isEchoableRequestId(id: string): boolean {
  return /^[A-Za-z0-9._:-]{1,128}$/.test(id)
}

/** Content types createPet must accept: `application/json`, in any case, with only UTF-8 as a charset. */
export function acceptsContentType(contentType: string | undefined): 'accept' | 'refuse' | 'either' {
  if (contentType === undefined) return 'refuse'
  const [essence = '', ...parameters] = contentType.split(';')
  if (essence.trim().toLowerCase() !== 'application/json') return 'refuse'
  let wellFormed = true
  for (const parameter of parameters) {
    const match = /^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)=("?)([^";\s]*)\2\s*$/.exec(parameter)
    if (match === null) {
      wellFormed = false
      continue
    }
    const [, name = '', , value = ''] = match
    if (name.toLowerCase() === 'charset' && !/^utf-?8$/i.test(value)) return 'refuse'
  }
  // A parameter list that is not RFC 9110 syntax may be refused or read leniently.
  return wellFormed ? 'accept' : 'either'
}
