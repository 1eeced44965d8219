/**
 * Node's http module, taken as its CommonJS object. `import http from 'node:http'` in an ES module
 * makes Node build a namespace of every export, which calls the lazy getters of `WebSocket`,
 * `CloseEvent` and `MessageEvent` and so loads the whole of undici, the fetch and WebSocket client
 * this service never uses (nodejs/node#59686): 14 MB of resident memory in a script that does nothing
 * else, about 1 MB in this process, where its pages would otherwise hold other objects. Types still
 * come from `import type … from 'node:http'`, which is erased.
 */
export const http = process.getBuiltinModule('node:http')
