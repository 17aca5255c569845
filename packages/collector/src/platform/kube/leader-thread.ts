/**
 * Leader election on a thread of its own. A reconnect burst (thousands of Hellos, first Reports
 * and Directives) can keep the main event loop busy for longer than the renew deadline; a renewal
 * queued behind it arrives too late and the leader steps down, which drops every stream and makes
 * the next burst. The elector (platform/kube/leader.ts, unchanged) therefore runs in a worker thread with
 * its own event loop and its own HTTPS client to the API server: it needs a few milliseconds of
 * CPU every renewInterval, which the kernel gives it however busy the main thread is.
 *
 * The main thread learns of leadership two ways:
 * - synchronously, from shared memory the worker writes (leading, and when it last renewed):
 *   `isLeader()` answers from it and from its own clock, so the main thread stops acting the
 *   moment the renew deadline passes, even before the worker's message is read;
 * - by messages, in order: started (the main thread resets its records, then acts), stopped
 *   (it closes the agents' streams), the observed leader, errors and request counts.
 *
 * The worker is the same bundle (ws-collector.cjs) started with `workerData.wsRole`; main.ts sends
 * it here instead of the CLI. If the worker cannot start or dies, this replica does not lead
 * (missing leadership is safe: the other replica leads) and a new worker is started.
 */
import { Worker, parentPort } from "node:worker_threads";
import { createKubeClients, describeError, loadKubeConfig, type KubeConfigSource } from "./client.js";
import { LeaderElector, reportElectionError, runElectionCallback, type LeaderElectorOptions } from "./leader.js";

const ROLE = "ws-leader-elector";
/** Slots of the shared state: leading (0/1) and the start of the last successful renewal (ms). */
const LEADING = 0;
const RENEWED_AT = 1;
/** After the worker died, the wait before starting another. */
const RESTART_DELAY_MS = 2_000;
/** The worker's own heap: it holds one Lease and one HTTPS agent. */
const WORKER_HEAP_MB = 64;

type ElectionSettings = Pick<
  LeaderElectorOptions,
  "namespace" | "leaseName" | "identity" | "leaseDurationMs" | "renewDeadlineMs" | "renewIntervalMs" | "retryPeriodMs"
>;

interface WorkerInput {
  wsRole: typeof ROLE;
  source: KubeConfigSource;
  settings: ElectionSettings;
  state: SharedArrayBuffer;
}

type FromWorker =
  | { type: "started" }
  | { type: "stopped"; reason: string }
  | { type: "leader"; identity: string | null }
  | { type: "error"; message: string }
  | { type: "request"; method: string; status: number | null }
  | { type: "closed" };

type ToWorker = { type: "stop"; release: boolean };

export interface LeaderThreadOptions {
  source: KubeConfigSource;
  settings: ElectionSettings;
  /** The bundle to start the worker from (default: the running script). */
  script?: string;
  nowMs: () => number;
  onStartedLeading?: () => void;
  onStoppedLeading?: (reason: string) => void;
  onNewLeader?: (identity: string | null) => void;
  onError?: (message: string) => void;
  onRequest?: (method: string, status: number | null) => void;
}

/** True in the worker main.ts starts for the election. */
export function isLeaderWorker(workerData: unknown): workerData is WorkerInput {
  return (workerData as { wsRole?: unknown } | null)?.wsRole === ROLE;
}

/** The running bundle's path: the worker runs the same file. */
function runningScript(): string {
  return typeof __filename === "string" && __filename ? __filename : (process.argv[1] ?? "");
}

/** The main thread's side: the same surface serve.ts used on the in-process elector. */
export class LeaderThread {
  private readonly state = new SharedArrayBuffer(2 * BigInt64Array.BYTES_PER_ELEMENT);
  private readonly view = new BigInt64Array(this.state);
  private readonly renewDeadlineMs: number;
  private worker: Worker | null = null;
  private announced = false;
  private leader: string | null = null;
  private running = false;
  private restartTimer: NodeJS.Timeout | null = null;
  private closing: (() => void) | null = null;

  constructor(private readonly options: LeaderThreadOptions) {
    this.renewDeadlineMs = options.settings.renewDeadlineMs ?? 10_000;
  }

  /** Leading right now: the worker holds the Lease, renewed within the deadline, and the main thread has taken over. */
  isLeader(): boolean {
    if (!this.announced) return false;
    const leading = Atomics.load(this.view, LEADING) === 1n;
    const renewedAt = Number(Atomics.load(this.view, RENEWED_AT));
    if (leading && this.options.nowMs() - renewedAt < this.renewDeadlineMs) return true;
    this.stepDown(leading ? `no successful renewal within ${this.renewDeadlineMs} ms` : "the elector stopped leading");
    return false;
  }

