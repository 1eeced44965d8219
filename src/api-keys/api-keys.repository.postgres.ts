import type pg from 'pg'
import type { ReplicaSet } from '../storage/postgres/replica-set.js'
import { storedScopes } from './api-keys.scopes.js'
import { API_KEY_COLUMNS as COLUMNS, type ApiKey, type ApiKeyRow, type ApiKeysRepository, toApiKey } from './api-keys.repository.js'

async function keyBySecretHash(on: pg.Pool, secretHash: string): Promise<ApiKey | undefined> {
  const { rows } = await on.query<ApiKeyRow>({ name: 'api-keys-by-hash', text: `SELECT ${COLUMNS} FROM api_keys WHERE secret_hash = $1`, values: [secretHash] })
  return rows[0] === undefined ? undefined : toApiKey(rows[0])
}

/**
 * The keys of `pool`. With `replicas`, a key is looked up on the primary, so that a revocation counts
 * everywhere within KEY_RECHECK_MS, and on a standby only while the primary is down (docs/api.md).
 */
export function createPostgresApiKeysRepository(pool: pg.Pool, replicas?: ReplicaSet): ApiKeysRepository {
  return {
    async insert(key: ApiKey, secretHash: string): Promise<void> {
      await pool.query(
        `INSERT INTO api_keys (id, name, prefix, environment, created_at, expires_at, revoked_at, last_used_at, secret_hash, scopes, lineage)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          key.id,
          key.name,
          key.prefix,
          key.environment,
          key.createdAt,
          key.expiresAt,
          key.revokedAt,
          key.lastUsedAt,
          secretHash,
          storedScopes.write(key.scopes),
          key.lineage,
        ],
      )
    },
    findBySecretHash: (secretHash: string): Promise<ApiKey | undefined> =>
      replicas === undefined ? keyBySecretHash(pool, secretHash) : replicas.read({ kind: 'key', first: 'primary' }, (on) => keyBySecretHash(on, secretHash)),
    async list(): Promise<ApiKey[]> {
      const { rows } = await pool.query<ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`)
      return rows.map(toApiKey)
    },
    async findById(id: string): Promise<ApiKey | undefined> {
      const { rows } = await pool.query<ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE id = $1`, [id])
      return rows[0] === undefined ? undefined : toApiKey(rows[0])
    },
    async rotate(id, successor, secretHash, expiresBy, now): Promise<ApiKey | undefined> {
      // One statement, so one transaction: the successor is inserted only if the UPDATE, which locks
      // the old key's row and checks it again, matched; two rotations of one key cannot both succeed.
      const { rows } = await pool.query<ApiKeyRow>(
        `WITH old AS (
           UPDATE api_keys SET replaced_by = $1, expires_at = least(coalesce(expires_at, $8::bigint), $8::bigint)
           WHERE id = $9 AND replaced_by IS NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $10)
           RETURNING ${COLUMNS}
         ), successor AS (
           INSERT INTO api_keys (id, name, prefix, environment, created_at, expires_at, secret_hash, scopes, lineage)
           SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, $6::bigint, $7::text, $11::text, $12::text FROM old
         )
         SELECT * FROM old`,
        [
          successor.id,
          successor.name,
          successor.prefix,
          successor.environment,
          successor.createdAt,
          successor.expiresAt,
          secretHash,
          expiresBy,
          id,
          now,
          storedScopes.write(successor.scopes),
          successor.lineage,
        ],
      )
      return rows[0] === undefined ? undefined : toApiKey(rows[0])
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
