/**
 * What a key may do. Each operation needs one scope; a key holds one or more. The scopes are
 * independent, as OAuth's are (RFC 6749 §3.3): `pets:write` alone lets a key create pets and read the
 * 201 of its own creates, nothing else.
 */
export const SCOPES = ['pets:read', 'pets:write'] as const

export type Scope = (typeof SCOPES)[number]

/**
 * The operations each scope lets a key call, as the help and the API document tell a person. Each
 * operation's schema declares the scope it needs; test/http/openapi.test.ts checks the two agree.
 */
const SCOPE_OPERATIONS: Record<Scope, readonly string[]> = { 'pets:read': ['listPets', 'getPet'], 'pets:write': ['createPet'] }

/** Each scope followed by its operations, `pets:read (listPets, getPet)`, in SCOPES order; `mark` sets a scope apart (in Markdown: backticks). */
export const scopesAndOperations = (mark: (scope: Scope) => string = (scope) => scope): string[] =>
  SCOPES.map((scope) => `${mark(scope)} (${SCOPE_OPERATIONS[scope].join(', ')})`)

const isScope = (text: string): text is Scope => (SCOPES as readonly string[]).includes(text)

/**
 * Scopes as written by a person (`pets:read,pets:write`, in any order, repeated or not): the known
 * ones in canonical order, or the words that are not scopes.
 */
export function parseScopes(texts: readonly string[]): { scopes: Scope[] } | { unknown: string[] } {
  const words = texts.flatMap((text) => text.split(',')).map((word) => word.trim())
  const unknown = words.filter((word) => !isScope(word))
  if (unknown.length > 0) return { unknown }
  return { scopes: SCOPES.filter((scope) => words.includes(scope)) }
}

/**
 * The stored form: space-separated, as OAuth's `scope` parameter. A stored word this version does
 * not know (written by a newer one) grants nothing here.
 */
export const storedScopes = {
  write: (scopes: readonly Scope[]): string => scopes.join(' '),
  read: (text: string): Scope[] => SCOPES.filter((scope) => text.split(' ').includes(scope)),
}