  currentLeader(): string | null {
    return this.isLeader() ? this.options.settings.identity : this.leader;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.spawn();
  }

  /** Stops campaigning; with `release`, a leader hands the Lease back first. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.running = false;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = null;
    const worker = this.worker;
    if (worker) {
      const closed = new Promise<void>((resolve) => {
        this.closing = resolve;
        worker.once("exit", () => resolve());
      });
      worker.postMessage({ type: "stop", release: options.release === true } satisfies ToWorker);
      // A worker that does not answer in time is ended; its Lease lapses on its own.
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
      this.closing = null;
      this.worker = null;
      await worker.terminate().catch(() => undefined);
    }
    this.stepDown("elector stopped");
  }

  private spawn(): void {
    Atomics.store(this.view, LEADING, 0n);
    const input: WorkerInput = {
      wsRole: ROLE,
      source: this.options.source,
      settings: this.options.settings,
      state: this.state,
    };
    let worker: Worker;
    try {
      worker = new Worker(this.options.script ?? runningScript(), {
        workerData: input,
        resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
        stdout: false,
        stderr: false,
      });
    } catch (err) {
      this.report(`cannot start the election thread: ${describeError(err)}`);
      this.restartLater();
      return;
    }
    this.worker = worker;
    worker.unref();
    worker.on("message", (message: FromWorker) => this.receive(message));
    worker.on("error", (err) => this.report(`election thread failed: ${describeError(err)}`));
    worker.on("exit", (code) => {
      if (this.worker !== worker) return;
      this.worker = null;
      Atomics.store(this.view, LEADING, 0n);
      this.stepDown(`the election thread exited (code ${code})`);
      if (this.running) {
        this.report(`the election thread exited (code ${code}); starting another`);
        this.restartLater();
      }
    });
  }

  private restartLater(): void {
    if (!this.running || this.restartTimer) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.running) this.spawn();
    }, RESTART_DELAY_MS);
    this.restartTimer.unref();
  }

  private receive(message: FromWorker): void {
    switch (message.type) {
      case "started":
        if (this.announced || Atomics.load(this.view, LEADING) !== 1n) return;
        this.announced = true;
        this.leader = this.options.settings.identity;
        this.safely(() => this.options.onStartedLeading?.());
        return;
      case "stopped":
        this.stepDown(message.reason);
        return;
      case "leader":
        this.leader = message.identity;
        this.safely(() => this.options.onNewLeader?.(message.identity));
        return;
      case "error":
        this.report(message.message);
        return;
      case "request":
        this.safely(() => this.options.onRequest?.(message.method, message.status));
        return;
      case "closed":
        this.closing?.();
        return;
    }
  }

  private stepDown(reason: string): void {
    if (!this.announced) return;
    this.announced = false;
    if (this.leader === this.options.settings.identity) this.leader = null;
    this.safely(() => this.options.onStoppedLeading?.(reason));
  }

  private report(message: string): void {
    reportElectionError(this.options.onError, message);
  }

  private safely(callback: () => void): void {
    runElectionCallback(this.options.onError, callback);
  }
}

/** The worker's side: one LeaderElector on this thread's event loop, its state written to shared memory. */
export function runLeaderWorker(input: WorkerInput): void {
  const port = parentPort;
  if (!port) throw new Error("the election worker runs only as a worker thread");
  const view = new BigInt64Array(input.state);
  const send = (message: FromWorker) => port.postMessage(message);
  const clients = createKubeClients(loadKubeConfig(input.source), {
    onRequest: (info) => send({ type: "request", method: info.method, status: info.status }),
  });
  const elector = new LeaderElector(clients, {
    ...input.settings,
    nowMs: Date.now,
    onRenewed: (atMs) => Atomics.store(view, RENEWED_AT, BigInt(Math.floor(atMs))),
    onStartedLeading: () => {
      Atomics.store(view, LEADING, 1n);
      send({ type: "started" });
    },
    onStoppedLeading: (reason) => {
      Atomics.store(view, LEADING, 0n);
      send({ type: "stopped", reason });
    },
    onNewLeader: (identity) => send({ type: "leader", identity }),
    onError: (message) => send({ type: "error", message }),
  });
  port.on("message", (message: ToWorker) => {
    if (message.type !== "stop") return;
    void elector.stop({ release: message.release }).then(() => {
      send({ type: "closed" });
      port.close();
    });
  });
  elector.start();
}
