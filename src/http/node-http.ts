/**
 * Node's http module, taken as its CommonJS object: an ES import builds a namespace of every export,
 * whose lazy getters load undici, a client this service never uses (nodejs/node#59686), and keep its
 * memory for nothing. Types still come from `import type … from 'node:http'`, which is erased.
 */
export const http = process.getBuiltinModule('node:http')
