/*
 * int64 values as text. JavaScript numbers are exact only up to 2^53, so ids and category ids
 * travel as BigInts inside the service and as exact decimal digits on the wire and in the document.
 */

export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n

const INTEGER_TEXT = /^-?(0|[1-9][0-9]*)$/

/** Parses the decimal text of an integer, exactly: no sign tricks, leading zeros or exponents. */
export function parseIntegerText(text: string): bigint | undefined {
  return INTEGER_TEXT.test(text) && text !== '-0' && text.length <= 20 ? BigInt(text) : undefined
}

/** Digits a number always holds exactly: 15 of them stay below 2^53. */
export const EXACT_NUMBER_DIGITS = 15

/**
 * Whether `text` is the decimal text of an integer (as parseIntegerText reads it) from `minimum` to `maximum`.
 * A short text is compared as a number, without making a BigInt: it is exact, and a bound's nearest number
 * orders against it as the bound does (a bound that is not exact lies beyond 2^53, farther than the text).
 */
export function integerTextWithin(text: string, minimum: bigint, maximum: bigint): boolean {
  if (text.length > EXACT_NUMBER_DIGITS) {
    const parsed = parseIntegerText(text)
    return parsed !== undefined && parsed >= minimum && parsed <= maximum
  }
  if (!INTEGER_TEXT.test(text) || text === '-0') return false
  const value = Number(text)
  return value >= Number(minimum) && value <= Number(maximum)
}

/**
 * The int64 range's ends as a JSON Schema carries them (the nearest number: 2^63 for 2^63 - 1),
 * and their exact digits.
 */
const INEXACT_INT64_BOUNDS = new Map([INT64_MIN, INT64_MAX].map((bound) => [Number(bound), String(bound)]))

// JSON.rawJSON (Node 21+, not yet in TypeScript's lib): JSON.stringify writes its text unchanged.
const { rawJSON } = JSON as unknown as { rawJSON: (text: string) => unknown }

/**
 * Writes the int64 bounds of every integer schema in `document` exactly: as numbers,
 * 9223372036854775807 would be written 9223372036854776000. Call it on the finished document:
 * what it puts in survives JSON.stringify, not a copy.
 */
export function writeInt64BoundsExactly(document: unknown): void {
  if (typeof document !== 'object' || document === null) return
  const node = document as Record<string, unknown>
  for (const [key, value] of Object.entries(node)) {
    const digits = typeof value === 'number' ? INEXACT_INT64_BOUNDS.get(value) : undefined
    if ((key === 'minimum' || key === 'maximum') && node.type === 'integer' && digits !== undefined) {
      node[key] = rawJSON(digits)
    } else writeInt64BoundsExactly(value)
  }
}
