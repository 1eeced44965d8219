// What a failed query says about the database, as opposed to the request that sent it.
import { QUERY_TIMEOUT_MESSAGE } from './query-deadline.js'

// SQLSTATE classes that mean "the database cannot serve now", not "this request is wrong":
// 08 connection exception (PgBouncer reports its own failures so: a server it cannot reach, a wait
// past query_wait_timeout), 53 insufficient resources, 57P operator intervention (shutdown, restart),
// 25006 read-only transaction (a standby, a primary fenced read-only, a failover in progress),
// 40 serialization/deadlock/conflict with recovery, 55P03 a lock not granted within lock_timeout,
// 26000 and 42P05 a prepared statement the server lost or already has (lostPreparedStatement).
const UNAVAILABLE_SQLSTATE = /^(08|53|57P|25006|40001|40P01|55P03|26000|42P05)/
// EMFILE and ENFILE: no descriptor for a new connection's socket, this process's or the system's.
const NETWORK_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'EMFILE', 'ENFILE'])
// pg-pool (3.x) says so of a query that waited connectionTimeoutMillis for a connection of a full pool, and
// only of that: a new connection's own timeout is 'Connection terminated due to connection timeout'.
const POOL_WAIT_MESSAGE = 'timeout exceeded when trying to connect'
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  POOL_WAIT_MESSAGE,
  QUERY_TIMEOUT_MESSAGE,
  'Client has encountered a connection error',
  'Cannot use a pool after calling end',
]

function sqlState(error: unknown): unknown {
  return (error as { code?: unknown } | undefined)?.code
}

/** The primary could not be asked, and a standby's answer alone cannot be given (replica-set.ts): a 503. */
export class PrimaryUnavailable extends Error {
  override readonly name = 'PrimaryUnavailable'
  constructor(cause?: unknown) {
    super('the primary is unavailable, and a standby alone cannot answer this read', { cause })
  }
}

/** True for failures of the database itself (gone, busy, read-only, restarting): the client gets 503. */
export function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  if (error instanceof PrimaryUnavailable) return true
  const code = sqlState(error)
  if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || NETWORK_ERRORS.has(code))) return true
  return UNAVAILABLE_MESSAGES.some((message) => error.message.includes(message))
}

/** True for a query that waited its whole time for a connection, every one of the pool's being lent to others. */
export function waitedForPool(error: unknown): boolean {
  return error instanceof Error && error.message === POOL_WAIT_MESSAGE
}

/**
 * True when the server does not hold the named prepared statements this connection prepared: 26000
 * "prepared statement … does not exist", or 42P05 "… already exists" for one it never prepared. A pooler in
 * transaction mode hands each transaction whichever server connection is free, and a pooler repointed
 * at a new primary gives an old client connection a new server connection.
 */
export function lostPreparedStatement(error: unknown): boolean {
  const code = sqlState(error)
  return code === '26000' || code === '42P05'
}

/** 55P03 lock_not_available: a wait of lock_timeout ran out; the connection itself is sound. */
export function isLockTimeout(error: unknown): boolean {
  return sqlState(error) === '55P03'
}
