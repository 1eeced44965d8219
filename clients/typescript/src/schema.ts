/**
 * Generated from the service's OpenAPI document by `npm run generate:client`. Do not edit by hand.
 * Integers of format int64 are `bigint`: the client parses responses losslessly.
 */

export interface paths {
    "/pets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List animals
         * @description Returns one page of animals in ascending `id` order, optionally filtered by status.
         */
        get: operations["listPets"];
        put?: never;
        /**
         * Add an animal
         * @description Send an `Idempotency-Key` to make retries safe: the animal is created once and every retry with the same key and body gets the first response again.
         */
        post: operations["createPet"];
        delete?: never;
        options?: never;
        /**
         * List animals: headers only
         * @description As `listPets`, with the same status and headers, without the body.
         */
        head: operations["headListPets"];
        patch?: never;
        trace?: never;
    };
    "/pets/{petId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get an animal (deprecated)
         * @deprecated
         * @description Deprecated: removed on 5 December 2030, after which it answers 410. Use `GET /pets` with a `status` filter instead.
         */
        get: operations["getPet"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        /**
         * Get an animal (deprecated): headers only
         * @deprecated
         * @description As `getPet`, with the same status and headers, without the body.
         */
        head: operations["headGetPet"];
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description The body of every error response. */
        Error: {
            /**
             * @description Machine-readable error code:
             *
             *     - `invalid_request`: The request is malformed: invalid JSON, a missing or invalid field, an unknown property or query parameter.
             *     - `unauthorized`: The API key is missing or not valid (unknown, revoked, expired or for another environment).
             *     - `forbidden`: The API key is valid but lacks the scope the operation needs (`pets:read` or `pets:write`); `WWW-Authenticate` names it.
             *     - `not_found`: No such route, or no pet with that id.
             *     - `method_not_allowed`: The path exists but not with this method; the `Allow` header lists the methods it has.
             *     - `request_timeout`: The client took too long to send the request.
             *     - `idempotency_key_in_use`: A request with this `Idempotency-Key` is still being processed; retry once it has finished.
             *     - `gone`: The operation has passed its sunset date and was removed.
             *     - `payload_too_large`: The request body is larger than 16 KiB.
             *     - `unsupported_media_type`: The request body is not `application/json` (UTF-8).
             *     - `unsupported_content_encoding`: The request body has a `Content-Encoding` other than `identity`; send it uncompressed (`Accept-Encoding: identity` says so).
             *     - `expectation_failed`: The `Expect` header asks for something other than `100-continue`, the only expectation the service meets.
             *     - `idempotency_key_reused`: This `Idempotency-Key` was already used with a different request body.
             *     - `rate_limited`: Too many requests for this API key (or, for failed authentication, this address); wait `Retry-After` seconds.
             *     - `request_header_fields_too_large`: The request headers are too large.
             *     - `internal_error`: A fault in the service. The message never carries details; they are logged with the request id.
             *     - `not_implemented`: The request method is not one the service knows, on any path; methods are case-sensitive (`get` is not `GET`).
             *     - `unavailable`: The database is not answering; retry later.
             *     - `overloaded`: The server has more work than it can do quickly right now; retry after `Retry-After` seconds, or on another instance.
             * @enum {string}
             */
            code: "invalid_request" | "unauthorized" | "forbidden" | "not_found" | "method_not_allowed" | "request_timeout" | "idempotency_key_in_use" | "gone" | "payload_too_large" | "unsupported_media_type" | "unsupported_content_encoding" | "expectation_failed" | "idempotency_key_reused" | "rate_limited" | "request_header_fields_too_large" | "internal_error" | "not_implemented" | "unavailable" | "overloaded";
            /** @description Human-readable description of what went wrong. It may quote a part of the request, API keys redacted. */
            message: string;
            /**
             * Format: int32
             * @description The HTTP status code of the response.
             */
            status: number;
        };
        /** @description An animal to add. Unknown properties are refused, not ignored. Without `status`, the pet has none. */
        NewPet: {
            /**
             * @description The animal's name: 1 to 200 characters, not only white space. Stored exactly as sent.
             * @example Rex
             */
            name: string;
            /**
             * Format: int64
             * @description ID of the category the animal belongs to. Every digit is kept across the full int64 range.
             * @example 3
             */
            categoryId: bigint;
            status?: components["schemas"]["PetStatus"];
        };
        /** @description An animal. `status` is absent when none was given. */
        Pet: {
            /**
             * Format: int64
             * @description Unique identifier, assigned by the service.
             */
            id: bigint;
            /**
             * @description The animal's name: 1 to 200 characters, not only white space. Stored exactly as sent.
             * @example Rex
             */
            name: string;
            /**
             * Format: int64
             * @description ID of the category the animal belongs to. Every digit is kept across the full int64 range.
             * @example 3
             */
            categoryId: bigint;
            status?: components["schemas"]["PetStatus"];
        };
        /**
         * @description Availability status of an animal.
         * @enum {string}
         */
        PetStatus: "available" | "pending" | "sold";
    };
    responses: {
        /** @description The path exists but not with this method (`method_not_allowed`), whatever else is wrong with the request: routing comes before authentication. `Allow` lists the methods the path has. */
        MethodNotAllowed: {
            headers: {
                "X-Request-Id": components["headers"]["X-Request-Id"];
                /** @description The methods of the path: those of its operations, and `HEAD` wherever there is `GET`, e.g. `GET, HEAD, POST`. */
                Allow: string;
                /** @description `no-store`: an error is never kept by any cache. */
                "Cache-Control": "no-store";
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The headers did not arrive within `HEADERS_TIMEOUT_MS`, or the whole request within `REQUEST_TIMEOUT_MS` (`request_timeout`). The connection is closed. */
        RequestTimeout: {
            headers: {
                "X-Request-Id": components["headers"]["X-Request-Id"];
                /** @description `no-store`: an error is never kept by any cache. */
                "Cache-Control": "no-store";
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description `Expect` asks for something other than `100-continue` (`expectation_failed`). Answered before anything else; the connection is closed. */
        ExpectationFailed: {
            headers: {
                "X-Request-Id": components["headers"]["X-Request-Id"];
                /** @description `no-store`: an error is never kept by any cache. */
                "Cache-Control": "no-store";
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The header block is over 16 KiB, or has more than 100 lines (`request_header_fields_too_large`). Answered before anything else. */
        RequestHeaderFieldsTooLarge: {
            headers: {
                "X-Request-Id": components["headers"]["X-Request-Id"];
                /** @description `no-store`: an error is never kept by any cache. */
                "Cache-Control": "no-store";
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: never;
    requestBodies: never;
    headers: {
        /** @description The id of this request in the service's logs: the request's own `X-Request-Id` when it is safe to echo, otherwise a new UUID. Quote it when reporting a problem. */
        "X-Request-Id": string;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listPets: {
        parameters: {
            query?: {
                /** @description Maximum number of animals returned. */
                limit?: number;
                /** @description Return only animals with this status. */
                status?: components["schemas"]["PetStatus"];
                /** @description Where the page starts: the `cursor` of the previous page's `Link: <…>; rel="next"` URL, which is the easiest way to use it. Opaque. It belongs to the `status` filter it was issued with; with another filter it is refused. */
                cursor?: string;
            };
            header?: {
                /** @description ETags of representations the client holds, e.g. `"5fT0aT1xk2sBRnqS0dHk1RjXzZQ"`; when one matches, the answer is 304 without a body. */
                "if-none-match"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of animals: a JSON array, as the contract says; the next page, if any, is in `Link`. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Present when more animals follow: `<https://api.example.com/v1/pets?limit=20&status=available&cursor=…>; rel="next"` (RFC 8288). Pages are keyset by `id`, so walking them while animals are added never repeats or skips one. Absent on the last page. */
                    Link?: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Pet"][];
                };
            };
            /** @description Not modified: the `If-None-Match` ETag is current. No body. */
            304: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Present when more animals follow: `<https://api.example.com/v1/pets?limit=20&status=available&cursor=…>; rel="next"` (RFC 8288). Pages are keyset by `id`, so walking them while animals are added never repeats or skips one. Absent on the last page. */
                    Link?: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `limit`, `status` or `cursor` is not valid or repeated, `cursor` belongs to another `status`, or an unknown query parameter was sent (`invalid_request`). */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The API key is missing or not valid (`unauthorized`). */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid. */
                    "WWW-Authenticate": string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The API key is valid but does not have the `pets:read` scope (`forbidden`). */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Bearer challenge (RFC 6750 §3.1) naming the scope the key lacks. */
                    "WWW-Authenticate": "Bearer realm=\"petstore\", error=\"insufficient_scope\", scope=\"pets:read\"";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Any method other than GET, HEAD and POST on `/pets` is answered 405 `method_not_allowed` with `Allow: GET, HEAD, POST`. */
            405: components["responses"]["MethodNotAllowed"];
            408: components["responses"]["RequestTimeout"];
            417: components["responses"]["ExpectationFailed"];
            /** @description Too many requests for this API key, or too many failed authentications from this address (`rate_limited`). */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            431: components["responses"]["RequestHeaderFieldsTooLarge"];
            /** @description A fault in the service (`internal_error`). */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The database is not answering (`unavailable`), or the server has more work than it can do quickly (`overloaded`). */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createPet: {
        parameters: {
            query?: never;
            header?: {
                /**
                 * @description `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header): 1 to 255 visible ASCII characters, unique per request, e.g. a UUID. A retry with the same key and the same body gets the first response again, with `Idempotent-Replayed: true`, and creates nothing. Keys belong to the API key that sent them and to the keys it is rotated to, and are kept for 24 hours.
                 * @example 5f0c6e0e-8d43-4b8a-9a51-0f5bd2f0a7e1
                 */
                "idempotency-key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewPet"];
            };
        };
        responses: {
            /** @description The animal as stored, with its assigned `id`. */
            201: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description URL of the new animal. */
                    Location: string;
                    /** @description Present when this is the stored response of an earlier request with the same `Idempotency-Key`. */
                    "Idempotent-Replayed"?: "true";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Pet"];
                };
            };
            /** @description The body is missing, not a JSON object, malformed, or has a missing, invalid or unknown field; `Idempotency-Key` is not 1 to 255 visible ASCII characters; or a query parameter was sent: createPet takes none (`invalid_request`). */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The API key is missing or not valid (`unauthorized`). */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid. */
                    "WWW-Authenticate": string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The API key is valid but does not have the `pets:write` scope (`forbidden`). */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Bearer challenge (RFC 6750 §3.1) naming the scope the key lacks. */
                    "WWW-Authenticate": "Bearer realm=\"petstore\", error=\"insufficient_scope\", scope=\"pets:write\"";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Any method other than GET, HEAD and POST on `/pets` is answered 405 `method_not_allowed` with `Allow: GET, HEAD, POST`. */
            405: components["responses"]["MethodNotAllowed"];
            408: components["responses"]["RequestTimeout"];
            /** @description A request with this `Idempotency-Key` is still being processed (`idempotency_key_in_use`). */
            409: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The body is larger than 16 KiB (`payload_too_large`). */
            413: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The body is not UTF-8 `application/json` (`unsupported_media_type`), or is sent with a `Content-Encoding` other than `identity` (`unsupported_content_encoding`). */
            415: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description On `unsupported_content_encoding`: the only coding the service reads (RFC 9110 §12.5.3), none. */
                    "Accept-Encoding"?: "identity";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            417: components["responses"]["ExpectationFailed"];
            /** @description This `Idempotency-Key` was already used with a different body (`idempotency_key_reused`). */
            422: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Too many requests for this API key, or too many failed authentications from this address (`rate_limited`). */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            431: components["responses"]["RequestHeaderFieldsTooLarge"];
            /** @description A fault in the service (`internal_error`). */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The database is not answering (`unavailable`), or the server has more work than it can do quickly (`overloaded`). */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    headListPets: {
        parameters: {
            query?: {
                /** @description Maximum number of animals returned. */
                limit?: number;
                /** @description Return only animals with this status. */
                status?: components["schemas"]["PetStatus"];
                /** @description Where the page starts: the `cursor` of the previous page's `Link: <…>; rel="next"` URL, which is the easiest way to use it. Opaque. It belongs to the `status` filter it was issued with; with another filter it is refused. */
                cursor?: string;
            };
            header?: {
                /** @description ETags of representations the client holds, e.g. `"5fT0aT1xk2sBRnqS0dHk1RjXzZQ"`; when one matches, the answer is 304 without a body. */
                "if-none-match"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of animals: a JSON array, as the contract says; the next page, if any, is in `Link`. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Present when more animals follow: `<https://api.example.com/v1/pets?limit=20&status=available&cursor=…>; rel="next"` (RFC 8288). Pages are keyset by `id`, so walking them while animals are added never repeats or skips one. Absent on the last page. */
                    Link?: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not modified: the `If-None-Match` ETag is current. No body. */
            304: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Present when more animals follow: `<https://api.example.com/v1/pets?limit=20&status=available&cursor=…>; rel="next"` (RFC 8288). Pages are keyset by `id`, so walking them while animals are added never repeats or skips one. Absent on the last page. */
                    Link?: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `limit`, `status` or `cursor` is not valid or repeated, `cursor` belongs to another `status`, or an unknown query parameter was sent (`invalid_request`). */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The API key is missing or not valid (`unauthorized`). */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid. */
                    "WWW-Authenticate": string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The API key is valid but does not have the `pets:read` scope (`forbidden`). */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Bearer challenge (RFC 6750 §3.1) naming the scope the key lacks. */
                    "WWW-Authenticate": "Bearer realm=\"petstore\", error=\"insufficient_scope\", scope=\"pets:read\"";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Any method other than GET, HEAD and POST on `/pets` is answered 405 `method_not_allowed` with `Allow: GET, HEAD, POST`. */
            405: components["responses"]["MethodNotAllowed"];
            408: components["responses"]["RequestTimeout"];
            417: components["responses"]["ExpectationFailed"];
            /** @description Too many requests for this API key, or too many failed authentications from this address (`rate_limited`). */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            431: components["responses"]["RequestHeaderFieldsTooLarge"];
            /** @description A fault in the service (`internal_error`). */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The database is not answering (`unavailable`), or the server has more work than it can do quickly (`overloaded`). */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
    getPet: {
        parameters: {
            query?: never;
            header?: {
                /** @description ETags of representations the client holds, e.g. `"5fT0aT1xk2sBRnqS0dHk1RjXzZQ"`; when one matches, the answer is 304 without a body. */
                "if-none-match"?: string;
            };
            path: {
                /** @description ID of the animal to retrieve. */
                petId: bigint;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The animal. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Pet"];
                };
            };
            /** @description Not modified: the `If-None-Match` ETag is current. No body. */
            304: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `petId` is not the decimal text of an integer from 1 to 9223372036854775807, or a query parameter was sent: getPet takes none (`invalid_request`). */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation?: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset?: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link?: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The API key is missing or not valid (`unauthorized`). */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid. */
                    "WWW-Authenticate": string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The API key is valid but does not have the `pets:read` scope (`forbidden`). */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Bearer challenge (RFC 6750 §3.1) naming the scope the key lacks. */
                    "WWW-Authenticate": "Bearer realm=\"petstore\", error=\"insufficient_scope\", scope=\"pets:read\"";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description No animal has this id (`not_found`). */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Any method other than GET and HEAD on `/pets/{petId}` is answered 405 `method_not_allowed` with `Allow: GET, HEAD`. */
            405: components["responses"]["MethodNotAllowed"];
            408: components["responses"]["RequestTimeout"];
            /** @description The sunset date has passed and the operation is removed (`gone`). */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            417: components["responses"]["ExpectationFailed"];
            /** @description Too many requests for this API key, or too many failed authentications from this address (`rate_limited`). */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            431: components["responses"]["RequestHeaderFieldsTooLarge"];
            /** @description A fault in the service (`internal_error`). */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The database is not answering (`unavailable`), or the server has more work than it can do quickly (`overloaded`). */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation?: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset?: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link?: string;
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    headGetPet: {
        parameters: {
            query?: never;
            header?: {
                /** @description ETags of representations the client holds, e.g. `"5fT0aT1xk2sBRnqS0dHk1RjXzZQ"`; when one matches, the answer is 304 without a body. */
                "if-none-match"?: string;
            };
            path: {
                /** @description ID of the animal to retrieve. */
                petId: bigint;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The animal. */
            200: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not modified: the `If-None-Match` ETag is current. No body. */
            304: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Strong validator of this response; send it back in `If-None-Match`. */
                    ETag: string;
                    /** @description `private, no-cache`: a client may keep the response but must revalidate it (a 304 when unchanged). */
                    "Cache-Control": "private, no-cache";
                    /** @description `Authorization`: the answer is for one API key. `Origin, Authorization` when CORS is configured. */
                    Vary: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description `petId` is not the decimal text of an integer from 1 to 9223372036854775807, or a query parameter was sent: getPet takes none (`invalid_request`). */
            400: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation?: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset?: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link?: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The API key is missing or not valid (`unauthorized`). */
            401: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Bearer challenge (RFC 6750): `Bearer realm="petstore"`, with `error="invalid_token"` when a key was sent but is not valid. */
                    "WWW-Authenticate": string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The API key is valid but does not have the `pets:read` scope (`forbidden`). */
            403: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Bearer challenge (RFC 6750 §3.1) naming the scope the key lacks. */
                    "WWW-Authenticate": "Bearer realm=\"petstore\", error=\"insufficient_scope\", scope=\"pets:read\"";
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description No animal has this id (`not_found`). */
            404: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Any method other than GET and HEAD on `/pets/{petId}` is answered 405 `method_not_allowed` with `Allow: GET, HEAD`. */
            405: components["responses"]["MethodNotAllowed"];
            408: components["responses"]["RequestTimeout"];
            /** @description The sunset date has passed and the operation is removed (`gone`). */
            410: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            417: components["responses"]["ExpectationFailed"];
            /** @description Too many requests for this API key, or too many failed authentications from this address (`rate_limited`). */
            429: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            431: components["responses"]["RequestHeaderFieldsTooLarge"];
            /** @description A fault in the service (`internal_error`). */
            500: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link: string;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The database is not answering (`unavailable`), or the server has more work than it can do quickly (`overloaded`). */
            503: {
                headers: {
                    "X-Request-Id": components["headers"]["X-Request-Id"];
                    /** @description When the operation was deprecated, as `@<unix seconds>` (RFC 9745). */
                    Deprecation?: string;
                    /** @description When the operation will be removed (RFC 8594). */
                    Sunset?: "Thu, 05 Dec 2030 00:00:00 GMT";
                    /** @description The replacement, listPets under `PUBLIC_BASE_URL`: `<https://api.example.com/v1/pets>; rel="successor-version"`. */
                    Link?: string;
                    /** @description Seconds to wait before retrying. */
                    "Retry-After": number;
                    /** @description The quota of the policy that applies, e.g. `"per-key";q=1200;w=60` (1200 requests per 60 s). Sent with every answer to a request whose API key authenticated, success or error, while a per-key limit is configured; with `"failed-auth"` on a 429 for too many failed authentications. */
                    "RateLimit-Policy"?: string;
                    /** @description What is left of it, e.g. `"per-key";r=1187;t=42` (1187 requests left, window resets in 42 s). Sent with `RateLimit-Policy`, unless the store of the counters is unavailable. */
                    RateLimit?: string;
                    /** @description `no-store`: an error is never kept by any cache. */
                    "Cache-Control": "no-store";
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
}
type FlattenedDeepRequired<T> = {
    [K in keyof T]-?: FlattenedDeepRequired<T[K] extends unknown[] | undefined | null ? Extract<T[K], unknown[]>[number] : T[K]>;
};
type ReadonlyArray<T> = [
    Exclude<T, undefined>
] extends [
    unknown[]
] ? Readonly<Exclude<T, undefined>> : Readonly<Exclude<T, undefined>[]>;
export const errorCodeValues: ReadonlyArray<FlattenedDeepRequired<components>["schemas"]["Error"]["code"]> = ["invalid_request", "unauthorized", "forbidden", "not_found", "method_not_allowed", "request_timeout", "idempotency_key_in_use", "gone", "payload_too_large", "unsupported_media_type", "unsupported_content_encoding", "expectation_failed", "idempotency_key_reused", "rate_limited", "request_header_fields_too_large", "internal_error", "not_implemented", "unavailable", "overloaded"];
export const petStatusValues: ReadonlyArray<FlattenedDeepRequired<components>["schemas"]["PetStatus"]> = ["available", "pending", "sold"];
