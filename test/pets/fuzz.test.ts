import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import type { TSchema } from 'typebox'
import fc from 'fast-check'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js'
import { kindOfSchema, rangeOfSchema, targetOfSchema } from '../../src/http/schema-types.js'
import { INT64_MAX } from '../../src/shared/int64.js'
import { encodeCursor } from '../../src/pets/pets.cursor.js'
import { PET_STATUSES } from '../../src/pets/pets.repository.js'
import { ListPetsQuerySchema, NewPetSchema, PetIdParamsSchema } from '../../src/pets/pets.schemas.js'
import {
  BODY_LIMIT_BYTES,
  type CreateVerdict,
  acceptsContentType,
  formDecode,
  isEchoableRequestId,
  isValidPetId,
  presentsKey,
  readFlatObject,
  referenceCreatePet,
  referenceListQuery,
} from './fuzz-reference.js'
import { DIRECT_ENGINES, type TestApp, errorBody, useTestApp } from '../helper.js'

/*
 * Property-based fuzzing of the HTTP surface: bodies, content types, query strings, paths and
 * headers. Valid values are derived from the route schemas; hostile ones come from mutations,
 * raw JSON text, raw bytes and odd encodings. Every answer is held against fuzz-reference.ts,
 * the API guide's rules written again without src/. Runs are deterministic: FUZZ_SEED picks the
 * seed, FUZZ_RUNS the number of cases of the whole file, shared between the engines
 * (`npm run fuzz` runs 100,000). A failure prints the seed and the shrunk counterexample.
 */

const SEED = Number(process.env.FUZZ_SEED ?? 20261122)
const TOTAL_RUNS = Number(process.env.FUZZ_RUNS ?? 2400)
if (!Number.isSafeInteger(SEED) || !Number.isSafeInteger(TOTAL_RUNS) || TOTAL_RUNS < 1) {
  throw new Error('FUZZ_SEED must be an integer and FUZZ_RUNS a positive integer')
}
const SHARES = { bodies: 0.5, contentTypes: 0.1, queries: 0.15, paths: 0.13, headers: 0.12 } as const
const runsOf = (part: keyof typeof SHARES): number => Math.max(1, Math.ceil((TOTAL_RUNS * SHARES[part]) / DIRECT_ENGINES.length))

// ---------------------------------------------------------------------------------------------
// Values the schemas accept

type FieldValue = string | bigint

const INTERESTING_INTEGERS = [2n ** 31n - 1n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 2n]

const NON_BLANK = ['R', 'x', '0', 'é', '名', '🐕', 'ß']

