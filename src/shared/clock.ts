/** The source of "now", injected so that time-dependent behaviour (sunset, expiry) can be tested. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number
}

export const systemClock: Clock = { now: () => Date.now() }
