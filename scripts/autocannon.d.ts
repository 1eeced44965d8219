// autocannon ships no types; this covers only what bench/soak.ts and bench/load.ts use, as its README documents it.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  namespace autocannon {
    /** One HTTP request as autocannon builds it; `setupRequest` returns a changed copy. */
    interface Request {
      method?: string
      path?: string
      headers?: Record<string, string>
      body?: string | Buffer
    }

    /** Per-connection scratch space, reset before each pass over `requests`. */
    type Context = Record<string, unknown>

    interface RequestSpec {
      setupRequest?: (request: Request, context: Context) => Request
      onResponse?: (status: number, body: string, context: Context, headers: Record<string, string | string[]>) => void
    }

    interface Options {
      url: string
      connections?: number
      /** Seconds. */
      duration?: number
      /** Requests per second over all connections; none means as fast as the server answers. */
      overallRate?: number
      /** Record latencies as measured, without coordinated-omission correction. */
      ignoreCoordinatedOmission?: boolean
      /** Seconds before a request counts as a timeout (an error). */
      timeout?: number
      requests?: RequestSpec[]
    }

    interface Histogram {
      average: number
      mean: number
      stddev: number
      min: number
      max: number
      p50: number
      p90: number
      p99: number
    }

    interface Result {
      /** Per-sample (per-second) request counts; `total` completed, `sent` written. */
      requests: Histogram & { total: number; sent: number }
      /** Milliseconds. */
      latency: Histogram & { totalCount: number }
      /** Seconds. */
      duration: number
      /** Socket errors, timeouts included. */
      errors: number
      timeouts: number
      mismatches: number
      non2xx: number
      statusCodeStats: Record<string, { count: number }>
    }

    interface Instance extends EventEmitter {
      stop(): void
    }
  }

  function autocannon(options: autocannon.Options, callback: (error: Error | null, result: autocannon.Result) => void): autocannon.Instance

  export default autocannon
}
