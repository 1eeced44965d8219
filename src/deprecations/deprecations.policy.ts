/** The sunset of getPet, fixed by the specification: from then on it answers 410. */
export const GET_PET_SUNSET = new Date('2030-12-05T00:00:00Z')
