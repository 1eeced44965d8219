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
