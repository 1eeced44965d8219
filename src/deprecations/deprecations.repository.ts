/** Calls to one deprecated operation by one key: how many, and when the first and last were made. */
export interface DeprecatedCalls {
  /** The operationId, e.g. `getPet`. */
  operation: string
  keyId: string
  calls: number
  /** Milliseconds since the Unix epoch. */
  firstSeen: number
  lastSeen: number
}

/** A row of the report: the counts, and the key's name while the key exists. */
export interface DeprecatedCaller extends DeprecatedCalls {
  keyName: string | null
}

export interface DeprecationsRepository {
  /**
   * Adds counts to what is stored, all in one transaction: calls are summed, the first and last
   * seen times widened. Processes adding at once on one database all count.
   */
  add(counts: readonly DeprecatedCalls[]): Promise<void>
  /** Every key that called `operation`, most recent caller first. */
  callers(operation: string): Promise<DeprecatedCaller[]>
}

/** A row of `deprecated_calls` joined to `api_keys`: int8 values come from pg as text. */
export interface DeprecatedCallerRow {
  operation: string
  api_key_id: string
  calls: number | string
  first_seen: number | string
  last_seen: number | string
  key_name: string | null
}

/** The report query of both engines: a left join, so that a key that is gone still shows its id. */
export const CALLERS_QUERY = (placeholder: string): string => `
  SELECT c.operation, c.api_key_id, c.calls, c.first_seen, c.last_seen, k.name AS key_name
  FROM deprecated_calls c LEFT JOIN api_keys k ON k.id = c.api_key_id
  WHERE c.operation = ${placeholder}
  ORDER BY c.last_seen DESC, c.api_key_id`

/** For the engine repositories only: rows never leave them. */
export function toDeprecatedCaller(row: DeprecatedCallerRow): DeprecatedCaller {
  return {
    operation: row.operation,
    keyId: row.api_key_id,
    calls: Number(row.calls),
    firstSeen: Number(row.first_seen),
    lastSeen: Number(row.last_seen),
    keyName: row.key_name,
  }
}
