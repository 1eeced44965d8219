/*
 * Redaction of our secrets wherever they turn up: error messages, log lines, spans, a CLI's output. It is
 * plumbing every layer uses before any feature loads, so the marks of a secret, its prefixes, are kept
 * here; the API keys are made on them (src/api-keys/api-keys.format.ts).
 */

// The parts of the prefixes, which the patterns below match one by one.
const [OURS, LIVE, TEST, END] = ['ps_', 'live', 'test', '_'] as const

/** What a secret of ours begins with: a key of production (`live`) or of staging (`test`), then base62. */
export const SECRET_PREFIXES = { live: `${OURS}${LIVE}${END}`, test: `${OURS}${TEST}${END}` } as const

// Any character of a key may arrive encoded, and is then echoed or logged as it arrived: a path is
// echoed as sent, so `%70s_live_…`, `ps_live_%51…` or every byte encoded (in either case of hex) must
// count as much as the key itself; so must an encoding encoded again (`%2570`: a proxy or a client
// that encodes twice), and a JavaScript or JSON escape (`\u0070`, `\x70`) whose backslash a log line
// may itself have escaped. A reader undoes any of these at a glance, so each is as good as the key.
const ENCODED = (hex: string) => `%(?:25)*${hex}|\\\\+(?:u00|x)${hex}`
/** `char` as it may arrive: itself, or its code, in either case of a letter, in any of those encodings. */
function anyForm(char: string): string {
  const codes = new Set([char.toLowerCase(), char.toUpperCase()].map((form) => form.charCodeAt(0).toString(16)))
  return `(?:${char}|${ENCODED(`(?:${[...codes].join('|')})`)})`
}
const anyForms = (word: string) => [...word].map(anyForm).join('')
// 0-9, A-Z and a-z by their code points: 30-39, 41-5A, 61-7A.
const SECRET_CHAR = `(?:[a-z0-9]|${ENCODED('(?:3[0-9]|[46][1-9a-f]|[57][0-9a])')})`

/** A key's prefix in any of the encodings above; `live` is how its `live` is matched. */
const prefix = (live: string) => `${anyForms(OURS)}(?:${live}|${anyForms(TEST)})${anyForm(END)}`

// A prefix followed by any base62 text: a whole key, or part of one cut short. The text ends where
// another prefix begins: the `ps` of a key pasted right after the first (or over its last characters, or
// into its middle) would otherwise be taken as the first one's secret, and the rest of the second key,
// secret and all, would no longer follow a prefix.
const KEY_SHAPE = new RegExp(`${prefix(`(${anyForms(LIVE)})`)}(?:(?!${prefix(anyForms(LIVE))})${SECRET_CHAR})+`, 'gi')

// Every form of a key holds an `s` next to an `_` (both as they are), a `%` or a backslash: a text
// with none of them, as most log lines are, is passed over by one scan that costs less than the search.
const MAY_HOLD_KEY = /s_|[%\\]/i

/**
 * `text` with anything shaped like one of our keys, in any of the encodings above, replaced by its
 * prefix and `…[redacted]`. Every error message and every log line passes through it: a client that
 * pastes its key into a path, a query string, a body field or a header must not find it echoed back,
 * nor its operators in the logs.
 */
export function redactKeys(text: string): string {
  if (!MAY_HOLD_KEY.test(text)) return text
  return text.replace(KEY_SHAPE, (_match, live: string | undefined) => `${live === undefined ? SECRET_PREFIXES.test : SECRET_PREFIXES.live}…[redacted]`)
}

/** Whether `text` holds something shaped like one of our keys, in any of the encodings above. */
export function containsKey(text: string): boolean {
  return MAY_HOLD_KEY.test(text) && KEY_SHAPE_ANYWHERE.test(text)
}

const KEY_SHAPE_ANYWHERE = new RegExp(KEY_SHAPE.source, 'i')
