import type { Database } from 'better-sqlite3'
import { storedScopes } from './api-keys.scopes.js'
import { API_KEY_COLUMNS as COLUMNS, type ApiKey, type ApiKeyRow, type ApiKeysRepository, toApiKey } from './api-keys.repository.js'

/** Rolls the rotation back: the old key no longer qualifies. */
class NotRotated extends Error {}

export function createSqliteApiKeysRepository(db: Database): ApiKeysRepository {
  const insert = db.prepare(
    `INSERT INTO api_keys (id, name, prefix, environment, created_at, expires_at, revoked_at, last_used_at, secret_hash, scopes, lineage)
     VALUES (@id, @name, @prefix, @environment, @createdAt, @expiresAt, @revokedAt, @lastUsedAt, @secretHash, @scopes, @lineage)`,
  )
  const bySecretHash = db.prepare<[string], ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE secret_hash = ?`)
  const all = db.prepare<[], ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`)
  const byId = db.prepare<[string], ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`)
  const replace = db.prepare<[{ successor: string; expiresBy: number; id: string; now: number }], ApiKeyRow>(
    `UPDATE api_keys SET replaced_by = @successor, expires_at = min(coalesce(expires_at, @expiresBy), @expiresBy)
     WHERE id = @id AND replaced_by IS NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > @now)
     RETURNING ${COLUMNS}`,
  )
  // IMMEDIATE (below): the write lock is taken before the old key is checked, so two rotations
  // of one key, even from two processes, cannot both succeed.
  const rotate = db.transaction((id: string, successor: ApiKey, secretHash: string, expiresBy: number, now: number) => {
    // The successor first: replaced_by references it.
    insert.run({ ...successor, secretHash, scopes: storedScopes.write(successor.scopes) })
    const row = replace.get({ successor: successor.id, expiresBy, id, now })
    if (row === undefined) throw new NotRotated()
    return toApiKey(row)
  })
  const revoke = db.prepare<[number, string], ApiKeyRow>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ? RETURNING ${COLUMNS}`,
  )
  const touch = db.prepare<[number, string, number]>(
    'UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)',
  )

  return {
    insert(key: ApiKey, secretHash: string): Promise<void> {
      insert.run({ ...key, secretHash, scopes: storedScopes.write(key.scopes) })
      return Promise.resolve()
    },
    findBySecretHash(secretHash: string): Promise<ApiKey | undefined> {
      const row = bySecretHash.get(secretHash)
      return Promise.resolve(row === undefined ? undefined : toApiKey(row))
    },
    list(): Promise<ApiKey[]> {
      return Promise.resolve(all.all().map(toApiKey))
    },
    findById(id: string): Promise<ApiKey | undefined> {
      const row = byId.get(id)
      return Promise.resolve(row === undefined ? undefined : toApiKey(row))
    },
    rotate(id, successor, secretHash, expiresBy, now): Promise<ApiKey | undefined> {
      try {
        return Promise.resolve(rotate.immediate(id, successor, secretHash, expiresBy, now))
      } catch (error) {
        if (error instanceof NotRotated) return Promise.resolve(undefined)
        throw error
      }
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
