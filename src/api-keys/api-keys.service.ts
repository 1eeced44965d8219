import { hash, randomBytes } from 'node:crypto'
import type { Clock } from '../shared/clock.js'
import type { Environment } from '../config.js'
import { UNPRINTABLE } from '../shared/unprintable.js'
import { containsKey } from '../shared/redaction.js'
import { KEY_ID_PREFIX, KEY_PREFIX, SECRET_LENGTH } from './api-keys.format.js'
import type { ApiKey, ApiKeysRepository } from './api-keys.repository.js'
import { SCOPES, type Scope } from './api-keys.scopes.js'

/** `last used` is written at most this often per key, so that requests do not each cost a write. */
const LAST_USED_RESOLUTION_MS = 60_000

/**
 * How long a key that authenticated is trusted from memory before it is read again. A revocation
 * (or a rotation's shortened grace) made by any process reaches every server within this time,
 * inside the 2 seconds the service promises.
 */
export const KEY_RECHECK_MS = 1_000
const KEY_CACHE_SIZE = 10_000

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/** Uniformly random base62 text: bytes ≥ 248 are dropped so that `% 62` has no bias. */
function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62.charAt(byte % 62)
    }
  }
  return out
}

export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex')
}

/** The longest name a key may have, in UTF-16 code units. */
export const KEY_NAME_MAX_LENGTH = 100

/** Why a text cannot be a key's name: empty or too long, holding an API key, or not one line of printable text. */
export type KeyNameRefusal = { refused: 'length' } | { refused: 'key' } | { refused: 'unprintable'; index: number; character: string }

/**
 * A key's name as a person gave it, without the white space around it, or why it cannot be one. Every
 * later command lists and prints the name, so it must be printable text on one line, and must not be
 * where a secret ends up.
 */
export function checkKeyName(given: string): { name: string } | KeyNameRefusal {
  const name = given.trim()
  if (name === '' || name.length > KEY_NAME_MAX_LENGTH) return { refused: 'length' }
  if (containsKey(name)) return { refused: 'key' }
  const unprintable = UNPRINTABLE.exec(name)
  if (unprintable !== null) return { refused: 'unprintable', index: unprintable.index, character: unprintable[0] }
  return { name }
}

interface CreatedApiKey {
  key: ApiKey
  /** The full key. It exists only here: the service keeps its SHA-256 hash. */
  secret: string
}

/** Why a key cannot be rotated: it does not exist, no longer works, or was rotated already. */
export type RotationRefusal =
  | { refused: 'unknown' }
  | { refused: 'revoked' | 'expired'; key: ApiKey }
  | { refused: 'rotated'; key: ApiKey; replacedBy: string }

export interface RotatedApiKey extends CreatedApiKey {
  /** The old key, with the expiry that ends its grace period and `replacedBy` set. */
  old: ApiKey
}

export interface ApiKeysService {
  /**
   * `name` is stored as checkKeyName passes it; a name it refuses is the caller's bug (check it first).
   * `scopes` default to all of SCOPES, the meaning every key had before scopes; never empty.
   */
  create(input: { name: string; expiresInMs?: number; scopes?: readonly Scope[] }): Promise<CreatedApiKey>
  /**
   * A new key for the client of key `id`: same name, environment and scopes, and the same lifetime if the
   * old one had one (counted from now). The old key keeps working for `graceMs` (0: not at all),
   * never longer than it would have anyway.
   */
  rotate(id: string, graceMs: number): Promise<RotatedApiKey | RotationRefusal>
  list(): Promise<ApiKey[]>
  /** The key as revoked; `already` when it had been revoked before (its revocation time is kept). */
  revoke(id: string): Promise<{ key: ApiKey; already: boolean } | undefined>
  /**
   * The key a request presented, if it is valid here and now; undefined otherwise. Answered at once,
   * without a promise, when the key was read within KEY_RECHECK_MS (every request of a busy client).
   * `secretHash` is hashSecret(secret), when the caller has it already.
   */
  authenticate(secret: string, secretHash?: string): ApiKey | undefined | Promise<ApiKey | undefined>
  /**
   * Whether this process holds the key of `secret` in memory: it was looked up here (valid then, or since
   * revoked or expired) and not yet crowded out. Costs a hash and no lookup; a guess is never known.
   */
  isKnown(secret: string, secretHash?: string): boolean
}

interface ApiKeysServiceDeps {
  apiKeys: ApiKeysRepository
  clock: Clock
  environment: Environment
}

/**
 * A new key and its secret. A rotation's successor is the same client: it continues its predecessor's
 * lineage; any other key starts its own.
 */
function newKey(
  { name, environment, scopes, lineage }: Pick<ApiKey, 'name' | 'environment' | 'scopes'> & { lineage?: string },
  now: number,
  expiresAt: number | null,
): CreatedApiKey {
  const prefix = KEY_PREFIX[environment]
  const secret = prefix + randomBase62(SECRET_LENGTH)
  const id = `${KEY_ID_PREFIX}${randomBase62(16)}`
  const key: ApiKey = {
    id,
    name,
    prefix: secret.slice(0, prefix.length + 4),
    environment,
    createdAt: now,
    expiresAt,
    revokedAt: null,
    lastUsedAt: null,
    replacedBy: null,
    lineage: lineage ?? id,
    scopes,
  }
  return { key, secret }
}

