/**
 * Node's http module, taken as its CommonJS object: an ES import builds a namespace of every export,
 * whose lazy getters load undici, a client this service never uses (nodejs/node#59686), and keep its
 * memory for nothing. Types still come from `import type … from 'node:http'`, which is erased.
 */
export const http = process.getBuiltinModule('node:http')

/**
 * How often Node checks its servers' request and headers timeouts (30 s by default): a slow or silent
 * connection is closed this long after its timeout at the latest. Every listener uses it.
 */
export const CONNECTIONS_CHECKING_INTERVAL_MS = 500
