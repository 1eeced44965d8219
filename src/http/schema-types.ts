import { type Static, type TSchema, type TSchemaOptions as SchemaOptions, Type, type TUnsafe } from 'typebox'
import { Compile } from 'typebox/compile'
import { INT64_MAX, INT64_MIN, integerTextWithin } from '../shared/int64.js'

/*
 * Custom kinds of schema. Each validates what the service really receives (a BigInt from the
 * lossless JSON parser, the raw text of a query or path parameter) while the JSON Schema it
 * carries, which feeds the OpenAPI document, says what the client sends (an integer).
 * Their name, check and bounds are under symbols, which JSON serialisation leaves out, so the
 * document shows plain JSON Schema; the validator (validation.ts) checks with them instead.
 */

/** The name of a custom kind, under a symbol so that it stays out of the document. */
const Kind = Symbol('Kind')
/** The check of a custom kind, which stands for its JSON Schema when validating. */
const Check = Symbol('Check')

type KindName = 'Int64' | 'IntegerText' | 'Named' | 'StringEnum' | 'Text'

/** Marks `schema` as a custom kind checked by `check`, whose failures state `rule`. */
function custom<T extends TSchema>(schema: T, kind: KindName, check: (value: unknown) => boolean, rule: string): T {
  return withRule(Object.assign(schema, { [Kind]: kind, [Check]: check }), rule)
}

/** The custom kind of a schema (Int64, IntegerText, Named, StringEnum, Text), if it is one. */
export function kindOfSchema(schema: TSchema): KindName | undefined {
  return (schema as { [Kind]?: KindName })[Kind]
}

/** A schema's `$id`, which TypeBox's TSchema leaves untyped. */
export function idOfSchema(schema: TSchema): string | undefined {
  return (schema as { $id?: string }).$id
}

/** The check of a custom kind; undefined for any other schema. */
export function customCheckOf(schema: TSchema): ((value: unknown) => boolean) | undefined {
  return (schema as { [Check]?: (value: unknown) => boolean })[Check]
}

interface RangeOptions {
  minimum: bigint
  maximum: bigint
}

function inRange(value: bigint, { minimum, maximum }: RangeOptions): boolean {
  return value >= minimum && value <= maximum
}

/** Exact bounds as BigInts, under a symbol so that they stay out of the JSON document. */
const Range = Symbol('Range')

interface RangedSchema extends TSchema {
  [Range]: RangeOptions
}

/**
 * The check of a schema as the validator makes it: a custom kind's own, else the schema compiled,
 * at its first use (a Named schema's target runs on every request that carries one, a pet's status).
 */
const compiledChecks = new WeakMap<TSchema, (value: unknown) => boolean>()
export function checkOfSchema(schema: TSchema): (value: unknown) => boolean {
  const own = customCheckOf(schema)
  if (own !== undefined) return own
  let check = compiledChecks.get(schema)
  if (check === undefined) {
    const compiled = Compile(schema)
    check = (value) => compiled.Check(value)
    compiledChecks.set(schema, check)
  }
  return check
}

/** The exact bounds of an Int64 or IntegerText schema, for error messages. */
export function rangeOfSchema(schema: TSchema): RangeOptions | undefined {
  return (schema as Partial<RangedSchema>)[Range]
}

/**
 * JSON Schema bounds for the document, both always stated. A JavaScript number holds every integer
 * up to 2^53; beyond, only the ends of the int64 range may be bounds: the schema carries them as
 * the nearest number (2^63 for 2^63 - 1) and writeInt64BoundsExactly (int64.ts) puts their digits in the document.
 */
function documentedBounds({ minimum, maximum }: RangeOptions): { minimum: number; maximum: number } {
  return { minimum: documentedBound(minimum), maximum: documentedBound(maximum) }
}

function documentedBound(bound: bigint): number {
  const exact = bound >= BigInt(Number.MIN_SAFE_INTEGER) && bound <= BigInt(Number.MAX_SAFE_INTEGER)
  if (exact || bound === INT64_MIN || bound === INT64_MAX) return Number(bound)
  throw new Error(`the bound ${bound} cannot be written exactly in the OpenAPI document`)
}

/**
 * A JSON integer in the signed 64-bit range (or within `minimum` and `maximum`), received as a
 * BigInt (see json-body.ts) and sent as exact digits.
 */
export function Int64(options: SchemaOptions & { minimum?: bigint; maximum?: bigint } = {}): TUnsafe<bigint> {
  const { minimum = INT64_MIN, maximum = INT64_MAX, ...rest } = options
  const range = { minimum, maximum }
  return custom(
    Type.Unsafe<bigint>({ ...rest, [Range]: range, type: 'integer', format: 'int64', ...documentedBounds(range) }),
    'Int64',
    (value) => typeof value === 'bigint' && inRange(value, range),
    `must be a JSON integer from ${minimum} to ${maximum}`,
  )
}

