import type { Database } from 'better-sqlite3'
import { API_KEY_COLUMNS as COLUMNS, type ApiKey, type ApiKeyRow, type ApiKeysRepository, toApiKey } from './api-keys.repository.js'

export function createSqliteApiKeysRepository(db: Database): ApiKeysRepository {
  const insert = db.prepare(
    `INSERT INTO api_keys (id, name, prefix, environment, created_at, expires_at, revoked_at, last_used_at, secret_hash)
     VALUES (@id, @name, @prefix, @environment, @createdAt, @expiresAt, @revokedAt, @lastUsedAt, @secretHash)`,
  )
  const bySecretHash = db.prepare<[string], ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE secret_hash = ?`)
  const all = db.prepare<[], ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`)
  const revoke = db.prepare<[number, string], ApiKeyRow>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ? RETURNING ${COLUMNS}`,
  )
  const touch = db.prepare<[number, string, number]>(
    'UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)',
  )

  return {
    insert(key: ApiKey, secretHash: string): Promise<void> {
      insert.run({ ...key, secretHash })
      return Promise.resolve()
    },
    findBySecretHash(secretHash: string): Promise<ApiKey | undefined> {
      const row = bySecretHash.get(secretHash)
      return Promise.resolve(row === undefined ? undefined : toApiKey(row))
    },
    list(): Promise<ApiKey[]> {
      return Promise.resolve(all.all().map(toApiKey))
    },
    revoke(id: string, at: number): Promise<ApiKey | undefined> {
      const row = revoke.get(at, id)
      return Promise.resolve(row === undefined ? undefined : toApiKey(row))
    },
    touch(id: string, at: number, staleBefore: number): Promise<void> {
      touch.run(at, id, staleBefore)
      return Promise.resolve()
    },
  }
}
