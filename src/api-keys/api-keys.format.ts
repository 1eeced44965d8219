import type { Environment } from '../config.js'

/** What every key begins with, per environment; the rest is its secret. */
export const KEY_PREFIX: Record<Environment, string> = { production: 'ps_live_', staging: 'ps_test_' }

/** Base62 characters: 32 × log2(62) ≈ 190 random bits. */
export const SECRET_LENGTH = 32

// A prefix followed by any base62 text: a whole key, or part of one cut short. The prefix may also
// arrive percent-encoded (`ps%5Flive%5F…`) in a path or query string, so that form counts too.
const KEY_SHAPE = /ps(?:_|%5f)(live|test)(?:_|%5f)[A-Za-z0-9]+/gi

/**
 * `text` with anything shaped like one of our keys replaced by its prefix and `…[redacted]`. Every
 * error message and every log line passes through it: a client that pastes its key into a path, a
 * query string, a body field or a header must not find it echoed back, nor its operators in the logs.
 */
export function redactKeys(text: string): string {
  return text.replace(KEY_SHAPE, (_match, environment: string) => `ps_${environment.toLowerCase()}_…[redacted]`)
}

/** Whether `text` holds something shaped like one of our keys. */
export function containsKey(text: string): boolean {
  return KEY_SHAPE_ANYWHERE.test(text)
}

const KEY_SHAPE_ANYWHERE = new RegExp(KEY_SHAPE.source, 'i')
