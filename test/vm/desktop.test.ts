/**
 * Desktop input in a real guest: QEMU's input devices driven through QMP `input-send-event`,
 * which is what QEMU's VNC server does with a VNC client's keys and pointer (noVNC → virtctl vnc
 * → the VMI's VNC). The packaged agent's desktop signal must show the input age resetting at
 * each injection and growing in between, and a guest with no input devices must report the
 * source absent. `npm run test:vm` runs it with the other VM scenarios (two more emulated boots).
 *
 * No key that types a character is sent (shift only) and the pointer moves without clicking:
 * nothing lands in the guest's console.
 */
import { debFile } from "../packaging/lib/artifacts.js";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, repoRoot } from "../support/process.js";
import { VmTestCollector, type TracedReport } from "./collector.js";
import { Guest, createOverlay } from "./guest.js";
import { requireHostTools, requireRoot } from "./host-tools.js";
import { ensureImage, type VmImage } from "./image.js";
import { renderSeed, writeSeedImage } from "./seed.js";
import { makeSshKey, type SshKeyPair } from "./ssh.js";

const NAMESPACE = "e2e-desktop";
const USER = "alice";
const POLICY = {
  "idle-timeout": "1h",
  "grace-period": "10m",
  "cpu-busy-threshold": "off",
  "user-cpu-threshold": "off",
  "network-threshold": "off",
  "disk-threshold": "off",
};
const SSH_UP_TIMEOUT_MS = 6 * 60_000;

let dir: string;
let image: VmImage;
let sshKey: SshKeyPair;
let collector: VmTestCollector;
const guests: Guest[] = [];

function deb(): string {
  return debFile();
}

async function bootGuest(name: string, mac: string, input: { machine?: string; extraArgs?: string[] }): Promise<Guest> {
  const disk = path.join(dir, `${name}.qcow2`);
  await createOverlay(image.disk, disk);
  const seedDir = path.join(dir, `seed-${name}`);
  await mkdir(seedDir, { recursive: true });
  const seedIso = await writeSeedImage(
    seedDir,
    renderSeed({
      instanceId: `${name}-0001`,
      hostname: name,
      user: { name: USER, sshPublicKey: sshKey.publicKey },
      agent: { collectorAddress: collector.addressFromGuest, namespace: NAMESPACE, name, token: collector.token(name) },
    }),
  );
  const guest = await Guest.boot({
    label: name,
    dir,
    image,
    disk,
    seedIso,
    mac,
    user: USER,
    sshKey: sshKey.privateKey,
    stopSocket: path.join(dir, `${name}.stop.qmp`),
    ...input,
  });
  guests.push(guest);
  await guest.waitForSsh(SSH_UP_TIMEOUT_MS);
  return guest;
}

/** The desktop part of the latest Report received at or after `sinceMs`. */
async function latestDesktop(
  name: string,
  sinceMs: number,
): Promise<{ report: TracedReport; state: string | undefined } | undefined> {
  const reports = await collector.reportsSince(name, sinceMs);
  const report = reports.at(-1);
  if (!report) return undefined;
  return { report, state: report.sources?.find((s) => s.source === "desktop")?.state };
}

const youngestInput = (report: TracedReport): number | undefined => {
  const ages = (report.desktop?.devices ?? [])
    .map((d) => d.inputAgeSeconds)
    .filter((age): age is number => age !== undefined);
  return ages.length > 0 ? Math.min(...ages) : undefined;
};

beforeAll(async () => {
  requireRoot();
  requireHostTools();
  image = await ensureImage({
    cacheDir: path.join(repoRoot, ".cache/vm"),
    deb: deb(),
    log: (line) => console.log(`test:vm desktop ${line}`),
  });
  dir = await mkdtemp(path.join(os.tmpdir(), "ws-vm-desktop-"));
  sshKey = await makeSshKey(dir);
  collector = await VmTestCollector.start({
    dir,
    namespace: NAMESPACE,
    policy: POLICY,
    reportInterval: "3s",
    // This file watches the desktop signal's input age sample by sample; an Active VM's input is
    // otherwise reported at the heartbeat (reports on change, docs/protocol.md), not at once.
    reportHeartbeat: "off",
    stopSocketFor: (name) => path.join(dir, `${name}.stop.qmp`),
  });
});

