import type pg from 'pg'
import { API_KEY_COLUMNS as COLUMNS, type ApiKey, type ApiKeyRow, type ApiKeysRepository, toApiKey } from './api-keys.repository.js'

export function createPostgresApiKeysRepository(pool: pg.Pool): ApiKeysRepository {
  return {
    async insert(key: ApiKey, secretHash: string): Promise<void> {
      await pool.query(
        `INSERT INTO api_keys (id, name, prefix, environment, created_at, expires_at, revoked_at, last_used_at, secret_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [key.id, key.name, key.prefix, key.environment, key.createdAt, key.expiresAt, key.revokedAt, key.lastUsedAt, secretHash],
      )
    },
    async findBySecretHash(secretHash: string): Promise<ApiKey | undefined> {
      const { rows } = await pool.query<ApiKeyRow>({
        name: 'api-keys-by-hash',
        text: `SELECT ${COLUMNS} FROM api_keys WHERE secret_hash = $1`,
        values: [secretHash],
      })
      return rows[0] === undefined ? undefined : toApiKey(rows[0])
    },
    async list(): Promise<ApiKey[]> {
      const { rows } = await pool.query<ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`)
      return rows.map(toApiKey)
    },
    async revoke(id: string, at: number): Promise<ApiKey | undefined> {
      const { rows } = await pool.query<ApiKeyRow>(
        `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2 RETURNING ${COLUMNS}`,
        [at, id],
      )
      return rows[0] === undefined ? undefined : toApiKey(rows[0])
    },
    async touch(id: string, at: number, staleBefore: number): Promise<void> {
      await pool.query({
        name: 'api-keys-touch',
        text: 'UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at <= $3)',
        values: [at, id, staleBefore],
      })
    },
  }
}
