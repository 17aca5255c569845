// The I/O half of the GPU signal: how it runs nvidia-smi (cadence, cache, timeout, exit codes,
// a missing binary). A small shell script stands in for the nvidia-smi executable here to drive
// our process handling; the parsing of real nvidia-smi output is tested in gpu.test.ts.
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import {
  COMPUTE_APPS_QUERY_ARGS,
  createGpuSignal,
  GPU_QUERY_ARGS,
  type GpuSignalOptions,
} from "../../src/signals/gpu.js";
import type { SignalContext } from "../../src/signals/types.js";
import { loadUsers } from "../../src/users.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "gpu");
const UUID = "GPU-00000000-0000-0000-0000-000000000000";
const MIB = 1024n * 1024n;
const GONE_PID = 2147483646;

let dir: string;
let roots: Roots;
let scripts = 0;

/** Writes an executable standing in for nvidia-smi; every call appends its arguments to the returned log. */
async function fakeNvidiaSmi(body: string): Promise<{ command: string; calls: () => Promise<string[]> }> {
  scripts += 1;
  const command = path.join(dir, `nvidia-smi-${scripts}`);
  const log = `${command}.log`;
  await writeFile(command, `#!/bin/sh\necho "$*" >> '${log}'\n${body}\n`);
  await chmod(command, 0o755);
  const calls = async () => (await readFile(log, "utf8").catch(() => "")).split("\n").filter((line) => line !== "");
  return { command, calls };
}

const answering = (gpus: string, apps: string) =>
  `case "$1" in\n  --query-gpu=*) cat '${path.join(fixtures, gpus)}' ;;\n  --query-compute-apps=*) ${apps} ;;\nesac`;

async function context(
  clock = manualClock(),
  signal = new AbortController().signal,
  sys = roots.sys,
): Promise<SignalContext> {
  return { roots: { ...roots, sys }, clock, users: await loadUsers(defaultRoots), signal };
}

const options = (command: string, overrides: Partial<GpuSignalOptions> = {}): GpuSignalOptions => ({
  command,
  intervalMs: 15_000,
  timeoutMs: 30_000,
  ...overrides,
});

