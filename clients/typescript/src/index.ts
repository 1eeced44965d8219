import { isInteger, parse, stringify } from 'lossless-json'
import createClient, { type Client } from 'openapi-fetch'
import { UnexpectedResponseError, errorFromResponse } from './errors.js'
import { findLink } from './link.js'
import type { components, operations, paths } from './schema.js'

export { type ErrorCode, PetstoreError, UnexpectedResponseError } from './errors.js'
export { type LinkValue, parseLinkHeader } from './link.js'
export type { components, operations, paths } from './schema.js'

export type Pet = components['schemas']['Pet']
export type NewPet = components['schemas']['NewPet']
export type PetStatus = components['schemas']['PetStatus']

export interface PetstoreClientOptions {
  /** The server URL, as listed in the OpenAPI `servers`: the origin followed by `/v1`, e.g. `http://localhost:8080/v1`. */
  baseUrl: string
  /** The API key, sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string
  /** Replaces the global `fetch`, e.g. to add timeouts or tracing. */
  fetch?: (request: Request) => Promise<Response>
}

export interface ListPetsOptions {
  /** Only pets with this status. */
  status?: PetStatus
  /** Pets per page (1-100; the service's default is 20). `list` still yields every pet. */
  limit?: number
}

/** Where the following page is, as the service's `Link: <…>; rel="next"` said. Opaque. */
export interface NextPage {
  readonly query: string
}

export interface PetPage {
  pets: Pet[]
  /** Pass to `listPage` for the following page; undefined on the last page. */
  next: NextPage | undefined
}

export interface CreatePetOptions {
  /**
   * Makes the create safe to retry: every request with this key and the same body creates the pet
   * once and gets the first response. Use a new one (e.g. a UUID) per pet.
   */
  idempotencyKey?: string
}

export interface PetstoreClient {
  pets: {
    /**
     * Every pet, in ascending id order, across as many pages as there are: the pages are fetched
     * one at a time, following each page's `Link: rel="next"`, as the iteration reaches them.
     */
    list(options?: ListPetsOptions): AsyncIterable<Pet>
    /** One page of pets: the first one for `options`, or the one `next` of an earlier page points to. */
    listPage(from?: ListPetsOptions | NextPage): Promise<PetPage>
    /** Adds a pet and returns it as stored, with its id. */
    create(pet: NewPet, options?: CreatePetOptions): Promise<Pet>
    /**
     * One pet by id.
     * @deprecated getPet is deprecated by the service and answers 410 `gone` from 5 December 2030;
     * use `list` with a `status` filter.
     */
    get(id: bigint): Promise<Pet>
  }
  /** The openapi-fetch client underneath, typed from the document, for what the methods above do not cover. */
  raw: Client<paths>
}

type JsonBody<Operation extends keyof operations, Status extends keyof operations[Operation]['responses']> =
  operations[Operation]['responses'][Status] extends { content: { 'application/json': infer Body } } ? Body : never

/**
 * Parses JSON without losing digits: integer literals become bigint (JSON.parse rounds them above
 * 2^53, and ids go up to 2^63-1), other numbers stay numbers. For bodies read through `raw` with
 * `parseAs: 'text'`.
 */
export function parseLosslessJson(text: string): unknown {
  return parse(text, null, (value) => (isInteger(value) ? BigInt(value) : Number(value)))
}

/** Creates a client for the service at `baseUrl`, authenticated with `apiKey`. */
export function createPetstoreClient(options: PetstoreClientOptions): PetstoreClient {
  const raw = createClient<paths>({
    baseUrl: options.baseUrl,
    headers: { Authorization: `Bearer ${options.apiKey}` },
    // lossless-json writes a bigint as its digits; JSON.stringify would throw on it.
    bodySerializer: (body: unknown) => stringify(body) ?? '',
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  })

  /**
   * The success body of a call made with `parseAs: 'text'` (openapi-fetch would otherwise parse it
   * with JSON.parse and round the ids), or the error the response stands for, thrown.
   */
  function bodyOf<T>(result: { data?: string; error?: unknown; response: Response }): T {
    if (!result.response.ok) throw errorFromResponse(result.response, result.error)
    try {
      return parseLosslessJson(result.data ?? '') as T
    } catch {
      throw new UnexpectedResponseError(
        `HTTP ${result.response.status} with a body that is not JSON`,
        result.response.status,
        result.data ?? '',
        result.response.headers.get('x-request-id') ?? undefined,
      )
    }
  }

  async function listPage(from: ListPetsOptions | NextPage = {}): Promise<PetPage> {
    const result =
      'query' in from
        ? await raw.GET('/pets', { parseAs: 'text', querySerializer: () => from.query })
        : await raw.GET('/pets', { parseAs: 'text', params: { query: { limit: from.limit, status: from.status } } })
    const pets = bodyOf<JsonBody<'listPets', 200>>(result)
    return { pets, next: nextPage(result.response) }
  }

  return {
    pets: {
      async *list(listOptions = {}) {
        let page = await listPage(listOptions)
        yield* page.pets
        while (page.next !== undefined) {
          page = await listPage(page.next)
          yield* page.pets
        }
      },
      listPage,
      async create(pet, { idempotencyKey } = {}) {
        const result = await raw.POST('/pets', {
          parseAs: 'text',
          body: pet,
          params: { header: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey } },
        })
        return bodyOf<JsonBody<'createPet', 201>>(result)
      },
      async get(id) {
        const result = await raw.GET('/pets/{petId}', { parseAs: 'text', params: { path: { petId: id } } })
        return bodyOf<JsonBody<'getPet', 200>>(result)
      },
    },
    raw,
  }
}

/**
 * The page `Link: <…>; rel="next"` names, as a query for `{baseUrl}/pets`. Only the query of the
 * link is kept, not its origin and path: the service writes links with its PUBLIC_BASE_URL, which
 * may be an origin this client does not talk to (a public name in front of a private address),
 * and sending the API key to whatever origin a response names would hand it to that origin.
 */
function nextPage(response: Response): NextPage | undefined {
  const target = findLink(response.headers.get('link'), 'next')
  if (target === undefined) return undefined
  const url = new URL(target, response.url || 'http://unknown.invalid/')
  if (!url.pathname.endsWith('/pets')) {
    throw new UnexpectedResponseError(
      `Link rel="next" points to ${url.pathname}, not to the list of pets`,
      response.status,
      '',
      response.headers.get('x-request-id') ?? undefined,
    )
  }
  return { query: url.search.slice(1) }
}