/** Why `key` cannot be rotated at `now`, if it cannot. */
function refuseRotation(key: ApiKey, now: number): RotationRefusal | undefined {
  if (key.revokedAt !== null) return { refused: 'revoked', key }
  if (key.expiresAt !== null && key.expiresAt <= now) return { refused: 'expired', key }
  // One successor per key: lineage stays a chain. A lost new secret is replaced by rotating the new key.
  if (key.replacedBy !== null) return { refused: 'rotated', key, replacedBy: key.replacedBy }
  return undefined
}

/**
 * ApiKeysService's `authenticate`: the key a secret belongs to, if it is valid for `environment` now,
 * trusted from memory for KEY_RECHECK_MS after it was read.
 */
function createAuthenticate({ apiKeys, clock, environment }: ApiKeysServiceDeps): Pick<ApiKeysService, 'authenticate' | 'isKnown'> {
  const prefix = KEY_PREFIX[environment]
  // Keys that authenticated, by secret hash (never by secret): a request then costs no lookup.
  // Unknown secrets are not remembered, so guessing cannot fill the memory.
  const known = new Map<string, { key: ApiKey; readAt: number }>()
  const isFresh = (remembered: { readAt: number }, now: number) => now - remembered.readAt < KEY_RECHECK_MS && now >= remembered.readAt
  const recall = async (secretHash: string, now: number) => {
    known.delete(secretHash)
    // Lookup by hash: comparing hashes leaks nothing useful about the secret through timing.
    const key = await apiKeys.findBySecretHash(secretHash)
    if (key === undefined) return undefined
    if (known.size >= KEY_CACHE_SIZE) known.delete(known.keys().next().value as string)
    const fresh = { key, readAt: now }
    known.set(secretHash, fresh)
    return fresh
  }
  /** The key, if it is valid now; `last used` is written (and waited for) at most once a minute. */
  const admit = (remembered: { key: ApiKey }, now: number): ApiKey | undefined | Promise<ApiKey> => {
    const { key } = remembered
    if (key.environment !== environment || key.revokedAt !== null) return undefined
    if (key.expiresAt !== null && key.expiresAt <= now) return undefined
    if (key.lastUsedAt !== null && key.lastUsedAt > now - LAST_USED_RESOLUTION_MS) return key
    // A database that cannot write (a standby not yet promoted, a primary fenced read-only) still
    // serves reads: the key is admitted, and the record waits for the next minute's first request.
    const used = () => (remembered.key = { ...key, lastUsedAt: now })
    return apiKeys.touch(key.id, now, now - LAST_USED_RESOLUTION_MS).then(used, used)
  }
  return {
    authenticate(secret, secretHash) {
      // A key of the other environment is refused like any unknown key, without a lookup.
      if (!secret.startsWith(prefix)) return undefined
      const now = clock.now()
      secretHash ??= hashSecret(secret)
      const remembered = known.get(secretHash)
      if (remembered !== undefined && isFresh(remembered, now)) return admit(remembered, now)
      return recall(secretHash, now).then((read) => (read === undefined ? undefined : admit(read, now)))
    },
    isKnown: (secret, secretHash) => secret.startsWith(prefix) && known.has(secretHash ?? hashSecret(secret)),
  }
}

export function createApiKeysService(deps: ApiKeysServiceDeps): ApiKeysService {
  const { apiKeys, clock, environment } = deps
  return {
    async create({ name, expiresInMs, scopes = SCOPES }) {
      const checked = checkKeyName(name)
      if ('refused' in checked) throw new Error(`not a name for a key (${checked.refused}): check it with checkKeyName first`)
      if (scopes.length === 0) throw new Error('a key needs at least one scope')
      const now = clock.now()
      const created = newKey({ name: checked.name, environment, scopes }, now, expiresInMs === undefined ? null : now + expiresInMs)
      await apiKeys.insert(created.key, hashSecret(created.secret))
      return created
    },

    async rotate(id, graceMs) {
      const now = clock.now()
      const current = await apiKeys.findById(id)
      if (current === undefined) return { refused: 'unknown' }
      const refused = refuseRotation(current, now)
      if (refused !== undefined) return refused
      const lifetime = current.expiresAt === null ? null : current.expiresAt - current.createdAt
      const created = newKey(current, now, lifetime === null ? null : now + lifetime)
      const old = await apiKeys.rotate(id, created.key, hashSecret(created.secret), now + graceMs, now)
      // Revoked or rotated by someone else between the read and the write: say what happened.
      if (old === undefined) {
        const changed = await apiKeys.findById(id)
        return (changed === undefined ? undefined : refuseRotation(changed, now)) ?? { refused: 'unknown' }
      }
      return { ...created, old }
    },

    list: () => apiKeys.list(),

    async revoke(id) {
      const now = clock.now()
      const key = await apiKeys.revoke(id, now)
      return key === undefined ? undefined : { key, already: key.revokedAt !== now }
    },

    ...createAuthenticate(deps),
  }
}
