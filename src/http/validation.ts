import { type TSchema, Type } from 'typebox'
import { Compile } from 'typebox/compile'
import type { TLocalizedValidationError } from 'typebox/error'
import type { FastifySchemaCompiler } from 'fastify'
import { ApiError } from '../errors.js'
import { checkOfSchema, customCheckOf, idOfSchema, ruleOfSchema } from './schema-types.js'

const MAX_REPORTED = 5

const PART_NAMES: Record<string, string> = {
  body: 'request body',
  querystring: 'query parameters',
  params: 'path parameters',
  headers: 'headers',
}

/**
 * Compiles route schemas with TypeBox's compiler: it never coerces or strips anything, so a
 * value passes exactly as the client sent it or is refused with every problem named.
 * A valid value that holds an API key (a key pasted into a pet's name or an `Idempotency-Key`) is
 * refused too: it would be stored and shown to whoever reads it, and the service must not keep a
 * secret in clear. Changing it silently is not an option either.
 */
export function createValidatorCompiler(
  references: TSchema[],
  /** Whether a string holds an API key (api-keys.format.ts). */
  containsKey: (text: string) => boolean,
): FastifySchemaCompiler<TSchema> {
  const shared = new Map(references.flatMap((reference) => {
    const id = idOfSchema(reference)
    return id === undefined ? [] : [[id, reference]]
  }))
  return ({ schema, httpPart = 'body' }) => {
    const compiled = Compile(checked(schema, shared))
    // Of headers, only those the route declares: they come with all the others, `Authorization` among them.
    const declared = httpPart === 'headers' ? Object.keys((schema as { properties?: object }).properties ?? {}) : undefined
    return (data: unknown) => {
      if (!compiled.Check(data)) return { error: new ApiError('invalid_request', describe(httpPart, data, compiled.Errors(data))) }
      const holder = fieldHoldingKey(declared, data, containsKey)
      // `true`: valid as it is (Fastify keeps the value it has; `{ value }` would be an object per request).
      if (holder === undefined) return true
      return {
        error: new ApiError(
          'invalid_request',
          `Invalid ${PART_NAMES[httpPart] ?? httpPart}: '${holder}' holds an API key; nothing was stored. ` +
            'Send keys only in the Authorization header, and revoke this one: it has been exposed.',
        ),
      }
    }
  }
}

/**
 * The schema the validator compiles for `schema`: a shared schema's `$ref` replaced by that schema, and
 * each schema that states a rule (the custom kinds of schema-types.ts, and a few plain ones given one)
 * replaced by a refinement that checks with its own check and fails with its rule alone. A custom
 * kind's JSON Schema says what the client sends (an integer), not what the validator sees (a BigInt,
 * or a parameter's text). Nothing of this reaches the document: it is made from `schema` itself.
 */
function checked(schema: TSchema, shared: ReadonlyMap<string, TSchema>): TSchema {
  const rule = ruleOfSchema(schema)
  if (rule !== undefined) {
    const check = customCheckOf(schema) ?? checkOfSchema(schema)
    return Type.Refine(Type.Unknown(), (value) => check(value), () => rule)
  }
  const reference = (schema as { $ref?: unknown }).$ref
  if (typeof reference === 'string') {
    const target = shared.get(reference)
    if (target === undefined) throw new Error(`no shared schema has the $id ${reference}`)
    return checked(target, shared)
  }
  const properties = (schema as { properties?: Record<string, TSchema> }).properties
  if (properties === undefined) return schema
  // A copy with every own property, TypeBox's hidden ones included, and the members' schemas replaced.
  const copy = Object.defineProperties({}, Object.getOwnPropertyDescriptors(schema)) as TSchema & { properties: Record<string, TSchema> }
  copy.properties = Object.fromEntries(Object.entries(properties).map(([name, member]) => [name, checked(member, shared)]))
  return copy
}

/**
 * The first member of a valid `data` whose string value holds an API key: of the `declared` names if
 * given, else of all its own.
 */
function fieldHoldingKey(
  declared: readonly string[] | undefined,
  data: unknown,
  containsKey: (text: string) => boolean,
): string | undefined {
  if (typeof data !== 'object' || data === null) return undefined
  const record = data as Record<string, unknown>
  if (declared !== undefined) {
    for (const name of declared) {
      const value = record[name]
      if (typeof value === 'string' && containsKey(value)) return name
    }
    return undefined
  }
  // A loop rather than Object.keys().find(): it runs on every validated part of every request.
  for (const name in record) {
    if (!Object.hasOwn(record, name)) continue
    const value = record[name]
    if (typeof value === 'string' && containsKey(value)) return name
  }
  return undefined
}

function describe(httpPart: string, data: unknown, errors: Iterable<TLocalizedValidationError>): string {
  // Fastify hands a missing body to the validator as null, so the two read alike.
  if (httpPart === 'body' && (data === undefined || data === null)) {
    return 'A request body is required and must be a JSON object (none was sent, or it was null).'
  }
  if (httpPart === 'body' && (typeof data !== 'object' || Array.isArray(data))) {
    return 'The request body must be a JSON object.'
  }
  const seen = new Set<string>()
  const problems: string[] = []
  for (const { path, problem } of problemsOf(httpPart, errors)) {
    if (seen.has(path) || problems.length === MAX_REPORTED) continue
    seen.add(path)
    problems.push(problem)
  }
  return `Invalid ${PART_NAMES[httpPart] ?? httpPart}: ${problems.join('; ')}.`
}

/**
 * Each problem with the member it is about, in TypeBox's order: the missing members, then the unknown
 * ones, then those that break their rule. A missing or unknown member comes as one error of its object
 * naming them all (and each unknown one again, as breaking `additionalProperties: false`).
 */
function* problemsOf(httpPart: string, errors: Iterable<TLocalizedValidationError>): Generator<{ path: string; problem: string }> {
  for (const error of errors) {
    const { keyword, instancePath, params } = error
    if (keyword === 'required') {
      for (const name of params.requiredProperties) {
        yield { path: `${instancePath}/${escaped(name)}`, problem: `'${name}' is required` }
      }
    } else if (keyword === 'additionalProperties') {
      for (const name of params.additionalProperties) {
        const problem = httpPart === 'body' ? `unknown property '${name}'` : `unknown parameter '${name}'`
        yield { path: `${instancePath}/${escaped(name)}`, problem }
      }
    } else if (keyword === 'boolean' && error.schemaPath.endsWith('/additionalProperties')) {
      continue
    } else {
      const name = instancePath.slice(1).replaceAll('~1', '/').replaceAll('~0', '~')
      // A refinement's message is the rule of its schema (see checked()).
      yield { path: instancePath, problem: keyword === '~refine' ? `'${name}' ${error.message}` : `'${name}': ${error.message}` }
    }
  }
}

/** A name as a segment of a JSON Pointer (RFC 6901). */
function escaped(name: string): string {
  return name.replaceAll('~', '~0').replaceAll('/', '~1')
}
