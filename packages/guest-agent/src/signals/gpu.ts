/**
 * GPU: per-GPU utilization and memory, and the compute processes on them, from
 * nvidia-smi. nvidia-smi takes from tens of milliseconds to many seconds (driver
 * initialisation without persistence mode, a wedged GPU), so it runs on its own
 * cadence, one run at a time, with a hard timeout; Reports in between get the
 * cached answer and its age. No nvidia-smi, or no GPU behind it, is "absent".
 * Parsing is in gpu-parse.ts, the process runner in run-bounded.ts.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GpuSignalSchema } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import {
  type ComputeApp,
  type GpuInit,
  type GpuProcessInit,
  interpretRun,
  parseComputeAppsCsv,
  parseGpuCsv,
} from "./gpu-parse.js";
import { parseStatusUid } from "./proc-pid.js";
import { runBounded } from "./run-bounded.js";
import { absent, errorMessage, failed, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";

export type GpuSignalValue = MessageInitShape<typeof GpuSignalSchema>;

export interface GpuSignalOptions {
  /** The nvidia-smi executable: a name looked up in PATH, or a path. */
  command: string;
  /** How often nvidia-smi runs at most; Reports in between get the cached answer. */
  intervalMs: number;
  /** Each nvidia-smi run is killed (SIGKILL) after this long. */
  timeoutMs: number;
}

export const DEFAULT_GPU_OPTIONS: GpuSignalOptions = { command: "nvidia-smi", intervalMs: 15_000, timeoutMs: 10_000 };

export const GPU_QUERY_ARGS = [
  "--query-gpu=index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,mig.mode.current",
  "--format=csv,noheader,nounits",
];
export const COMPUTE_APPS_QUERY_ARGS = [
  "--query-compute-apps=pid,gpu_uuid,process_name,used_memory",
  "--format=csv,noheader,nounits",
];

/** nvidia-smi's answer for a GPU list is a few hundred bytes per GPU; anything near this is not it. */
const MAX_OUTPUT_BYTES = 1024 * 1024;

/** PCI vendor id of NVIDIA, and the PCI class of display controllers (VGA 0x0300, 3D 0x0302). */
const NVIDIA_VENDOR = "0x10de";
const DISPLAY_CLASS_PREFIX = "0x03";

/** The PCI addresses of NVIDIA display controllers, from <sys>/bus/pci/devices/*\/{vendor,class}. */
export async function nvidiaPciDevices(roots: Roots): Promise<string[]> {
  const devicesDir = under(roots.sys, "bus", "pci", "devices");
  let addresses: string[];
  try {
    addresses = await readdir(devicesDir);
  } catch {
    return [];
  }
  const found = await Promise.all(
    addresses.map(async (address) => {
      try {
        const [vendor, pciClass] = await Promise.all(
          ["vendor", "class"].map((file) => readFile(path.join(devicesDir, address, file), "utf8")),
        );
        return vendor?.trim() === NVIDIA_VENDOR && pciClass?.trim().startsWith(DISPLAY_CLASS_PREFIX)
          ? address
          : undefined;
      } catch {
        return undefined;
      }
    }),
  );
  return found.filter((address): address is string => address !== undefined);
}

// --- running nvidia-smi (I/O) ------------------------------------------------------

/** The uid that owns a process, or undefined when it has gone or cannot be read. */
async function processOwner(roots: Roots, pid: number): Promise<number | undefined> {
  try {
    return parseStatusUid(await readFile(under(roots.proc, String(pid), "status"), "utf8"));
  } catch {
    return undefined;
  }
}

/** An nvidia-smi answer as cached; its age is added when a Report asks. */
type GpuAnswer = SignalOutcome<{ gpus: GpuInit[]; processes: GpuProcessInit[] }>;

