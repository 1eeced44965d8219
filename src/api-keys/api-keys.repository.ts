import type { Environment } from '../config.js'
import { type Scope, storedScopes } from './api-keys.scopes.js'

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
  /** The id of the key this one was rotated to; null unless it was rotated. */
  replacedBy: string | null
  /**
   * The id of the first key of its rotation chain (its own, unless it was made by a rotation): the
   * client the key belongs to, which its Idempotency-Keys belong to as well.
   */
  lineage: string
  /** What it may do; never empty. */
  scopes: readonly Scope[]
}

export interface ApiKeysRepository {
  insert(key: ApiKey, secretHash: string): Promise<void>
  findBySecretHash(secretHash: string): Promise<ApiKey | undefined>
  list(): Promise<ApiKey[]>
  findById(id: string): Promise<ApiKey | undefined>
  /**
   * In one transaction: inserts `successor` (with the old key's lineage), and points the key `id` at it with an expiry of
   * `min(its expiry, expiresBy)`, provided that key still works at `now` and was not rotated yet.
   * Undefined, and nothing written, when it does not (or no longer) qualify; else the old key as updated.
   */
  rotate(id: string, successor: ApiKey, secretHash: string, expiresBy: number, now: number): Promise<ApiKey | undefined>
  /** Marks the key revoked at `at` unless it already is; undefined when no key has this id. */
  revoke(id: string, at: number): Promise<ApiKey | undefined>
  /** Records use at `at`, only if the last recorded use is at or before `staleBefore` (or none). */
  touch(id: string, at: number, staleBefore: number): Promise<void>
}

/** The columns every engine's repository selects, in the order `ApiKeyRow` names them. */
export const API_KEY_COLUMNS = 'id, name, prefix, environment, created_at, expires_at, revoked_at, last_used_at, replaced_by, lineage, scopes'

/** A row of `api_keys` as a driver returns it: times are int8 milliseconds, which pg gives as text. */
export interface ApiKeyRow {
  id: string
  name: string
  prefix: string
  environment: Environment
  created_at: number | string
  expires_at: number | string | null
  revoked_at: number | string | null
  last_used_at: number | string | null
  replaced_by: string | null
  /** Null for a key an older release inserted during an upgrade: the first of its line. */
  lineage: string | null
  /** Space-separated, as `storedScopes` writes them. */
  scopes: string
}

const toMs = (value: number | string | null): number | null => (value === null ? null : Number(value))

/** For the engine repositories only: rows never leave them. */
export function toApiKey(row: ApiKeyRow): ApiKey {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    environment: row.environment,
    createdAt: Number(row.created_at),
    expiresAt: toMs(row.expires_at),
    revokedAt: toMs(row.revoked_at),
    lastUsedAt: toMs(row.last_used_at),
    replacedBy: row.replaced_by,
    lineage: row.lineage ?? row.id,
    scopes: storedScopes.read(row.scopes),
  }
}
