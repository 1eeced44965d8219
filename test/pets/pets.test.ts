import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { CONTRACT_ENGINES, errorBody, postPet, useTestApp } from '../helper.js'

for (const engine of CONTRACT_ENGINES) {
  describe(`pets on ${engine}`, () => {
    const fx = useTestApp(engine)

    it('creates a pet and answers 201 with the stored pet, its id and a Location', async () => {
      const response = await postPet(fx.testApp, fx.key, '{"name":"Rex","categoryId":3,"status":"available"}')
      assert.equal(response.statusCode, 201)
      const pet = JSON.parse(response.body) as { id: number }
      assert.deepEqual(Object.keys(pet), ['id', 'name', 'categoryId', 'status'])
      assert.deepEqual(pet, { id: pet.id, name: 'Rex', categoryId: 3, status: 'available' })
      assert.ok(Number.isInteger(pet.id) && pet.id >= 1)
      assert.equal(response.headers.location, `${fx.testApp.config.publicBaseUrl}/v1/pets/${pet.id}`)
    })

    it('gives a pet created without status no status member anywhere', async () => {
      const created = await postPet(fx.testApp, fx.key, '{"name":"Nameless status","categoryId":4}')
      assert.equal(created.statusCode, 201)
      const pet = JSON.parse(created.body) as { id: number }
      assert.equal('status' in pet, false)
      assert.doesNotMatch(created.body, /"status"/)

      const fetched = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${pet.id}` })
      assert.equal(fetched.statusCode, 200)
      assert.doesNotMatch(fetched.body, /"status"/)

      const listed = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?limit=100' })
      const inList = (JSON.parse(listed.body) as { id: number }[]).find((p) => p.id === pet.id)
      assert.deepEqual(inList, { id: pet.id, name: 'Nameless status', categoryId: 4 })
    })

    it('keeps the name exactly as sent, unicode and surrounding spaces included', async () => {
      const name = '  Ünïcödé 🐕 名前  '
      const response = await postPet(fx.testApp, fx.key, JSON.stringify({ name, categoryId: 1 }))
      assert.equal(response.statusCode, 201)
      assert.equal((JSON.parse(response.body) as { name: string }).name, name)
    })

    it('gets a pet by id with 200 and the same body as the create', async () => {
      const created = await postPet(fx.testApp, fx.key, '{"name":"Fetch me","categoryId":12,"status":"pending"}')
      const pet = JSON.parse(created.body) as { id: number }
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${pet.id}` })
      assert.equal(response.statusCode, 200)
      assert.equal(response.body, created.body)
      assert.match(String(response.headers['content-type']), /^application\/json/)
    })

    it('answers 404 not_found for an id no pet has', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets/9223372036854775807' })
      assert.equal(response.statusCode, 404)
      assert.equal(errorBody(response).code, 'not_found')
    })
  })

  describe(`listPets on ${engine}`, () => {
    const fx = useTestApp(engine)
    const statuses = ['available', 'pending', 'sold', undefined] as const
    before(async () => {
      for (let i = 0; i < 130; i++) {
        const status = statuses[i % 4]
        const body = JSON.stringify({ name: `pet ${i}`, categoryId: i + 1, ...(status ? { status } : {}) })
        assert.equal((await postPet(fx.testApp, fx.key, body)).statusCode, 201)
      }
    })

    const list = async (query: string) => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets${query}` })
      assert.equal(response.statusCode, 200, response.body)
      return JSON.parse(response.body) as { id: number; name: string; status?: string }[]
    }

    it('returns 20 pets by default, as a bare JSON array, in ascending id order', async () => {
      const pets = await list('')
      assert.equal(pets.length, 20)
      assert.deepEqual(
        pets.map((p) => p.name),
        Array.from({ length: 20 }, (_, i) => `pet ${i}`),
      )
      assert.ok(pets.every((p, i) => i === 0 || p.id > (pets[i - 1]?.id ?? 0)))
    })

    it('honours limit from 1 to 100', async () => {
      assert.equal((await list('?limit=1')).length, 1)
      assert.equal((await list('?limit=57')).length, 57)
      assert.equal((await list('?limit=100')).length, 100)
    })

    for (const status of ['available', 'pending', 'sold'] as const) {
      it(`filters by status=${status}`, async () => {
        const pets = await list(`?status=${status}&limit=100`)
        assert.ok(pets.length >= 32)
        assert.ok(pets.every((p) => p.status === status))
        assert.ok(pets.every((p, i) => i === 0 || p.id > (pets[i - 1]?.id ?? 0)))
      })
    }

    it('combines status and limit', async () => {
      const pets = await list('?status=sold&limit=3')
      assert.deepEqual(
        pets.map((p) => p.name),
        ['pet 2', 'pet 6', 'pet 10'],
      )
    })
  })
}
