import { type TSchema, Type } from 'typebox'
import { forbiddenResponse } from '../api-keys/api-keys.schemas.js'
import { GET_PET_DEPRECATION } from '../deprecations/deprecations.policy.js'
import { dayInWords, deprecationHeadersSchema } from '../deprecations/deprecations.schemas.js'
import {
  HEADER_BLOCK_MAX_BYTES,
  RATE_LIMIT_HEADERS,
  alwaysSent,
  errorResponse,
  rateLimitedResponse,
  internalErrorResponse,
  unauthorizedResponse,
  unavailableResponse,
} from '../http/error-schema.js'
import { Int64, IntegerText, Named, RefTo, StringEnum, Text, withRule } from '../http/schema-types.js'
import { INT64_MAX } from '../shared/int64.js'
import { BODY_LIMIT_BYTES } from '../shared/request-limits.js'
import { IdempotencyKeyHeadersSchema, IdempotentReplayedHeader } from '../idempotency/idempotency.schemas.js'
import { PET_STATUSES } from './pets.repository.js'

const NAME_MAX_LENGTH = 200
export const LIMIT_DEFAULT = 20
const LIMIT_MAX = 100

/** A named component of the document, as in the specification: clients generated from it import a `PetStatus` type. */
export const PetStatusSchema = StringEnum(PET_STATUSES, { $id: 'PetStatus', description: 'Availability status of an animal.' })

const petFields = {
  name: Text({
    maxLength: NAME_MAX_LENGTH,
    description: `The animal's name: 1 to ${NAME_MAX_LENGTH} characters, not only white space. Stored exactly as sent.`,
    examples: ['Rex'],
  }),
  categoryId: Int64({
    minimum: 1n,
    description: 'ID of the category the animal belongs to. Every digit is kept across the full int64 range.',
    examples: [3],
  }),
  status: Type.Optional(Named(PetStatusSchema)),
}

export const NewPetSchema = Type.Object(petFields, {
  $id: 'NewPet',
  additionalProperties: false,
  description: 'An animal to add. Unknown properties are refused, not ignored. Without `status`, the pet has none.',
})

export const PetSchema = Type.Object(
  { id: Int64({ minimum: 1n, description: 'Unique identifier, assigned by the service.' }), ...petFields },
  { $id: 'Pet', additionalProperties: false, description: 'An animal. `status` is absent when none was given.' },
)

export const ListPetsQuerySchema = Type.Object(
  {
    limit: Type.Optional(
      IntegerText({
        minimum: 1n,
        maximum: BigInt(LIMIT_MAX),
        format: 'int32',
        default: LIMIT_DEFAULT,
        description: 'Maximum number of animals returned.',
      }),
    ),
    status: Type.Optional(Named(PetStatusSchema, { description: 'Return only animals with this status.' })),
    cursor: Type.Optional(
      withRule(
        Type.String({
          minLength: 1,
          maxLength: 64,
          pattern: '^[A-Za-z0-9_-]+$',
          description:
            'Where the page starts: the `cursor` of the previous page\'s `Link: <…>; rel="next"` URL, which is the ' +
            'easiest way to use it. Opaque. It belongs to the `status` filter it was issued with; with another ' +
            'filter it is refused.',
        }),
        'must be the cursor of a Link rel="next" URL, given once',
      ),
    ),
  },
  { additionalProperties: false },
)

/** `If-None-Match` (RFC 9110 §13.1.2): the client's cached ETag; lower case, as Fastify matches headers. */
const ConditionalReadHeadersSchema = Type.Object({
  'if-none-match': Type.Optional(
    Type.String({
      // The service reads any value; the header block bounds it.
      maxLength: HEADER_BLOCK_MAX_BYTES,
      // No example: the docs page would pre-fill it and send it with every try.
      description:
        'ETags of representations the client holds, e.g. `"5fT0aT1xk2sBRnqS0dHk1RjXzZQ"`; when one matches, the answer is 304 without a body.',
    }),
  ),
})

/** On every 200 and 304 of a read (sendRepresentation, pets.conditional.ts). */
const cachingHeaders = alwaysSent({
  // A digest of the answer in 27 characters, quoted (pets.representation-cache.ts).
  ETag: Type.String({
    maxLength: 29,
    pattern: '^"[\\x21\\x23-\\x7E]*"$',
    description: 'Strong validator of this response; send it back in `If-None-Match`.',
  }),
  'Cache-Control': Type.Literal('private, no-cache', {
    description: '`private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged).',
  }),
  Vary: Type.String({
    maxLength: 'Origin, Authorization'.length,
    pattern: '(^|, )Authorization$',
    description: '`Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured.',
  }),
})

const notModified = (headers: Record<string, unknown>) =>
  Type.Null({ description: 'Not modified: the `If-None-Match` ETag is current. No body.', headers })

export const PetIdParamsSchema = Type.Object({
  petId: IntegerText({
    minimum: 1n,
    maximum: INT64_MAX,
    format: 'int64',
    description: 'ID of the animal to retrieve.',
  }),
})

/**
 * The query of an operation that takes none (getPet, createPet): a parameter is refused, as listPets
 * refuses one it does not know, rather than ignored. A lone `?` carries no parameter and passes.
 */
const NoQuerySchema = Type.Object({}, { additionalProperties: false })

const invalidRequest = (what: string, headers?: Record<string, TSchema>) => errorResponse(`${what} (\`invalid_request\`).`, headers)

const nextLinkHeader = Type.String({
  pattern: '^<[^>]+>; rel="next"$',
  description:
    'Present when more animals follow: `<https://api.example.com/v1/pets?limit=20&status=available&cursor=…>; ' +
    'rel="next"` (RFC 8288). Pages are keyset by `id`, so walking them while animals are added never repeats or ' +
    'skips one. Absent on the last page.',
})

