import { Type } from 'typebox'
import { IDEMPOTENCY_KEY } from '../http/header-names.js'
import { withRule } from '../http/schema-types.js'
import { IDEMPOTENCY_RETENTION_MS } from './idempotency.policy.js'

const IDEMPOTENCY_KEY_MAX_LENGTH = 255

const retentionHours = IDEMPOTENCY_RETENTION_MS / 3_600_000

/**
 * The request headers of an operation that takes an `Idempotency-Key`. The name is lower case
 * because Fastify matches header schemas in lower case; a capitalised property would not be checked.
 */
export const IdempotencyKeyHeadersSchema = Type.Object({
  [IDEMPOTENCY_KEY]: Type.Optional(
    withRule(
      Type.String({
      minLength: 1,
      maxLength: IDEMPOTENCY_KEY_MAX_LENGTH,
      pattern: '^[\\x21-\\x7E]+$',
      description:
        `\`Idempotency-Key\` (draft-ietf-httpapi-idempotency-key-header): 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII ` +
        'characters, unique per request, e.g. a UUID. A retry with the same key and the same body gets the first ' +
        'response again, with `Idempotent-Replayed: true`, and creates nothing. Keys belong to the API key that ' +
        `sent them and to the keys it is rotated to, and are kept for ${retentionHours} hours.`,
      examples: ['5f0c6e0e-8d43-4b8a-9a51-0f5bd2f0a7e1'],
      }),
      `must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters (no spaces), sent once`,
    ),
  ),
})

/** The response header that marks a replayed response. */
export const IdempotentReplayedHeader = {
  'Idempotent-Replayed': Type.Literal('true', {
    description: 'Present when this is the stored response of an earlier request with the same `Idempotency-Key`.',
  }),
}
