// The SQLite run's baseline: the pets in an array (and a Map by id), `JSON.stringify` per request,
// behind the shared bare node:http front (baseline-http.ts). Its throughput is the limit of Node on
// this machine. Compiled to plain JavaScript and run without a loader by bench/setup.ts.
// Env: PORT, BENCH_KEY (the one key it accepts), BENCH_PETS_FILE (JSON array of the seeded pets).
import fs from 'node:fs'
import { type NewPet, required, serveBaseline } from './baseline-http.js'

interface Pet extends NewPet {
  id: number
}

const pets = JSON.parse(fs.readFileSync(required('BENCH_PETS_FILE'), 'utf8')) as Pet[]
const byId = new Map(pets.map((pet) => [pet.id, pet]))
let nextId = pets.reduce((max, pet) => Math.max(max, pet.id), 0) + 1

serveBaseline(
  {
    list(limit, status) {
      const page: Pet[] = []
      for (const pet of pets) {
        if (page.length === limit) break
        if (status === undefined || pet.status === status) page.push(pet)
      }
      return JSON.stringify(page)
    },
    get(id) {
      const pet = byId.get(Number(id))
      // Above 2^53 Number(id) could name another pet; no seeded id is that large.
      return pet === undefined ? undefined : JSON.stringify(pet)
    },
    create(fields) {
      // Key order as the service writes it: id, name, categoryId, status.
      const pet: Pet = { id: nextId++, ...fields }
      pets.push(pet)
      byId.set(pet.id, pet)
      return { id: String(pet.id), body: JSON.stringify(pet) }
    },
  },
  `${pets.length} pets in memory`,
)