/** One refresh: the GPU query, then (with GPUs) the process query, one after the other. */
async function queryNvidiaSmi(
  options: GpuSignalOptions,
  roots: Roots,
  users: Users,
  onChild: (gone: Promise<void>) => void,
): Promise<GpuAnswer> {
  const run = async (args: string[]) => {
    const running = runBounded(options.command, args, options.timeoutMs, MAX_OUTPUT_BYTES);
    onChild(running.gone);
    return interpretRun(await running.result);
  };
  const gpuRun = await run(GPU_QUERY_ARGS);
  if (gpuRun.kind === "not-installed") return absent(gpuRun.message);
  if (gpuRun.kind === "failed") return failed(gpuRun.message);
  if (gpuRun.kind === "no-gpu") {
    // A VM from a GPU image that was given no GPU looks like this; so does a GPU the driver cannot use, which is a fault.
    const devices = await nvidiaPciDevices(roots);
    if (devices.length === 0) return absent(`${gpuRun.message} (no NVIDIA GPU on the PCI bus)`);
    return failed(`${gpuRun.message}, yet an NVIDIA GPU is on the PCI bus at ${devices.join(", ")}`);
  }
  let gpus: GpuInit[];
  try {
    gpus = parseGpuCsv(gpuRun.stdout);
  } catch (error) {
    return failed(`nvidia-smi --query-gpu: ${errorMessage(error)}`);
  }
  if (gpus.length === 0) return absent("nvidia-smi lists no GPU");

  const appsRun = await run(COMPUTE_APPS_QUERY_ARGS);
  if (appsRun.kind !== "answered")
    return { state: "failed", message: `GPU processes unknown: ${appsRun.message}`, value: { gpus, processes: [] } };
  let apps: ComputeApp[];
  try {
    apps = parseComputeAppsCsv(appsRun.stdout);
  } catch (error) {
    return {
      state: "failed",
      message: `nvidia-smi --query-compute-apps: ${errorMessage(error)}`,
      value: { gpus, processes: [] },
    };
  }
  const processes = await Promise.all(
    apps.map(async (app): Promise<GpuProcessInit> => {
      const uid = await processOwner(roots, app.pid);
      return uid === undefined
        ? { ...app, uid: 0, user: "" }
        : { ...app, uid, user: users.byUid(uid)?.name ?? String(uid) };
    }),
  );
  return ok({ gpus, processes });
}

/** Resolves when the signal aborts; the returned cleanup removes the listener. */
function whenAborted(signal: AbortSignal): { aborted: Promise<void>; cleanup: () => void } {
  let onAbort = (): void => {};
  const aborted = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  return { aborted, cleanup: () => signal.removeEventListener("abort", onAbort) };
}

export function createGpuSignal(options: GpuSignalOptions = DEFAULT_GPU_OPTIONS): Signal<GpuSignalValue> {
  if (!(options.intervalMs > 0) || !(options.timeoutMs > 0))
    throw new Error(`GPU intervalMs and timeoutMs must be positive (got ${options.intervalMs}, ${options.timeoutMs})`);
  let cached: { atMs: number; answer: GpuAnswer } | undefined;
  /** Settles when the refresh in progress has an answer. */
  let answering: Promise<void> | undefined;
  /** Set from the start of a refresh until its last nvidia-smi process is gone: no second run meanwhile. */
  let busy = false;

  const refresh = (ctx: SignalContext): void => {
    busy = true;
    const children: Array<Promise<void>> = [];
    answering = queryNvidiaSmi(options, ctx.roots, ctx.users, (gone) => children.push(gone))
      .catch((error: unknown): GpuAnswer => failed(`nvidia-smi: ${errorMessage(error)}`))
      .then((answer) => {
        cached = { atMs: ctx.clock.monotonicMs(), answer };
      })
      .finally(() => {
        answering = undefined;
        void Promise.all(children).then(() => (busy = false));
      });
  };

  return {
    name: "gpu",
    async collect(ctx: SignalContext): Promise<SignalOutcome<GpuSignalValue>> {
      const due = cached === undefined || ctx.clock.monotonicMs() - cached.atMs >= options.intervalMs;
      if (due && !busy) refresh(ctx);
      if (answering !== undefined) {
        const abort = whenAborted(ctx.signal);
        await Promise.race([answering, abort.aborted]);
        abort.cleanup();
      }
      if (cached === undefined) return failed("nvidia-smi has not answered yet");
      const sampleAgeSeconds = Math.max(0, (ctx.clock.monotonicMs() - cached.atMs) / 1000);
      const { answer } = cached;
      if (answer.state === "ok") return ok({ ...answer.value, sampleAgeSeconds }, answer.message);
      if (answer.state === "failed" && answer.value !== undefined)
        return { state: "failed", message: answer.message, value: { ...answer.value, sampleAgeSeconds } };
      return answer.state === "absent" ? absent(answer.message) : failed(answer.message);
    },
  };
}