export const listPetsSchema = {
  operationId: 'listPets',
  summary: 'List animals',
  description: 'Returns one page of animals in ascending `id` order, optionally filtered by status.',
  tags: ['pets'],
  security: [{ bearerAuth: ['pets:read'] }],
  querystring: ListPetsQuerySchema,
  headers: ConditionalReadHeadersSchema,
  response: {
    200: Type.Array(RefTo(PetSchema), {
      maxItems: LIMIT_MAX,
      description: 'One page of animals: a JSON array, as the contract says; the next page, if any, is in `Link`.',
      headers: { Link: nextLinkHeader, ...cachingHeaders, ...RATE_LIMIT_HEADERS },
    }),
    304: notModified({ Link: nextLinkHeader, ...cachingHeaders, ...RATE_LIMIT_HEADERS }),
    400: invalidRequest(
      '`limit`, `status` or `cursor` is not valid or repeated, `cursor` belongs to another `status`, or an unknown query parameter was sent',
    ),
    401: unauthorizedResponse(),
    403: forbiddenResponse('pets:read'),
    429: rateLimitedResponse(),
    500: internalErrorResponse(),
    503: unavailableResponse(),
  },
}

export const createPetSchema = {
  operationId: 'createPet',
  summary: 'Add an animal',
  description:
    'Send an `Idempotency-Key` to make retries safe: the animal is created once and every retry with the same key ' +
    'and body gets the first response again.',
  tags: ['pets'],
  security: [{ bearerAuth: ['pets:write'] }],
  querystring: NoQuerySchema,
  headers: IdempotencyKeyHeadersSchema,
  body: RefTo(NewPetSchema),
  response: {
    201: RefTo(PetSchema, {
      description: 'The animal as stored, with its assigned `id`.',
      headers: {
        ...alwaysSent({ Location: Type.String({ format: 'uri', description: 'URL of the new animal.' }) }),
        ...IdempotentReplayedHeader,
        ...RATE_LIMIT_HEADERS,
      },
    }),
    400: invalidRequest(
      'The body is missing, not a JSON object, malformed, or has a missing, invalid or unknown field; `Idempotency-Key` ' +
        'is not 1 to 255 visible ASCII characters; or a query parameter was sent: createPet takes none',
    ),
    401: unauthorizedResponse(),
    403: forbiddenResponse('pets:write'),
    429: rateLimitedResponse(),
    409: errorResponse('A request with this `Idempotency-Key` is still being processed (`idempotency_key_in_use`).'),
    413: errorResponse(`The body is larger than ${BODY_LIMIT_BYTES / 1024} KiB (\`payload_too_large\`).`),
    415: errorResponse(
      'The body is not UTF-8 `application/json` (`unsupported_media_type`), or is sent with a `Content-Encoding` other than `identity` (`unsupported_content_encoding`).',
      {
        'Accept-Encoding': Type.Literal('identity', {
          description: 'On `unsupported_content_encoding`: the only coding the service reads (RFC 9110 §12.5.3), none.',
        }),
      },
    ),
    422: errorResponse('This `Idempotency-Key` was already used with a different body (`idempotency_key_reused`).'),
    500: internalErrorResponse(),
    503: unavailableResponse(),
  },
}

/**
 * On every answer of getPet's route: its first hook sets them. Not on what is answered before the
 * route's hooks run, whatever the path: a 400 for a request that is not plain HTTP/1.1 (two `Host`
 * headers…), a 503 `overloaded`, and the 405, 408, 417 and 431 every operation shares (openapi.ts).
 */
const deprecationHeaders = deprecationHeadersSchema(GET_PET_DEPRECATION.sunset, { operationId: listPetsSchema.operationId, path: '/v1/pets' })
const alwaysDeprecationHeaders = alwaysSent(deprecationHeaders)

export const getPetSchema = {
  operationId: GET_PET_DEPRECATION.operationId,
  summary: 'Get an animal (deprecated)',
  description: `Deprecated: removed on ${dayInWords(GET_PET_DEPRECATION.sunset)}, after which it answers 410. Use \`GET /pets\` with a \`status\` filter instead.`,
  deprecated: true,
  tags: ['pets'],
  security: [{ bearerAuth: ['pets:read'] }],
  params: PetIdParamsSchema,
  querystring: NoQuerySchema,
  headers: ConditionalReadHeadersSchema,
  response: {
    200: RefTo(PetSchema, {
      description: 'The animal.',
      headers: { ...alwaysDeprecationHeaders, ...cachingHeaders, ...RATE_LIMIT_HEADERS },
    }),
    304: notModified({ ...alwaysDeprecationHeaders, ...cachingHeaders, ...RATE_LIMIT_HEADERS }),
    400: invalidRequest(
      '`petId` is not the decimal text of an integer from 1 to 9223372036854775807, or a query parameter was sent: getPet takes none',
      deprecationHeaders,
    ),
    401: unauthorizedResponse(alwaysDeprecationHeaders),
    403: forbiddenResponse('pets:read', alwaysDeprecationHeaders),
    429: rateLimitedResponse(alwaysDeprecationHeaders),
    404: errorResponse('No animal has this id (`not_found`).', alwaysDeprecationHeaders),
    410: errorResponse('The sunset date has passed and the operation is removed (`gone`).', alwaysDeprecationHeaders),
    500: internalErrorResponse(alwaysDeprecationHeaders),
    503: unavailableResponse(deprecationHeaders),
  },
}
