// The composition root's one owner of lifecycles (controller-runtime's Manager): serve.ts
// registers the runnables (listeners, the agent server, the mode's list-watch and elector, the
// host-side poller, the memory guard, timers) in the order they may start; the Manager starts
// them one after the other, answers readiness, and stops them in reverse order. A runnable that
// fails to start stops the ones already started before the error goes on: a collector that
// cannot open its port does not leave a Lease held or a watch running. The error itself goes on
// unchanged (its message is what the operator reads).
import type { Logger } from "@ws/protocol";
import { errorMessage } from "@ws/protocol";
import type { Runnable, StopRunnable } from "../lib/runnable.js";

export type { Runnable, StopRunnable } from "../lib/runnable.js";

export class Manager {
  private readonly runnables: Runnable[] = [];
  private readonly started: { runnable: Runnable; stop: StopRunnable | undefined }[] = [];
  private phase: "registering" | "starting" | "running" | "stopping" | "stopped" | "failed" = "registering";

  constructor(private readonly log?: Logger) {}

  /** Registers a runnable; it starts after the ones registered before it and stops before them. */
  add(runnable: Runnable): this {
    if (this.phase !== "registering") throw new Error(`cannot add ${runnable.name}: the manager has started`);
    this.runnables.push(runnable);
    return this;
  }

  /** Starts every runnable in order. On a failure, stops those started (in reverse) and throws the first error. */
  async start(): Promise<void> {
    if (this.phase !== "registering") throw new Error("the manager starts once");
    this.phase = "starting";
    for (const runnable of this.runnables) {
      let stop: StopRunnable | undefined;
      try {
        stop = (await runnable.start()) ?? undefined;
      } catch (error) {
        this.phase = "failed";
        this.log?.("error", `${runnable.name} failed to start: ${errorMessage(error)}`);
        await this.stopStarted();
        throw error;
      }
      this.started.push({ runnable, stop });
    }
    this.phase = "running";
  }

  /**
   * Ready while starting or running, when every runnable started so far says it is: whatever
   * answers /readyz was registered after the parts it needs, so it answers only once they run.
   * Not ready once stopping or after a failed start.
   */
  ready(): boolean {
    if (this.phase !== "starting" && this.phase !== "running") return false;
    return this.started.every(({ runnable }) => runnable.ready?.() ?? true);
  }

  /** The names of the runnables started and not yet stopped, in start order (for tests and logs). */
  running(): string[] {
    return this.started.map(({ runnable }) => runnable.name);
  }

  /** Stops every started runnable, last started first; a stop that throws is logged and the rest go on. */
  async stop(): Promise<void> {
    if (this.phase === "stopping" || this.phase === "stopped") return;
    this.phase = "stopping";
    await this.stopStarted();
    this.phase = "stopped";
  }

  private async stopStarted(): Promise<void> {
    for (let entry = this.started.pop(); entry; entry = this.started.pop()) {
      try {
        await entry.stop?.();
      } catch (error) {
        this.log?.("warn", `${entry.runnable.name} did not stop cleanly: ${errorMessage(error)}`);
      }
    }
  }
}
