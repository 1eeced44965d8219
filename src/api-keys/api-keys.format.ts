import type { Environment } from '../config.js'
import { SECRET_PREFIXES } from '../shared/redaction.js'

/**
 * What every key begins with, per environment; the rest is its secret. The prefixes are what marks a
 * secret of ours wherever it turns up, so they are redaction's (src/shared/redaction.ts).
 */
export const KEY_PREFIX: Record<Environment, string> = { production: SECRET_PREFIXES.live, staging: SECRET_PREFIXES.test }

/** Base62 characters: 32 × log2(62) ≈ 190 random bits. */
export const SECRET_LENGTH = 32

/** What every key's public id begins with; a secret never does. */
export const KEY_ID_PREFIX = 'key_'
