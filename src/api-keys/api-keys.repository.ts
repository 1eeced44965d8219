import type { Environment } from '../config.js'

/** An API key as the service knows it: everything but the secret, which is never stored. */
export interface ApiKey {
  id: string
  name: string
  /** The first characters of the key, enough for a person to recognise it. */
  prefix: string
  environment: Environment
  createdAt: number
  expiresAt: number | null
  revokedAt: number | null
  lastUsedAt: number | null
}

export interface ApiKeysRepository {
  insert(key: ApiKey, secretHash: string): Promise<void>
  findBySecretHash(secretHash: string): Promise<ApiKey | undefined>
  list(): Promise<ApiKey[]>
  /** Marks the key revoked at `at` unless it already is; undefined when no key has this id. */
  revoke(id: string, at: number): Promise<ApiKey | undefined>
  /** Records use at `at`, only if the last recorded use is at or before `staleBefore` (or none). */
  touch(id: string, at: number, staleBefore: number): Promise<void>
}