const codePoint = fc
  .oneof(
    { weight: 5, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
    { weight: 3, arbitrary: fc.integer({ min: 0x80, max: 0x10ffff }).filter((point) => point < 0xd800 || point > 0xdfff) },
    {
      weight: 2,
      // White space of every definition, invisible and reserved characters, astral and combining ones.
      arbitrary: fc.constantFrom(
        0x09, 0x0a, 0x0d, 0x20, 0x85, 0xa0, 0x180e, 0x200b, 0x202e, 0x2028, 0x3000, 0xfeff, 0xfffe, 0xffff, 0x301,
        0x1f415, 0x10ffff,
      ),
    },
  )
  .map((point) => String.fromCodePoint(point))

/** Text of at most `maxLength` code points with a character that is white space under no definition. */
function validText(maxLength: number): fc.Arbitrary<string> {
  const points = fc.oneof(
    fc.array(codePoint, { maxLength: Math.min(12, maxLength - 1) }),
    fc.array(codePoint, { minLength: Math.max(0, maxLength - 7), maxLength: maxLength - 1 }),
  )
  return fc.tuple(points, fc.constantFrom(...NON_BLANK), fc.nat()).map(([chars, middle, at]) => {
    const i = at % (chars.length + 1)
    return [...chars.slice(0, i), middle, ...chars.slice(i)].join('')
  })
}

/** The values a schema accepts, from its own kind and bounds. An unknown kind throws rather than go unfuzzed. */
function validValues(schema: TSchema): fc.Arbitrary<FieldValue> {
  const kind = kindOfSchema(schema)
  switch (kind) {
    case 'Text':
      return validText((schema as TSchema & { maxLength: number }).maxLength)
    case 'Int64':
    case 'IntegerText': {
      const range = rangeOfSchema(schema)
      if (range === undefined) throw new Error(`a ${kind} schema without a range`)
      const { minimum, maximum } = range
      const integers = fc.oneof(
        fc.bigInt({ min: minimum, max: maximum }),
        fc.bigInt({ min: minimum, max: maximum - minimum > 1000n ? minimum + 1000n : maximum }),
        fc.constantFrom(minimum, maximum, ...INTERESTING_INTEGERS.filter((n) => n > minimum && n < maximum)),
      )
      // An Int64 is a JSON integer in a body; an IntegerText is the decimal text of a parameter.
      return kind === 'Int64' ? integers : integers.map(String)
    }
    case 'StringEnum':
      return fc.constantFrom(...(schema as TSchema & { enum: string[] }).enum)
    case 'Named':
      return validValues(targetOfSchema(schema))
    default:
      // A cursor is opaque: valid ones are those the service issues, for any id and any filter.
      if (schema === ListPetsQuerySchema.properties.cursor) {
        return fc
          .tuple(fc.bigInt({ min: 1n, max: INT64_MAX }), fc.constantFrom(...PET_STATUSES, undefined))
          .map(([id, status]) => encodeCursor(id, status))
      }
      throw new Error(`the fuzz tests have no generator for schema kind ${kind}`)
  }
}

const petFields = Object.entries(NewPetSchema.properties) as [string, TSchema][]
const requiredFields = new Set<string>(NewPetSchema.required ?? [])

/** Members of a valid NewPet in any order; optional fields are sometimes left out. */
const validPetMembers: fc.Arbitrary<[string, FieldValue][]> = fc
  .tuple(
    ...petFields.map(([name, schema]) => {
      const member = validValues(schema).map((value): [string, FieldValue] => [name, value])
      return requiredFields.has(name)
        ? member.map((entry) => [entry])
        : fc.option(member, { nil: undefined }).map((entry) => (entry === undefined ? [] : [entry]))
    }),
  )
  .map((parts) => parts.flat())
  .chain((members) => fc.shuffledSubarray(members, { minLength: members.length, maxLength: members.length }))

// ---------------------------------------------------------------------------------------------
// Writing JSON text, every byte under the test's control

type StringStyle = 'standard' | 'escaped' | 'raw'
const anyStringStyle = fc.constantFrom<StringStyle>('standard', 'standard', 'escaped', 'raw')

/** A JSON string: as JSON.stringify writes it, every unit as \uXXXX, or raw (control characters and all). */
function jsonString(text: string, style: StringStyle): string {
  switch (style) {
    case 'standard':
      return JSON.stringify(text)
    case 'escaped':
      return `"${Array.from({ length: text.length }, (_, i) => `\\u${text.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')}"`
    case 'raw':
      return `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`
  }
}

const writeValue = (value: FieldValue, style: StringStyle): string =>
  typeof value === 'bigint' ? String(value) : jsonString(value, style)

/** A member as written: key and value are both raw JSON text. */
type RawMember = [key: string, value: string]

const gap = fc.constantFrom('', '', '', ' ', '\n', '\t', '\r\n  ')

function objectText(members: RawMember[], space: string): string {
  const inner = members.map(([key, value]) => `${key}${space}:${space}${value}`).join(`${space},${space}`)
  return `${space}{${space}${inner}${space}}${space}`
}

const validRawMembers = (styles: fc.Arbitrary<StringStyle>): fc.Arbitrary<RawMember[]> =>
  fc
    .tuple(validPetMembers, styles)
    .map(([members, style]) => members.map(([name, value]): RawMember => [JSON.stringify(name), writeValue(value, style)]))

/** A NewPet as JSON text; with `standard` strings only, always a valid body. */
const validPetText = (styles: fc.Arbitrary<StringStyle> = anyStringStyle): fc.Arbitrary<string> =>
  fc.tuple(validRawMembers(styles), gap).map(([members, space]) => objectText(members, space))

/** JSON text of anything fc.anything makes, NaN, Infinity, -0 and undefined written as JavaScript would. */
function looseJson(value: unknown): string {
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value)
  if (typeof value === 'bigint' || typeof value === 'boolean' || value === null || value === undefined) return String(value)
  if (typeof value === 'string') return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(looseJson).join(',')}]`
  if (typeof value === 'object') {
    return `{${Object.entries(value).map(([key, member]) => `${JSON.stringify(key)}:${looseJson(member)}`).join(',')}}`
  }
  throw new Error(`fc.anything made a ${typeof value}`)
}

// ---------------------------------------------------------------------------------------------
// Hostile values

const SPECIAL_NUMBERS = [
  '0', '-0', '1', '-1', '1.0', '1.5', '1e1', '1E2', '1e-1', '10e0', '0.0', '1e400', '-1e400', '1e-400',
  '99999999999999999999999', '-99999999999999999999999', '9223372036854775807', '9223372036854775808',
  '-9223372036854775808', '-9223372036854775809', '18446744073709551615', '18446744073709551616',
  '9007199254740991', '9007199254740992', '9007199254740993', '9007199254740993.0', '4.9e-324',
  '1.7976931348623157e308', '123456789012345678901234567890',
]
const NOT_JSON = [
  'NaN', '-NaN', 'Infinity', '-Infinity', '+1', '01', '00', '-01', '.5', '1.', '0x10', '1_000', "'a'", 'True',
  'FALSE', 'nul', 'undefined', '"', '"\\x41"', '"\\u12"', '"\\U0041"', '"a\\"', '// x', '/* */1', '[1,]', '{,}', '1 2',
]
const ODD_STRINGS = [
  '""', '" "', '"\\t\\n"', '"\\u00a0"', '"\\u2028"', '"\\ufeff"', '"\\u0085"', '"\\u200b"', '"\\u0000"',
  '"a\\u0000b"', '"\\ud800"', '"\\udfff"', '"a\\ud800b"', '"\\udc00\\ud800"', '"\\ud83d\\udc15"', '"\\uD83D\\uDC15"',
  '"5"', '"1"', '"available"', '"AVAILABLE"', '"sold "', '"Sold"', '"pending\\u0000"', '"__proto__"', '"constructor"',
]
const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype']
const ODD_KEYS = [
  'id', 'stauts', 'Name', 'NAME', 'name ', ' name', 'categoryID', 'category_id', 'categoryid', 'toString',
  'hasOwnProperty', 'valueOf', '__defineGetter__', '', 'name\u0000', '\ud800', 'polluted',
]

const nearBoundary = (center: bigint): fc.Arbitrary<string> =>
  fc.bigInt({ min: center - 3n, max: center + 3n }).chain((n) => fc.constantFrom(String(n), String(-n), `${n}.0`, `${n}e0`))

const decimalText = fc
  .tuple(
    fc.bigInt({ min: 0n, max: 10n ** 25n }),
    fc.option(fc.stringMatching(/^[0-9]{1,5}$/)),
    fc.option(fc.integer({ min: -400, max: 400 })),
  )
  .map(([integer, fraction, exponent]) => `${integer}${fraction === null ? '' : `.${fraction}`}${exponent === null ? '' : `e${exponent}`}`)

/** Values nested up to thousands of levels, closed or not, with prototype keys on the way. */
const deepValue = fc
  .oneof(fc.integer({ min: 1, max: 40 }), fc.constantFrom(31, 32, 33, 1000, 3000, 8000))
  .chain((depth) =>
    fc.constantFrom(
      '['.repeat(depth) + ']'.repeat(depth),
      '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
      '['.repeat(depth),
      '[{"__proto__":'.repeat(depth) + '{"polluted":true}' + '}]'.repeat(depth),
    ),
  )

const hostileName = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({ unit: 'binary', minLength: 195, maxLength: 205 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc
    .tuple(validText(200), fc.nat(), fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff', '\u0000', '\udc00\ud800'))
    .map(([text, at, odd]) => text.slice(0, at % (text.length + 1)) + odd + text.slice(at % (text.length + 1))),
  fc.constantFrom(
    ' ', '\t', '\u00a0', '\u2028', '\u3000', '\ufeff', '\u0085', '\u200b', '\u180e', ' '.repeat(200), '🐕'.repeat(200),
    '🐕'.repeat(201), 'x'.repeat(200), 'x'.repeat(201), 'e\u0301'.repeat(100), 'e\u0301'.repeat(101),
  ),
)

/** Raw JSON text of a value that is, mostly, wrong for any field. */
const oddValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...SPECIAL_NUMBERS) },
  { weight: 2, arbitrary: fc.constantFrom(...NOT_JSON) },
  { weight: 3, arbitrary: fc.constantFrom(...ODD_STRINGS) },
  { weight: 3, arbitrary: fc.oneof(nearBoundary(2n ** 53n), nearBoundary(2n ** 63n), nearBoundary(2n ** 64n)) },
  { weight: 1, arbitrary: fc.bigInt().map(String) },
  { weight: 1, arbitrary: decimalText },
  { weight: 2, arbitrary: fc.json({ maxDepth: 2 }) },
  { weight: 2, arbitrary: fc.anything({ maxDepth: 2, withBigInt: true, withNullPrototype: true }).map(looseJson) },
  { weight: 1, arbitrary: deepValue },
  { weight: 2, arbitrary: fc.tuple(hostileName, anyStringStyle).map(([text, style]) => jsonString(text, style)) },
  // A valid value of some field, perhaps under another field's name.
  { weight: 3, arbitrary: fc.tuple(validPetMembers, fc.nat(), anyStringStyle).map(([members, at, style]) => {
      const [, value] = members[at % members.length] ?? ['', '']
      return writeValue(value, style)
    }) },
)

const oddKey: fc.Arbitrary<string> = fc
  .tuple(
    fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...petFields.map(([name]) => name)) },
      { weight: 3, arbitrary: fc.constantFrom(...PROTOTYPE_KEYS) },
      { weight: 3, arbitrary: fc.constantFrom(...ODD_KEYS) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 10 }) },
    ),
    anyStringStyle,
  )
  .map(([key, style]) => jsonString(key, style))

type Mutation = 'replace' | 'drop' | 'add' | 'repeat' | 'repeat with another value' | 'rename'

function mutate(members: RawMember[], mutation: Mutation, at: number, key: string, value: string): RawMember[] {
  const copy = [...members]
  const i = at % copy.length
  const [oldKey, oldValue] = copy[i] ?? ['""', '""']
  const anywhere = at % (copy.length + 1)
  switch (mutation) {
    case 'replace':
      copy[i] = [oldKey, value]
      break
    case 'drop':
      copy.splice(i, 1)
      break
    case 'add':
      copy.splice(anywhere, 0, [key, value])
      break
    case 'repeat':
      copy.splice(anywhere, 0, [oldKey, oldValue])
      break
    case 'repeat with another value':
      copy.splice(anywhere, 0, [oldKey, value])
      break
    case 'rename':
      copy[i] = [key, oldValue]
      break
  }
  return copy
}

const mutatedPetText = fc
  .tuple(
    validRawMembers(anyStringStyle),
    fc.array(
      fc.tuple(
        fc.constantFrom<Mutation>('replace', 'replace', 'drop', 'add', 'add', 'repeat', 'repeat with another value', 'rename'),
        fc.nat(),
        oddKey,
        oddValue,
      ),
      { minLength: 1, maxLength: 2 },
    ),
    gap,
  )
  .map(([members, mutations, space]) =>
    objectText(
      mutations.reduce((current, [mutation, at, key, value]) => mutate(current, mutation, at, key, value), members),
      space,
    ),
  )

const nameBody = fc
  .tuple(hostileName, anyStringStyle, validValues(NewPetSchema.properties.categoryId))
  .map(([name, style, categoryId]) => objectText([['"name"', jsonString(name, style)], ['"categoryId"', String(categoryId)]], ''))

type TextEdit = 'insert' | 'delete' | 'replace' | 'truncate' | 'prefix' | 'suffix'

const editedPetText = fc
  .tuple(
    validPetText(),
    fc.constantFrom<TextEdit>('insert', 'delete', 'replace', 'truncate', 'prefix', 'suffix'),
    fc.nat(),
    fc.oneof(
      fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }),
      fc.constantFrom('"', '\\', ',', ':', '{', '}', '[', ']', '\u0000', '\ufeff', '\u00a0', ' ', 'x', '0', '-', '.', 'e', '/*', '\\u'),
    ),
  )
  .map(([text, edit, at, insert]) => {
    const i = at % (text.length + 1)
    switch (edit) {
      case 'insert':
        return text.slice(0, i) + insert + text.slice(i)
      case 'delete':
        return text.slice(0, i) + text.slice(i + 1)
      case 'replace':
        return text.slice(0, i) + insert + text.slice(i + 1)
      case 'truncate':
        return text.slice(0, i)
      case 'prefix':
        return insert + text
      case 'suffix':
        return text + insert
    }
  })

/** Byte sequences UTF-8 forbids (overlong, surrogate, beyond U+10FFFF, truncated), a BOM and NUL. */
const BYTE_SEQUENCES = [[0x80], [0xff], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8], [0xc3], [0xef, 0xbb, 0xbf], [0x00]]

const editedPetBytes = fc
  .tuple(validPetText(), fc.nat(), fc.constantFrom(...BYTE_SEQUENCES), fc.boolean())
  .map(([text, at, sequence, replace]) => {
    const bytes = Buffer.from(text, 'utf8')
    const i = at % (bytes.length + 1)
    return Buffer.concat([bytes.subarray(0, i), Buffer.from(sequence), bytes.subarray(replace ? i + 1 : i)])
  })

/** Bodies right around the 16 KiB limit: white-space padding (valid), or a long unknown property. */
const nearLimitBody = fc
  .tuple(validPetText(fc.constant('standard')), fc.integer({ min: -3, max: 3 }), fc.boolean())
  .map(([text, delta, padWithSpace]) => {
    const target = BODY_LIMIT_BYTES + delta
    if (padWithSpace) return text.replace('{', '{' + ' '.repeat(Math.max(0, target - Buffer.byteLength(text))))
    const head = text.replace('{', '{"pad":"')
    return head.replace('{"pad":"', '{"pad":"' + 'x'.repeat(Math.max(0, target - Buffer.byteLength(head) - 2)) + '",')
  })

const deepBody = fc
  .tuple(validRawMembers(fc.constant('standard')), oddKey, deepValue)
  .map(([members, key, value]) => objectText([...members, [key, value]], ''))

/** One fuzzed createPet body: text (sent as UTF-8, a lone surrogate becoming U+FFFD) or raw bytes. */
interface BodyCase {
  kind: string
  body: string | Uint8Array
}

const as = (kind: string) => (body: string | Uint8Array): BodyCase => ({ kind, body })

const bodyCases: fc.Arbitrary<BodyCase> = fc.oneof(
  { weight: 20, arbitrary: validPetText().map(as('valid pet')) },
  { weight: 25, arbitrary: mutatedPetText.map(as('mutated pet')) },
  { weight: 10, arbitrary: nameBody.map(as('hostile name')) },
  { weight: 8, arbitrary: editedPetText.map(as('edited text')) },
  { weight: 5, arbitrary: editedPetBytes.map(as('edited bytes')) },
  { weight: 7, arbitrary: fc.json({ maxDepth: 3 }).map(as('fc.json document')) },
  { weight: 5, arbitrary: fc.anything({ maxDepth: 3, withBigInt: true, withNullPrototype: true }).map((value) => as('fc.anything document')(looseJson(value))) },
  { weight: 3, arbitrary: fc.tuple(validPetText(), fc.constantFrom('[%]', '[%,%]', '%%', '{"pet":%}', '"%"')).map(([text, shape]) => as('wrapped pet')(shape.replaceAll('%', text))) },
  { weight: 4, arbitrary: deepBody.map(as('deep nesting')) },
  { weight: 4, arbitrary: nearLimitBody.map(as('near the size limit')) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 64 }).map(as('random bytes')) },
)

// ---------------------------------------------------------------------------------------------
// Query strings, paths, headers, content types

type Encoding = 'raw' | 'component' | 'plus' | 'bytes' | 'BYTES'

/** `text` percent-encoded one way or another (UTF-8; a lone surrogate becomes U+FFFD, as browsers do). */
function encode(text: string, encoding: Encoding): string {
  if (encoding === 'raw') return text
  return [...Buffer.from(text, 'utf8')]
    .map((byte) => {
      const char = String.fromCharCode(byte)
      if (encoding === 'plus' && byte === 0x20) return '+'
      if ((encoding === 'component' || encoding === 'plus') && /[A-Za-z0-9\-._~]/.test(char)) return char
      const hex = byte.toString(16).padStart(2, '0')
      return `%${encoding === 'BYTES' ? hex.toUpperCase() : hex}`
    })
    .join('')
}

const anyEncoding = fc.constantFrom<Encoding>('raw', 'raw', 'component', 'plus', 'bytes', 'BYTES')
const queryFields = Object.entries(ListPetsQuerySchema.properties) as [string, TSchema][]

const queryKey = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...queryFields.map(([name]) => name)) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'stauts', 'LIMIT', 'Status', 'limit[]', 'status[0]', 'limit ', '', 'offset', 'api_key', 'access_token', '__proto__',
      'constructor', 'prototype', '__proto__[polluted]', 'constructor[prototype][polluted]', 'hasOwnProperty',
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
)

const queryValue = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(...queryFields.map(([, schema]) => validValues(schema).map(String))) },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      '0', '101', '-1', 'abc', '1.5', '1e1', '05', '+5', ' 5', '5 ', '', '100', '1', '020', '99999999999999999999999',
      '9007199254740993', 'AVAILABLE', 'sold ', 'Sold', 'available,sold', 'null', '[]', '{}', '١٠', '１０',
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 10 }) },
)

/** A query the schema accepts: each known parameter at most once, with a valid value, in any order and encoding. */
const validQuery = fc
  .tuple(
    ...queryFields.map(([name, schema]) =>
      fc.option(fc.tuple(fc.constant(name), validValues(schema).map(String), anyEncoding), { nil: undefined }),
    ),
  )
  .map((pairs) => pairs.filter((pair) => pair !== undefined))
  .chain((pairs) => fc.shuffledSubarray(pairs, { minLength: pairs.length, maxLength: pairs.length }))
  .map((pairs) => {
    const query = pairs.map(([key, value, encoding]) => `${encode(key, encoding)}=${encode(value, encoding)}`).join('&')
    return query === '' ? '/v1/pets' : `/v1/pets?${query}`
  })

const hostileQuery = fc
  .tuple(
    fc.array(fc.tuple(queryKey, fc.option(queryValue, { nil: undefined }), anyEncoding), { maxLength: 4 }),
    fc.option(fc.constantFrom('&', '&&', '%', '%zz', '%ff', '=', '==', '#', '#limit=5', '?', '&=&', '%E2%82', ';limit=5'), { nil: undefined }),
    fc.nat(),
    fc.boolean(),
  )
  .map(([pairs, junk, at, question]) => {
    const parts = pairs.map(([key, value, encoding]) =>
      value === undefined ? encode(key, encoding) : `${encode(key, encoding)}=${encode(value, encoding)}`,
    )
    if (junk !== undefined) parts.splice(at % (parts.length + 1), 0, junk)
    return parts.length > 0 || question ? `/v1/pets?${parts.join('&')}` : '/v1/pets'
  })

const queryUrl = fc.oneof({ weight: 1, arbitrary: validQuery }, { weight: 2, arbitrary: hostileQuery })

const petIdSegment = fc.oneof(
  { weight: 3, arbitrary: validValues(PetIdParamsSchema.properties.petId).map(String) },
  { weight: 3, arbitrary: fc.bigInt({ min: 1n, max: 40n }).map(String) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '0', '-1', '01', '1e3', '1.0', ' 1', '1 ', '+1', '%31', '%2B1', '%201', '9223372036854775807', '9223372036854775808',
      '18446744073709551616', '99999999999999999999999', 'abc', '..', '.', '%2e%2e', '%2F', '1%2F2', '%', '%zz', '%ff',
      '%C0%AF', '%00', '1;a', '1,2', '*', '~', '', '١', '１', '1?limit=1', '1#x', '__proto__', 'constructor', '1'.repeat(101),
    ),
  },
  { weight: 2, arbitrary: fc.tuple(fc.string({ unit: 'binary', maxLength: 30 }), anyEncoding).map(([text, encoding]) => encode(text, encoding)) },
  { weight: 1, arbitrary: fc.stringMatching(/^[0-9]{1,25}$/) },
)

const METHODS = ['GET', 'GET', 'GET', 'GET', 'GET', 'GET', 'DELETE', 'PUT', 'PATCH', 'POST'] as const

/** Printable ASCII, tab and Latin-1: what a header value can carry. */
const headerText = (maxLength: number) =>
  fc.string({
    unit: fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.constant(0x09), fc.integer({ min: 0xa0, max: 0xff })).map((code) => String.fromCharCode(code)),
    maxLength,
  })

type TokenShape = 'key' | 'key + x' | 'key - last' | 'KEY' | 'other environment' | 'key + =' | 'prefix only' | 'prefix + random' | 'text'

const authorization = fc.option(
  fc.oneof(
    {
      weight: 4,
      // Each part is mostly right, so that about a third of the headers present the key.
      arbitrary: fc.record({
        scheme: fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR') },
          { weight: 1, arbitrary: fc.constantFrom('Basic', 'Token', 'Bearer:', 'Bearers', '') },
        ),
        separator: fc.oneof({ weight: 3, arbitrary: fc.constant(' ') }, { weight: 1, arbitrary: fc.constantFrom('  ', '\t', '', ' \t') }),
        token: fc.oneof(
          { weight: 3, arbitrary: fc.constant<TokenShape>('key') },
          {
            weight: 2,
            arbitrary: fc.constantFrom<TokenShape>('key + x', 'key - last', 'KEY', 'other environment', 'key + =', 'prefix only', 'prefix + random', 'text'),
          },
        ),
        text: headerText(40),
        trailer: fc.oneof({ weight: 3, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom(' ', '  ', '\t', 'x') }),
      }),
    },
    { weight: 1, arbitrary: headerText(60) },
  ),
  { nil: undefined },
)

function tokenOf(shape: TokenShape, key: string, text: string): string {
  switch (shape) {
    case 'key':
      return key
    case 'key + x':
      return `${key}x`
    case 'key - last':
      return key.slice(0, -1)
    case 'KEY':
      return key.toUpperCase()
    case 'other environment':
      return key.replace(/^ps_live_/, 'ps_test_')
    case 'key + =':
      return `${key}=`
    case 'prefix only':
      return key.slice(0, 12)
    case 'prefix + random':
      return key.slice(0, 12) + text.replace(/[^A-Za-z0-9]/g, '').padEnd(key.length - 12, 'Q').slice(0, key.length - 12)
    case 'text':
      return text
  }
}

const requestId = fc.option(
  fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/), headerText(140), fc.constantFrom('a'.repeat(128), 'a'.repeat(129), 'req 1', 'a/b', 'ü')),
  { nil: undefined },
)

const mediaType = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'application/json', 'application/json', 'application/json', 'application/json', 'APPLICATION/JSON', 'Application/Json',
      'application/json ', 'application/json\t', 'application/json;', 'text/plain', 'application/jsonx', 'application/json-patch+json', 'application/vnd.api+json', 'text/json', 'application/*',
      '*/*', 'json', 'application', 'application/', '', 'multipart/form-data', 'application/x-www-form-urlencoded',
    ),
  },
  { weight: 1, arbitrary: headerText(30) },
)

const mediaParameter = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'charset=utf-8', 'charset=UTF-8', 'charset=utf8', 'charset="utf-8"', 'Charset=UTF-8', 'charset=latin1', 'charset=iso-8859-1',
      'charset=utf-16', 'charset=', 'charset', 'charset=utf-8 ', ' charset=utf-8', 'foo=bar', 'boundary=x', 'q=1', '',
    ),
  },
  { weight: 1, arbitrary: headerText(20) },
)

const contentType = fc.option(
  fc.oneof(
    // Forms the rules accept, so that a fair share of the cases reach the body checks.
    { weight: 2, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'Application/JSON;charset="UTF-8"', 'application/json; charset=utf8') },
    {
      weight: 3,
      arbitrary: fc
        .tuple(mediaType, fc.array(mediaParameter, { maxLength: 3 }), fc.constantFrom(';', '; '))
        .map(([type, parameters, separator]) => [type, ...parameters].join(separator)),
    },
  ),
  { nil: undefined },
)

// ---------------------------------------------------------------------------------------------
// What every answer must be

/** Status and the start of the body, for failure messages. */
const answer = (response: LightMyRequestResponse): string => `${response.statusCode} ${response.body.slice(0, 300)}`

const PRISTINE_PROTOTYPE = Reflect.ownKeys(Object.prototype)

function assertPrototypeIntact(): void {
  assert.deepEqual(Reflect.ownKeys(Object.prototype), PRISTINE_PROTOTYPE, 'Object.prototype gained or lost a property')
  assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype was polluted')
}

/** No 5xx; every error exactly {code, message, status}, catalogued, as JSON, not cached. */
function assertWellFormed(response: LightMyRequestResponse, what: string): void {
  assert.ok(response.statusCode < 500, `${what} → ${answer(response)}`)
  assert.equal(typeof response.headers['x-request-id'], 'string', `${what}: no X-Request-Id`)
  if (response.statusCode >= 400) {
    const body = errorBody(response)
    assert.equal(ERROR_STATUS[body.code as ErrorCode], body.status, `${what}: code ${body.code} is not catalogued as ${body.status}`)
    assert.equal(response.headers['cache-control'], 'no-store', `${what}: error without Cache-Control: no-store`)
  }
}

interface PetText {
  id: string
  name: string
  categoryId: string
  status?: string
}

/** A pet as the service wrote it, integers kept as their digits. */
function readPet(text: string): PetText {
  const members = readFlatObject(text)
  const keys = [...members.keys()]
  assert.deepEqual(keys.filter((key) => key !== 'status'), ['id', 'name', 'categoryId'], `unexpected pet members: ${text}`)
  const id = members.get('id')
  const name = members.get('name')
  const categoryId = members.get('categoryId')
  const status = members.get('status')
  assert.ok(id?.type === 'number' && /^[1-9][0-9]*$/.test(id.raw), `bad id in ${text}`)
  assert.ok(name?.type === 'string', `bad name in ${text}`)
  assert.ok(categoryId?.type === 'number', `bad categoryId in ${text}`)
  const pet: PetText = { id: id.raw, name: name.value, categoryId: categoryId.raw }
  if (status !== undefined) {
    assert.ok(status.type === 'string', `bad status in ${text}`)
    pet.status = status.value
  }
  return pet
}

/** A 201 whose pet, and the pet read back, are exactly what was sent: every digit, every character. */
async function assertStoredAsSent(
  testApp: TestApp,
  key: string,
  response: LightMyRequestResponse,
  sent: Extract<CreateVerdict, { valid: true }>,
): Promise<void> {
  const pet = readPet(response.body)
  const expected: PetText = { id: pet.id, name: sent.name, categoryId: sent.categoryId }
  if (sent.status !== undefined) expected.status = sent.status
  assert.deepEqual(pet, expected, 'the 201 differs from what was sent')
  assert.equal(response.headers.location, `${testApp.config.publicBaseUrl}/v1/pets/${pet.id}`)
  const fetched = await testApp.request(key, { method: 'GET', url: `/v1/pets/${pet.id}` })
  assert.equal(fetched.statusCode, 200, fetched.body)
  assert.deepEqual(readPet(fetched.body), expected, 'the stored pet differs from what was sent')
}

function bytesOf(body: string | Uint8Array): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body)
}

/** Each fuzz target must see both sides of the rules, or it proves little. */
function assertBothSides(what: string, accepted: number, runs: number): void {
  if (runs < 100) return
  const share = accepted / runs
  assert.ok(share > 0.1 && share < 0.9, `${what}: ${accepted} of ${runs} cases were valid; the generators are off balance`)
}

for (const engine of DIRECT_ENGINES) {
  describe(`fuzzing the HTTP surface on ${engine}`, () => {
    // Thousands of requests with one key and from one address: rate limits would answer 429 to
    // cases the rules under test say nothing about. Logs are kept in memory, so only warnings.
    const fx = useTestApp(engine, { env: { LOG_LEVEL: 'warn', RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_FAILED_AUTH_PER_IP: '0' } })
    before(async () => {
      for (const status of ['available', 'pending', 'sold', undefined]) {
        const response = await fx.testApp.request(fx.key, {
          method: 'POST',
          url: '/v1/pets',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ name: `seed ${status ?? 'none'}`, categoryId: 1, ...(status === undefined ? {} : { status }) }),
        })
        assert.equal(response.statusCode, 201, response.body)
      }
    })

    /** Checks `runs` cases with the file's seed; reports how many were valid and the rate. Returns the valid count. */
    async function fuzz<T>(
      context: { diagnostic(message: string): void },
      runs: number,
      cases: fc.Arbitrary<T>,
      check: (value: T) => Promise<boolean>,
    ): Promise<number> {
      let accepted = 0
      const started = performance.now()
      await fc.assert(
        fc.asyncProperty(cases, async (value) => {
          if (await check(value)) accepted++
        }),
        { seed: SEED, numRuns: runs },
      )
      const seconds = (performance.now() - started) / 1000
      context.diagnostic(`${runs} cases (${accepted} valid) in ${seconds.toFixed(1)} s: ${Math.round(runs / seconds)} cases/s, seed ${SEED}`)
      return accepted
    }

    const runs = {
      bodies: runsOf('bodies'),
      contentTypes: runsOf('contentTypes'),
      queries: runsOf('queries'),
      paths: runsOf('paths'),
      headers: runsOf('headers'),
    }

    it(`answers ${runs.bodies} fuzzed createPet bodies as the rules say: 201 only for a valid body, stored exactly`, async (context) => {
      const accepted = await fuzz(context, runs.bodies, bodyCases, async ({ kind, body }) => {
        const bytes = bytesOf(body)
        const verdict = referenceCreatePet(bytes)
        const response = await fx.testApp.request(fx.key, {
          method: 'POST',
          url: '/v1/pets',
          headers: { 'content-type': 'application/json' },
          payload: bytes,
        })
        const what = `${kind} ${JSON.stringify(bytes.toString('utf8').slice(0, 300))}`
        assertWellFormed(response, what)
        if (verdict.valid) {
          assert.equal(response.statusCode, 201, `${what} is valid, but → ${answer(response)}`)
          await assertStoredAsSent(fx.testApp, fx.key, response, verdict)
        } else {
          assert.equal(response.statusCode, verdict.status, `${what} is invalid (${verdict.why}), but → ${answer(response)}`)
        }
        assertPrototypeIntact()
        return verdict.valid
      })
      assertBothSides('bodies', accepted, runs.bodies)
    })

    it(`answers ${runs.contentTypes} fuzzed content types: bodies are judged only as UTF-8 application/json, else 415`, async (context) => {
      // Invalid bodies too: a content type that slipped past the parser must not slip past validation.
      const bodies = fc.oneof({ weight: 2, arbitrary: validPetText(fc.constant('standard')).map(as('valid pet')) }, { weight: 1, arbitrary: bodyCases })
      const accepted = await fuzz(context, runs.contentTypes, fc.record({ type: contentType, body: bodies }), async ({ type, body }) => {
        const bytes = bytesOf(body.body)
        const verdict = referenceCreatePet(bytes)
        // HTTP parsers strip the white space around a field value; inject does not.
        const header = type?.trim()
        const options: InjectOptions = { method: 'POST', url: '/v1/pets', payload: bytes }
        if (header !== undefined) options.headers = { 'content-type': header }
        const response = await fx.testApp.request(fx.key, options)
        const what = `Content-Type ${JSON.stringify(header)} with ${body.kind} ${JSON.stringify(bytes.toString('utf8').slice(0, 200))}`
        assertWellFormed(response, what)
        if (bytes.length === 0) {
          // No body: "a body is required" (400) or, with a content type, the type refused first (415).
          assert.ok([400, 415].includes(response.statusCode), `${what}: no body at all, but → ${answer(response)}`)
          return false
        }
        const expected = acceptsContentType(header)
        if (response.statusCode === 415) {
          assert.notEqual(expected, 'accept', `${what} must be accepted, but → ${answer(response)}`)
          return false
        }
        // Which of 413 and 415 an oversized body of a refused type gets is left open.
        if (bytes.length > BODY_LIMIT_BYTES) {
          assert.equal(response.statusCode, 413, `${what} is over 16 KiB, but → ${answer(response)}`)
          return false
        }
        assert.notEqual(expected, 'refuse', `${what} must be refused with 415, but → ${answer(response)}`)
        if (!verdict.valid) {
          assert.equal(response.statusCode, verdict.status, `${what} is invalid (${verdict.why}), but → ${answer(response)}`)
          return false
        }
        assert.equal(response.statusCode, 201, `${what} is valid, but → ${answer(response)}`)
        await assertStoredAsSent(fx.testApp, fx.key, response, verdict)
        return true
      })
      assertBothSides('content types', accepted, runs.contentTypes)
    })

    it(`answers ${runs.queries} fuzzed listPets query strings: 200 only for a valid query, with what it asked for`, async (context) => {
      const accepted = await fuzz(context, runs.queries, queryUrl, async (url) => {
        // The query as it reaches the server: the client's URL parser normalises it first.
        const verdict = referenceListQuery(new URL(url, 'http://localhost').search.slice(1))
        const response = await fx.testApp.request(fx.key, { method: 'GET', url })
        assertWellFormed(response, url)
        if (!verdict.valid) {
          assert.equal(response.statusCode, 400, `${url} is invalid (${verdict.why}), but → ${answer(response)}`)
          return false
        }
        assert.equal(response.statusCode, 200, `${url} is valid, but → ${answer(response)}`)
        const pets = JSON.parse(response.body) as { id: number; status?: string }[]
        assert.ok(Array.isArray(pets) && pets.length <= verdict.limit, `${url} → ${pets.length} pets`)
        for (const [i, pet] of pets.entries()) {
          if (verdict.status !== undefined) assert.equal(pet.status, verdict.status, `${url} listed a pet of another status`)
          if (i > 0) assert.ok(pet.id > (pets[i - 1]?.id ?? 0), `${url}: ids are not ascending`)
          assert.ok(BigInt(pet.id) > verdict.afterId, `${url} listed a pet before its cursor`)
        }
        return true
      })
      assertBothSides('query strings', accepted, runs.queries)
    })

    it(`answers ${runs.paths} fuzzed /v1/pets/{petId} paths and methods: getPet only for a valid id, 405 for other methods`, async (context) => {
      const cases = fc.record({ method: fc.constantFrom(...METHODS), segment: petIdSegment })
      const accepted = await fuzz(context, runs.paths, cases, async ({ method, segment }) => {
        const url = `/v1/pets/${segment}`
        const response = await fx.testApp.request(fx.key, { method, url })
        const what = `${method} ${url}`
        assertWellFormed(response, what)
        // Only a path that still names one segment under /v1/pets once the URL parser is done is judged.
        const parsed = new URL(url, 'http://localhost')
        const raw = /^\/v1\/pets\/([^/]*)$/.exec(parsed.pathname)?.[1]
        if (raw === undefined || raw.length > 100) return false
        let petId: string | undefined
        try {
          petId = decodeURIComponent(raw)
        } catch {
          assert.equal(response.statusCode, 400, `${what} is not a well-formed URL, but → ${answer(response)}`)
          return false
        }
        if (method !== 'GET') {
          assert.equal(response.statusCode, 405, `${what} → ${answer(response)}`)
          assert.equal(response.headers.allow, 'GET, HEAD')
          return false
        }
        if (!isValidPetId(petId)) {
          assert.equal(response.statusCode, 400, `${what} names no valid id, but → ${answer(response)}`)
          return false
        }
        if (formDecode(parsed.search.slice(1)).length > 0) {
          assert.equal(response.statusCode, 400, `${what} has query parameters, which getPet takes none of, but → ${answer(response)}`)
          return false
        }
        assert.ok([200, 404].includes(response.statusCode), `${what} → ${answer(response)}`)
        if (response.statusCode === 200) assert.equal(readPet(response.body).id, petId, `${what} answered another pet`)
        return true
      })
      assertBothSides('paths', accepted, runs.paths)
    })

    it(`answers ${runs.headers} fuzzed Authorization and X-Request-Id headers: 200 only for the key itself`, async (context) => {
      const cases = fc.record({ authorization, requestId })
      const accepted = await fuzz(context, runs.headers, cases, async (value) => {
        let header: string | undefined
        if (typeof value.authorization === 'string') header = value.authorization
        else if (value.authorization !== undefined) {
          const { scheme, separator, token, text, trailer } = value.authorization
          header = `${scheme}${separator}${tokenOf(token, fx.key, text)}${trailer}`
        }
        // HTTP parsers strip the white space around a field value; inject does not.
        header = header?.trim()
        const headers: Record<string, string> = {}
        if (header !== undefined) headers.authorization = header
        if (value.requestId !== undefined) headers['x-request-id'] = value.requestId
        const response = await fx.testApp.app.inject({ method: 'GET', url: '/v1/pets?limit=1', headers })
        const what = `Authorization ${JSON.stringify(header)}`
        assertWellFormed(response, what)
        const echoed = response.headers['x-request-id']
        if (value.requestId !== undefined && isEchoableRequestId(value.requestId)) assert.equal(echoed, value.requestId)
        else assert.match(String(echoed), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
        if (presentsKey(header, fx.key)) {
          assert.equal(response.statusCode, 200, `${what} presents the key, but → ${answer(response)}`)
          return true
        }
        assert.equal(response.statusCode, 401, `${what} does not present the key, but → ${answer(response)}`)
        assert.match(String(response.headers['www-authenticate']), /^Bearer realm="petstore"/)
        return false
      })
      assertBothSides('headers', accepted, runs.headers)
    })
  })
}
