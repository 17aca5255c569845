// A part of the running collector with a start and a stop: a listener, the agent server, the
// list-watch, the elector, the host-side poller, a timer. serve/manager.ts starts them in the
// order registered and stops them in reverse (controller-runtime's Runnable). Here, at the
// bottom, so that the modes (platform/) can hand theirs to the composition root above them.

/** How to stop what a start began. */
export type StopRunnable = () => Promise<void> | void;

export interface Runnable {
  /** For the log and the error of a start that failed ("agent listener", "kubernetes list-watch"). */
  readonly name: string;
  /** Starts it; resolves once it runs (a listener listens, an inventory has synced). Returns how to stop it. */
  start(): Promise<StopRunnable | undefined> | StopRunnable | undefined;
  /** Whether it is ready now, once started (default: yes). */
  ready?(): boolean;
}

/** A runnable of a timer: `tick` every `everyMs` from start, unref'd (it keeps no process alive). */
export function intervalRunnable(name: string, everyMs: number, tick: () => void): Runnable {
  return {
    name,
    start() {
      const timer = setInterval(tick, everyMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

/** A runnable whose start and stop are plain calls (the host-side poller, the fleet's deadlines). */
export function runnableOf(name: string, start: () => void, stop: StopRunnable): Runnable {
  return {
    name,
    start() {
      start();
      return stop;
    },
  };
}
