import { type TSchema, Type } from 'typebox'

/** An instant as RFC 9745's `Deprecation` header writes it: `@<unix seconds>`. */
export const deprecationHeaderValue = (at: Date): string => `@${Math.floor(at.getTime() / 1000)}`

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December']

/**
 * A day as the specification and the document's prose write it: `5 December 2030` (UTC). Written out
 * rather than by `toLocaleDateString`: Intl's first use reads the locale data of every locale ICU has, and
 * those pages of Node's binary then stay in the process's resident memory (bench/findings.md).
 */
export const dayInWords = (at: Date): string => `${at.getUTCDate()} ${MONTHS[at.getUTCMonth()] ?? ''} ${at.getUTCFullYear()}`

/**
 * The headers createDeprecationHooks puts on the answers of a deprecated operation, as its responses
 * declare them; `successor` is the operation that replaces it and its path.
 */
export function deprecationHeadersSchema(sunset: Date, successor: { operationId: string; path: string }): Record<string, TSchema> {
  return {
    // GETPET_DEPRECATED_AT is no later than the sunset (loadConfig), so its value is no longer.
    Deprecation: Type.String({
      maxLength: deprecationHeaderValue(sunset).length,
      pattern: '^@[0-9]+$',
      description: 'When the operation was deprecated, as `@<unix seconds>` (RFC 9745).',
    }),
    Sunset: Type.Literal(sunset.toUTCString(), { description: 'When the operation will be removed (RFC 8594).' }),
    Link: Type.String({
      pattern: `^<[^>]*${successor.path}>; rel="successor-version"$`,
      description: `The replacement, ${successor.operationId} under \`PUBLIC_BASE_URL\`: \`<https://api.example.com${successor.path}>; rel="successor-version"\`.`,
    }),
  }
}