async function waitUntilGone(pid: number): Promise<boolean> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      process.kill(pid, 0);
    } catch {
      return true;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "ws-gpu-"));
  roots = { ...defaultRoots, sys: path.join(dir, "sys-without-gpu") };
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("GPU signal running nvidia-smi", () => {
  it("runs both queries without a shell and looks up each process's owner", async () => {
    const fake = await fakeNvidiaSmi(
      answering(
        "h100-load.gpus.csv",
        `printf '%s\\n' '${process.pid}, ${UUID}, python3, 1024' '${GONE_PID}, ${UUID}, gone, [N/A]'`,
      ),
    );
    const outcome = await createGpuSignal(options(fake.command)).collect(await context());
    expect(outcome).toEqual({
      state: "ok",
      value: {
        gpus: [
          {
            index: 0,
            uuid: UUID,
            name: "NVIDIA H100 80GB HBM3",
            utilizationRatio: 1,
            memoryUtilizationRatio: 0.11,
            memoryUsedBytes: 19818n * MIB,
            memoryTotalBytes: 81559n * MIB,
            migMode: "Disabled",
          },
        ],
        processes: [
          {
            pid: process.pid,
            gpuUuid: UUID,
            processName: "python3",
            usedMemoryBytes: 1024n * MIB,
            uid: process.getuid?.(),
            user: "root",
          },
          { pid: GONE_PID, gpuUuid: UUID, processName: "gone", uid: 0, user: "" },
        ],
        sampleAgeSeconds: 0,
      },
    });
    expect(await fake.calls()).toEqual([GPU_QUERY_ARGS.join(" "), COMPUTE_APPS_QUERY_ARGS.join(" ")]);
  });

  it("runs on its own cadence and serves the cached answer with its age in between", async () => {
    const fake = await fakeNvidiaSmi(
      answering("h200-mig-load.gpus.csv", `cat '${path.join(fixtures, "h200-mig-load.apps.csv")}'`),
    );
    const clock = manualClock();
    const ctx = await context(clock);
    const signal = createGpuSignal(options(fake.command, { intervalMs: 30_000 }));

    const first = await signal.collect(ctx);
    expect(first.state).toBe("ok");
    expect(await fake.calls()).toHaveLength(2);

    clock.advance(12_000);
    const cached = await signal.collect(ctx);
    expect(cached.state === "ok" && cached.value.sampleAgeSeconds).toBe(12);
    expect(cached.state === "ok" && cached.value.processes?.map((process) => process.pid)).toEqual([
      12249, 12250, 12267,
    ]);
    expect(await fake.calls()).toHaveLength(2);

    clock.advance(18_000);
    const fresh = await signal.collect(ctx);
    expect(fresh.state === "ok" && fresh.value.sampleAgeSeconds).toBe(0);
    expect(await fake.calls()).toHaveLength(4);
  });

  it("never runs twice at once", async () => {
    const fake = await fakeNvidiaSmi(`sleep 1\n${answering("h100-idle.gpus.csv", "true")}`);
    const ctx = await context();
    const signal = createGpuSignal(options(fake.command, { intervalMs: 1 }));
    const outcomes = await Promise.all([signal.collect(ctx), signal.collect(ctx), signal.collect(ctx)]);
    expect(outcomes.map((outcome) => outcome.state)).toEqual(["ok", "ok", "ok"]);
    expect(await fake.calls()).toEqual([GPU_QUERY_ARGS.join(" "), COMPUTE_APPS_QUERY_ARGS.join(" ")]);
  });

  it("kills a hung nvidia-smi at the timeout and reports failed", async () => {
    const pidFile = path.join(dir, "hung.pid");
    const fake = await fakeNvidiaSmi(`echo $$ > '${pidFile}'\nexec sleep 600`);
    const outcome = await createGpuSignal(options(fake.command, { timeoutMs: 500 })).collect(await context());
    expect(outcome).toEqual({ state: "failed", message: "nvidia-smi did not answer within 0.5s and was killed" });
    const pid = Number(await readFile(pidFile, "utf8"));
    expect(await waitUntilGone(pid)).toBe(true);
  });

  it("stops waiting when the sample's budget is spent, and answers later from the same run", async () => {
    const fake = await fakeNvidiaSmi(`sleep 1\n${answering("h100-idle.gpus.csv", "true")}`);
    const ctx = await context();
    const signal = createGpuSignal(options(fake.command));
    const budget = new AbortController();
    setTimeout(() => budget.abort(), 100);
    expect(await signal.collect({ ...ctx, signal: budget.signal })).toEqual({
      state: "failed",
      message: "nvidia-smi has not answered yet",
    });
    const later = await signal.collect(ctx);
    expect(later.state).toBe("ok");
    expect(await fake.calls()).toHaveLength(2);
  });

  it("no nvidia-smi at all is absent", async () => {
    for (const command of [path.join(dir, "no", "such", "nvidia-smi"), "ws-test-no-such-nvidia-smi"]) {
      const outcome = await createGpuSignal(options(command)).collect(await context());
      expect(outcome.state).toBe("absent");
      expect(outcome.message).toMatch(/^no nvidia-smi \(.*ENOENT/);
    }
  });

  it("an nvidia-smi that cannot be executed is failed", async () => {
    const command = path.join(dir, "not-executable");
    await writeFile(command, "#!/bin/sh\n", { mode: 0o644 });
    const outcome = await createGpuSignal(options(command)).collect(await context());
    expect(outcome.state).toBe("failed");
    expect(outcome.message).toMatch(/could not start: .*EACCES/);
  });

  it('"No devices were found" is absent without an NVIDIA GPU on the PCI bus, failed with one', async () => {
    const fake = await fakeNvidiaSmi(`echo "No devices were found"\nexit 6`);
    const noGpu = await createGpuSignal(options(fake.command)).collect(await context());
    expect(noGpu).toEqual({
      state: "absent",
      message: "nvidia-smi: No devices were found (no NVIDIA GPU on the PCI bus)",
    });

    const sys = path.join(dir, "sys-with-gpu");
    const device = path.join(sys, "bus", "pci", "devices", "0000:01:00.0");
    await mkdir(device, { recursive: true });
    await writeFile(path.join(device, "vendor"), "0x10de\n");
    await writeFile(path.join(device, "class"), "0x030200\n");
    const broken = await createGpuSignal(options(fake.command)).collect(
      await context(manualClock(), new AbortController().signal, sys),
    );
    expect(broken).toEqual({
      state: "failed",
      message: "nvidia-smi: No devices were found, yet an NVIDIA GPU is on the PCI bus at 0000:01:00.0",
    });
  });

  it("other exit codes and unreadable answers are failed with the reason", async () => {
    const mismatch = await fakeNvidiaSmi(
      `echo "Failed to initialize NVML: Driver/library version mismatch" >&2\nexit 18`,
    );
    expect(await createGpuSignal(options(mismatch.command)).collect(await context())).toEqual({
      state: "failed",
      message: "nvidia-smi exited with code 18: Failed to initialize NVML: Driver/library version mismatch",
    });

    const garbage = await fakeNvidiaSmi(`echo "garbage"`);
    const unreadable = await createGpuSignal(options(garbage.command)).collect(await context());
    expect(unreadable).toEqual({
      state: "failed",
      message: 'nvidia-smi --query-gpu: GPU line 1 has 1 fields, expected 8: "garbage"',
    });

    const appsFail = await fakeNvidiaSmi(
      answering(
        "h100-idle.gpus.csv",
        `echo "Unable to determine the device handle for GPU0000:01:00.0: Unknown Error"; exit 15`,
      ),
    );
    const partial = await createGpuSignal(options(appsFail.command)).collect(await context());
    expect(partial.state).toBe("failed");
    expect(partial.message).toBe(
      "GPU processes unknown: nvidia-smi exited with code 15: Unable to determine the device handle for GPU0000:01:00.0: Unknown Error",
    );
    expect(partial.state === "failed" && partial.value?.gpus).toHaveLength(1);
  });

  it("rejects a configuration without a positive interval or timeout", () => {
    expect(() => createGpuSignal(options("nvidia-smi", { timeoutMs: 0 }))).toThrow(/must be positive/);
  });
});
