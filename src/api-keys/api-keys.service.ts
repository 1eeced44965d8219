import { createHash, randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import type { Environment } from '../config.js'
import type { ApiKey, ApiKeysRepository } from './api-keys.repository.js'

export const KEY_PREFIX: Record<Environment, string> = { production: 'ps_live_', staging: 'ps_test_' }

/** `last used` is written at most this often per key, so that requests do not each cost a write. */
export const LAST_USED_RESOLUTION_MS = 60_000

const SECRET_LENGTH = 32 // base62 characters: 32 × log2(62) ≈ 190 random bits
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/** Uniformly random base62 text: bytes ≥ 248 are dropped so that `% 62` has no bias. */
function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

export interface CreatedApiKey {
  key: ApiKey
  /** The full key. It exists only here: the service keeps its SHA-256 hash. */
  secret: string
}

export interface ApiKeysService {
  create(input: { name: string; expiresInMs?: number }): Promise<CreatedApiKey>
  list(): Promise<ApiKey[]>
  revoke(id: string): Promise<ApiKey | undefined>
  /** The key a request presented, if it is valid here and now; undefined otherwise. */
  authenticate(secret: string): Promise<ApiKey | undefined>
}

export function createApiKeysService(deps: {
  apiKeys: ApiKeysRepository
  clock: Clock
  environment: Environment
}): ApiKeysService {
  const { apiKeys, clock, environment } = deps
  const prefix = KEY_PREFIX[environment]

  return {
    async create({ name, expiresInMs }) {
      const now = clock.now()
      const secret = prefix + randomBase62(SECRET_LENGTH)
      const key: ApiKey = {
        id: `key_${randomBase62(16)}`,
        name,
        prefix: secret.slice(0, prefix.length + 4),
        environment,
        createdAt: now,
        expiresAt: expiresInMs === undefined ? null : now + expiresInMs,
        revokedAt: null,
        lastUsedAt: null,
      }
      await apiKeys.insert(key, hashSecret(secret))
      return { key, secret }
    },

    list: () => apiKeys.list(),

    revoke: (id) => apiKeys.revoke(id, clock.now()),

    async authenticate(secret) {
      // A key of the other environment is refused like any unknown key, without a lookup.
      if (!secret.startsWith(prefix)) return undefined
      // Lookup by hash: comparing hashes leaks nothing useful about the secret through timing.
      const key = await apiKeys.findBySecretHash(hashSecret(secret))
      const now = clock.now()
      if (key === undefined || key.environment !== environment || key.revokedAt !== null) return undefined
      if (key.expiresAt !== null && key.expiresAt <= now) return undefined
      if (key.lastUsedAt === null || key.lastUsedAt <= now - LAST_USED_RESOLUTION_MS) {
        await apiKeys.touch(key.id, now, now - LAST_USED_RESOLUTION_MS)
      }
      return key
    },
  }
}
