import { GET_PET_DEPRECATION } from './deprecations.policy.js'
import { type CliIo, humanOutput, iso, table, withStorage } from '../cli/output.js'
import { parse } from '../cli/usage.js'
import { systemClock } from '../shared/clock.js'
import { loadConfig } from '../config.js'
import { createDeprecationsService } from './deprecations.service.js'

const { operationId, sunset } = GET_PET_DEPRECATION
/** How the report names the operation. */
const GET_PET_LABEL = `${operationId} (GET /v1/pets/{petId})`

export const DEPRECATIONS_HELP = `Usage: petstore deprecations [--json]

Lists every API key that called the deprecated ${GET_PET_LABEL}: id, name, calls,
first and last call, most recent first, and the days left until its sunset on ${sunset.toISOString().slice(0, 10)}.
Calls are counted per key once the key is authenticated, whatever the answer (404 and, after
the sunset, 410 included); calls without a valid key have no key to count against. Servers
write their counts every 10 seconds and when they stop, so a call shows here within about 10 s.
  --json   Print a JSON object instead of text`

export async function deprecationsCommand(args: string[], io: CliIo): Promise<0> {
  const { values } = parse('deprecations', args, { json: { type: 'boolean' } })
  const config = loadConfig(io.env, io.cwd)
  const report = await withStorage(
    config,
    humanOutput(io, values.json),
    (storage) => createDeprecationsService({ deprecations: storage.deprecations, clock: systemClock }).report(operationId, sunset),
    { warnings: io },
  )
  const keys = report.callers.map((caller) => ({
    id: caller.keyId,
    name: caller.keyName,
    calls: caller.calls,
    firstSeen: iso(caller.firstSeen),
    lastSeen: iso(caller.lastSeen),
  }))
  if (values.json === true) {
    const { operation, sunsetPassed, daysLeft } = report
    io.stdout(JSON.stringify({ operation, sunset: report.sunset.toISOString(), sunsetPassed, daysLeft, keys }, null, 2) + '\n')
    return 0
  }
  const at = report.sunset.toISOString()
  io.stdout(
    report.sunsetPassed
      ? `${GET_PET_LABEL} passed its sunset on ${at} (0 days left): it answers 410 Gone.\n`
      : `${GET_PET_LABEL} is deprecated: sunset ${at}, ${report.daysLeft} day${report.daysLeft === 1 ? '' : 's'} left.\n`,
  )
  if (keys.length === 0) {
    io.stdout('No key has called it.\n')
    return 0
  }
  const header = ['KEY ID', 'NAME', 'CALLS', 'FIRST SEEN', 'LAST SEEN']
  // A key that no longer exists still shows its id: its counts outlive it.
  const rows = keys.map((k) => [k.id, k.name ?? '(unknown key)', String(k.calls), k.firstSeen ?? '-', k.lastSeen ?? '-'])
  io.stdout(table([header, ...rows]) + '\n')
  return 0
}
