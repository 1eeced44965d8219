import { Kind, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors'
import type { FastifySchemaCompiler } from 'fastify'
import { ApiError } from '../errors.js'
import { rangeOfSchema, registerSchemaKinds, ruleOfSchema } from './schema-types.js'

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
  registerSchemaKinds()
  return ({ schema, httpPart = 'body' }) => {
    const compiled = TypeCompiler.Compile(schema, references)
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

function describe(httpPart: string, data: unknown, errors: Iterable<ValueError>): string {
  // Fastify hands a missing body to the validator as null, so the two read alike.
  if (httpPart === 'body' && (data === undefined || data === null)) {
    return 'A request body is required and must be a JSON object (none was sent, or it was null).'
  }
  if (httpPart === 'body' && (typeof data !== 'object' || Array.isArray(data))) {
    return 'The request body must be a JSON object.'
  }
  const seen = new Set<string>()
  const problems: string[] = []
  for (const error of errors) {
    if (seen.has(error.path) || problems.length === MAX_REPORTED) continue
    seen.add(error.path)
    problems.push(explain(httpPart, error))
  }
  return `Invalid ${PART_NAMES[httpPart] ?? httpPart}: ${problems.join('; ')}.`
}

function explain(httpPart: string, error: ValueError): string {
  const name = error.path.slice(1).replaceAll('~1', '/').replaceAll('~0', '~')
  if (error.type === ValueErrorType.ObjectAdditionalProperties) {
    return httpPart === 'body' ? `unknown property '${name}'` : `unknown parameter '${name}'`
  }
  if (error.type === ValueErrorType.ObjectRequiredProperty) return `'${name}' is required`
  const schema = error.schema
  const range = rangeOfSchema(schema)
  switch (schema[Kind]) {
    case 'Int64':
      return `'${name}' must be a JSON integer from ${range?.minimum} to ${range?.maximum}`
    case 'IntegerText':
      return `'${name}' must be an integer from ${range?.minimum} to ${range?.maximum}, written as decimal digits, given once`
    case 'StringEnum':
      return `'${name}' must be one of ${(schema.enum as string[]).join(', ')}`
    case 'Text':
      return `'${name}' must be a JSON string of well-formed Unicode without U+0000, with at least one non-blank character and at most ${String(schema.maxLength)} characters`
    default: {
      const rule = ruleOfSchema(schema)
      return rule === undefined ? `'${name}': ${error.message}` : `'${name}' ${rule}`
    }
  }
}
