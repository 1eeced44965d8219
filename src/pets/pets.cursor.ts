import { ApiError } from '../errors.js'
import { INT64_MAX } from '../shared/int64.js'
import { PET_STATUSES, type PetStatus } from './pets.repository.js'

/*
 * A cursor says where the next page starts (after an id) and which listing it belongs to. It is
 * opaque to clients, so that its form can change; it carries the status filter so that a cursor
 * replayed with another filter is refused instead of silently starting a different walk.
 */
const FORM = new RegExp(`^p1:(${PET_STATUSES.join('|')}|):([1-9][0-9]{0,18})$`)

export function encodeCursor(afterId: bigint, status: PetStatus | undefined): string {
  return Buffer.from(`p1:${status ?? ''}:${afterId}`).toString('base64url')
}

/** The id a page starts after; `invalid_request` when the cursor is not ours or not for this filter. */
export function decodeCursor(cursor: string, status: PetStatus | undefined): bigint {
  const text = Buffer.from(cursor, 'base64url').toString('latin1')
  const match = FORM.exec(text)
  // Node's base64url decoder skips stray characters: only the exact encoding of a cursor is one.
  if (match === null || Buffer.from(text, 'latin1').toString('base64url') !== cursor || BigInt(match[2] ?? '') > INT64_MAX) {
    throw new ApiError(
      'invalid_request',
      `'cursor' is not one this service issued: take it from the Link rel="next" URL of the previous page, or leave it out to start from the first page.`,
    )
  }
  const issuedFor = match[1] === '' ? undefined : match[1]
  if (issuedFor !== status) {
    throw new ApiError(
      'invalid_request',
      `'cursor' belongs to a listing ${issuedFor === undefined ? 'without a status filter' : `with status=${issuedFor}`}: ` +
        'send it with the same filter, or leave it out to start from the first page.',
    )
  }
  return BigInt(match[2] ?? '')
}
