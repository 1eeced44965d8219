import { ApiError } from '../errors.js'
import { INT64_MAX } from '../shared/int64.js'
import { PET_STATUSES, type PetStatus } from './pets.repository.js'

/*
 * A cursor says where the next page starts (after an id) and which listing it belongs to. It is
 * opaque to clients, so that its form can change; it carries the status filter so that a cursor
 * replayed with another filter is refused instead of silently starting a different walk.
 *
 * `p1:<status>:<id>` is the form of a service without standbys, and of every cursor issued before them.
 * `p2:<status>:<id>:<position>` adds where the server that read the page was in the WAL, so that the next
 * page is read on a server at least that far (docs/decisions/0023-read-replicas.md). Both are read. A
 * forged position grants nothing: one no standby has reached sends the page to the primary.
 */
const FORM = new RegExp(`^(?:p1:(${PET_STATUSES.join('|')}|):([1-9][0-9]{0,18})|p2:(${PET_STATUSES.join('|')}|):([1-9][0-9]{0,18}):(0|[1-9][0-9]{0,18}))$`)

export function encodeCursor(afterId: bigint, status: PetStatus | undefined, readAt?: bigint): string {
  const text = readAt === undefined ? `p1:${status ?? ''}:${afterId}` : `p2:${status ?? ''}:${afterId}:${readAt}`
  return Buffer.from(text).toString('base64url')
}

/** Where the next page starts. */
export interface CursorPosition {
  /** The id it starts after. */
  afterId: bigint
  /** Where the previous page was read, if the cursor says: the next is read on a server at least that far. */
  atLeast: bigint | undefined
}

/** Where a page starts; `invalid_request` when the cursor is not ours or not for this filter. */
export function decodeCursor(cursor: string, status: PetStatus | undefined): CursorPosition {
  const text = Buffer.from(cursor, 'base64url').toString('latin1')
  const match = FORM.exec(text)
  const [issuedForText, idText, positionText] = match?.[2] === undefined ? [match?.[3], match?.[4], match?.[5]] : [match[1], match[2], undefined]
  // Node's base64url decoder skips stray characters: only the exact encoding of a cursor is one.
  if (
    match === null ||
    Buffer.from(text, 'latin1').toString('base64url') !== cursor ||
    BigInt(idText ?? '') > INT64_MAX ||
    BigInt(positionText ?? '0') > INT64_MAX
  ) {
    throw new ApiError(
      'invalid_request',
      `'cursor' is not one this service issued: take it from the Link rel="next" URL of the previous page, or leave it out to start from the first page.`,
    )
  }
  const issuedFor = issuedForText === '' ? undefined : issuedForText
  if (issuedFor !== status) {
    throw new ApiError(
      'invalid_request',
      `'cursor' belongs to a listing ${issuedFor === undefined ? 'without a status filter' : `with status=${issuedFor}`}: ` +
        'send it with the same filter, or leave it out to start from the first page.',
    )
  }
  return { afterId: BigInt(idText ?? ''), atLeast: positionText === undefined ? undefined : BigInt(positionText) }
}
