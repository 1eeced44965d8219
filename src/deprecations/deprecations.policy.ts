/*
 * What the specification deprecates, and when it goes: written here once. The pets routes apply it
 * (deprecations.hooks.ts, the headers of deprecations.schemas.ts), `petstore deprecations` reports on it
 * and loadConfig bounds GETPET_DEPRECATED_AT by it. ops/ and the docs, which cannot import it, carry the
 * date too: test/deprecations/sunset.test.ts fails when one of them disagrees.
 */

/** The sunset of getPet, fixed by the specification: from then on it answers 410. */
export const GET_PET_SUNSET = new Date('2030-12-05T00:00:00Z')

/** getPet, deprecated in favour of listPets with a `status` filter: the operationId its calls are counted under. */
export const GET_PET_DEPRECATION = { operationId: 'getPet', sunset: GET_PET_SUNSET } as const