/**
 * A query or path parameter holding the decimal text of an integer. The handler parses it;
 * the document shows an integer with its bounds.
 */
export function IntegerText(
  options: SchemaOptions & { minimum: bigint; maximum: bigint; default?: number; format?: string },
): TUnsafe<string> {
  const { minimum, maximum, ...rest } = options
  const range = { minimum, maximum }
  return custom(
    Type.Unsafe<string>({ ...rest, [Range]: range, type: 'integer', ...documentedBounds(range) }),
    'IntegerText',
    (value) => typeof value === 'string' && integerTextWithin(value, minimum, maximum),
    `must be an integer from ${minimum} to ${maximum}, written as decimal digits, given once`,
  )
}

export function StringEnum<const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnsafe<T[number]> {
  const allowed: readonly string[] = values
  return custom(
    Type.Unsafe<T[number]>({ ...options, type: 'string', enum: [...values] }),
    'StringEnum',
    (value) => typeof value === 'string' && allowed.includes(value),
    `must be one of ${values.join(', ')}`,
  )
}

/** The schema a Named schema stands for, under a symbol so that it stays out of the document. */
const Target = Symbol('Target')

interface NamedSchema extends TSchema {
  [Target]: TSchema
}

/**
 * A use of a shared schema (one with an `$id`, added with `addSchema`): the document and the
 * serializer see `{"$ref": "<$id>"}`, one named component however many places use it, while the
 * validator checks `target` itself and so needs no list of references. Validation messages state
 * the target's rule. With options (a description), the reference is wrapped in `allOf`:
 * @fastify/swagger drops whatever stands beside a `$ref`, as OpenAPI 3.0 required (the document
 * unwraps it again: see openapi.ts).
 */
export function Named<T extends TSchema>(target: T, options: SchemaOptions = {}): TUnsafe<Static<T>> {
  const id = idOfSchema(target)
  if (id === undefined) throw new Error('Named: the target schema has no $id')
  const reference = { $ref: id }
  const json = Object.keys(options).length === 0 ? reference : { ...options, allOf: [reference] }
  const schema = Type.Unsafe<Static<T>>({ ...json, [Target]: target })
  const rule = ruleOfSchema(target)
  if (rule === undefined) throw new Error(`Named: the target schema ${id} states no rule`)
  return custom(schema, 'Named', (value) => checkOfSchema(target)(value), rule)
}

/**
 * `{"$ref": "<$id>"}` to a shared schema, typed as that schema, for the validator (which compiles with
 * the shared schemas as references) and the document alike: `Type.Ref(schema)` did this until TypeBox
 * 0.34 deprecated it for `Type.Ref('<$id>')`, which alone types as unknown.
 */
export function RefTo<T extends TSchema>(target: T, options: SchemaOptions = {}): TUnsafe<Static<T>> {
  const id = idOfSchema(target)
  if (id === undefined) throw new Error('RefTo: the target schema has no $id')
  return Type.Unsafe<Static<T>>(Type.Ref(id, options))
}

/** The shared schema a Named schema stands for; any other schema itself. */
export function targetOfSchema(schema: TSchema): TSchema {
  return (schema as Partial<NamedSchema>)[Target] ?? schema
}

/** Well-formed Unicode without U+0000, with a non-blank character and at most `maxLength` code points. */
export function Text(options: SchemaOptions & { maxLength: number }): TUnsafe<string> {
  const { maxLength } = options
  return custom(
    Type.Unsafe<string>({ ...options, type: 'string', minLength: 1, pattern: '\\S' }),
    'Text',
    (value) =>
      typeof value === 'string' &&
      /\S/.test(value) &&
      // A lone surrogate cannot be stored as UTF-8 (it would come back altered), and PostgreSQL
      // text cannot hold U+0000: both are refused on every engine alike.
      !/\p{Cs}/u.test(value) &&
      !value.includes('\u0000') &&
      // A string has no more code points than UTF-16 units: only a longer one needs counting.
      (value.length <= maxLength || [...value].length <= maxLength),
    `must be a JSON string of well-formed Unicode without U+0000, with at least one non-blank character and at most ${String(maxLength)} characters`,
  )
}

/** A person-readable rule for a schema, under a symbol so that it stays out of the document. */
const Rule = Symbol('Rule')

/** Attaches the rule that a validation message states when `schema` is not met. */
export function withRule<T extends TSchema>(schema: T, rule: string): T {
  return Object.assign(schema, { [Rule]: rule })
}

export function ruleOfSchema(schema: TSchema): string | undefined {
  return (schema as { [Rule]?: string })[Rule]
}
