/** Fault injection: make matching requests fail, or hang, a given number of times. */

export interface FaultSpec {
  /** HTTP method to match (any when absent). */
  method?: string;
  /** A substring of, or a RegExp tested against, the request path including its query string. */
  pathPattern: string | RegExp;
  /** Answer with this status (a Kubernetes `Status` body). Absent: after any hang, serve normally. */
  status?: number;
  /** How many matching requests this fault applies to (default 1). */
  times?: number;
  /**
   * Hold the request this long before answering. A client that gives up first gets nothing and
   * the request is never processed. `Infinity` holds it until the client goes away.
   */
  hangMs?: number;
  /**
   * Process the request normally, then hold the answer for `hangMs` (or drop it, with Infinity):
   * the write happened but the client never hears so, as when a response is lost.
   */
  afterProcessing?: boolean;
  /** Seconds, sent as a `Retry-After` header (with 429 and 503). */
  retryAfter?: number;
  message?: string;
}

export interface ActiveFault {
  readonly spec: FaultSpec;
  /** How many more requests this fault will hit. */
  remaining(): number;
}

interface Entry {
  spec: FaultSpec;
  left: number;
}

export class Faults {
  private entries: Entry[] = [];

  add(spec: FaultSpec): ActiveFault {
    if (spec.status === undefined && spec.hangMs === undefined) {
      throw new Error("fake-kube fault needs a status, a hangMs, or both");
    }
    if (spec.afterProcessing && (spec.hangMs === undefined || spec.status !== undefined)) {
      throw new Error("fake-kube afterProcessing fault needs a hangMs and no status");
    }
    const entry: Entry = { spec, left: spec.times ?? 1 };
    this.entries.push(entry);
    return { spec, remaining: () => entry.left };
  }

  clear(): void {
    this.entries = [];
  }

  /** Consumes one use of the first fault matching this request, if any. */
  take(method: string, pathWithQuery: string): FaultSpec | undefined {
    for (const entry of this.entries) {
      if (entry.left <= 0) continue;
      if (entry.spec.method && entry.spec.method.toUpperCase() !== method.toUpperCase()) continue;
      const p = entry.spec.pathPattern;
      const hit = typeof p === "string" ? pathWithQuery.includes(p) : p.test(pathWithQuery);
      if (!hit) continue;
      entry.left -= 1;
      return entry.spec;
    }
    return undefined;
  }
}

export function reasonForStatus(status: number): string {
  switch (status) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return status >= 500 ? "InternalError" : "BadRequest";
  }
}