afterAll(async () => {
  for (const guest of guests) await guest.destroy();
  await collector?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.sequential("desktop input in a real guest", () => {
  it("keyboard and tablet input injected through QMP resets the desktop input age, which then grows", async () => {
    const guest = await bootGuest("desk1", "52:54:00:00:e2:11", {
      extraArgs: ["-device", "qemu-xhci", "-device", "usb-tablet"],
    });
    const since = Date.now();
    const present = await eventually(
      async () => {
        const latest = await latestDesktop("desk1", since);
        return latest?.state === "SOURCE_STATE_OK" && (latest.report.desktop?.devices?.length ?? 0) > 0
          ? latest.report
          : undefined;
      },
      120_000,
      "a report with the guest's input devices (the guest kernel needs evdev: CONFIG_INPUT_EVDEV)",
    );
    // The one run of this scenario (docs/signals/desktop.md) saw only the i8042 keyboard on
    // Debian's cloud kernel: neither the USB tablet nor the PS/2 mouse became an input device
    // there. The keyboard is what the ages below are read from; the pointer events are sent too.
    const kinds = (present.desktop?.devices ?? []).map((d) => d.kind);
    expect(kinds).toContain("INPUT_DEVICE_KIND_KEYBOARD");

    const qmp = await guest.qmp();
    const inject = async () => {
      await qmp.execute("input-send-event", {
        events: [
          { type: "key", data: { down: true, key: { type: "qcode", data: "shift" } } },
          { type: "key", data: { down: false, key: { type: "qcode", data: "shift" } } },
          { type: "abs", data: { axis: "x", value: 12_000 + Math.floor(Math.random() * 8_000) } },
          { type: "abs", data: { axis: "y", value: 12_000 } },
        ],
      });
      return Date.now();
    };
    const firstAt = await inject();
    const reset = await eventually(
      async () => {
        const latest = await latestDesktop("desk1", firstAt + 1_000);
        const age = latest && youngestInput(latest.report);
        return age !== undefined && age < 15 ? age : undefined;
      },
      120_000,
      "the desktop input age to reset after the injected input",
    );
    // Nothing injected: the age grows.
    const grown = await eventually(
      async () => {
        const latest = await latestDesktop("desk1", Date.now() - 3_000);
        const age = latest && youngestInput(latest.report);
        return age !== undefined && age > reset + 10 ? age : undefined;
      },
      120_000,
      "the desktop input age to grow without input",
    );
    const secondAt = await inject();
    const resetAgain = await eventually(
      async () => {
        const latest = await latestDesktop("desk1", secondAt + 1_000);
        const age = latest && youngestInput(latest.report);
        return age !== undefined && age < grown ? age : undefined;
      },
      120_000,
      "the desktop input age to reset again",
    );
    expect(resetAgain).toBeLessThan(grown);
    // The collector took it for use: the idle clock moved to the injected input.
    const view = await collector.vm("desk1");
    expect(view?.lastActivityAtMs).toBeGreaterThanOrEqual(secondAt - 20_000);
    expect(view?.activeSignals).toContain("desktop-input");
    await guest.destroy();
  });

  it("a guest without input devices reports the desktop source absent", async () => {
    await bootGuest("desk2", "52:54:00:00:e2:12", { machine: "q35,i8042=off" });
    const since = Date.now();
    const latest = await eventually(
      async () => {
        const found = await latestDesktop("desk2", since);
        return found?.state ? found : undefined;
      },
      120_000,
      "a report from the guest without input devices",
    );
    expect(latest.state).toBe("SOURCE_STATE_ABSENT");
    expect(latest.report.sources?.find((s) => s.source === "desktop")?.message).toMatch(
      /no input devices|no keyboard, mouse or tablet/,
    );
  });
});
