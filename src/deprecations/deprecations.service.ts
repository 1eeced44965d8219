import type { Clock } from '../shared/clock.js'
import type { DeprecatedCaller, DeprecationsRepository } from './deprecations.repository.js'

const DAY_MS = 86_400_000

/** Who still calls a deprecated operation, and how long they have left. */
interface DeprecationReport {
  operation: string
  sunset: Date
  /** Whole days until the sunset, rounded up: 0 exactly when the sunset has passed. */
  daysLeft: number
  sunsetPassed: boolean
  callers: DeprecatedCaller[]
}

export interface DeprecationsService {
  report(operation: string, sunset: Date): Promise<DeprecationReport>
}

export function createDeprecationsService(deps: { deprecations: DeprecationsRepository; clock: Clock }): DeprecationsService {
  const { deprecations, clock } = deps
  return {
    async report(operation, sunset) {
      const leftMs = sunset.getTime() - clock.now()
      return {
        operation,
        sunset,
        daysLeft: Math.max(0, Math.ceil(leftMs / DAY_MS)),
        sunsetPassed: leftMs <= 0,
        callers: await deprecations.callers(operation),
      }
    },
  }
}
