import { type Config, ConfigError } from '../config.js'

/*
 * What the specification deprecates, and when it goes: written here once. The pets routes apply it
 * (deprecations.hooks.ts, the headers of deprecations.schemas.ts), `petstore deprecations` reports on it
 * and `serve` bounds GETPET_DEPRECATED_AT by it (checkGetPetDeprecatedAt). ops/ and the docs, which cannot import it, carry the
 * date too: test/deprecations/sunset.test.ts fails when one of them disagrees.
 */

/** The sunset of getPet, fixed by the specification: from then on it answers 410. */
export const GET_PET_SUNSET = new Date('2030-12-05T00:00:00Z')

/**
 * RFC 9745 puts a sunset no earlier than the deprecation it ends; getPet's sunset is not a setting, so the
 * configured deprecation gives way: a later one is refused, naming GETPET_DEPRECATED_AT. The composition
 * calls it, since configuration, which is plumbing, knows no feature.
 */
export function checkGetPetDeprecatedAt(config: Pick<Config, 'getPetDeprecatedAt'>): void {
  if (config.getPetDeprecatedAt > GET_PET_SUNSET) {
    throw new ConfigError(
      'GETPET_DEPRECATED_AT',
      `must not be later than the sunset of getPet, ${GET_PET_SUNSET.toISOString()} (fixed by the specification), got "${config.getPetDeprecatedAt.toISOString()}"`,
    )
  }
}

/** getPet, deprecated in favour of listPets with a `status` filter: the operationId its calls are counted under. */
export const GET_PET_DEPRECATION = { operationId: 'getPet', sunset: GET_PET_SUNSET } as const
