/**
 * Desktop input: how long since someone used the keyboard, mouse or tablet of the guest — what
 * a VNC or SPICE client's input becomes (QEMU turns it into PS/2, USB-tablet or virtio-input
 * events). docs/signals/desktop.md says why evdev was chosen over /proc/interrupts, logind's
 * IdleHint and X11's screensaver idle time.
 *
 * The agent keeps every keyboard, mouse and tablet node under /dev/input open (an evdev reader
 * only sees events that happen while it is open) and drains it at each sample: the events are
 * read and thrown away; only the time of the last one is kept. Nothing typed is recorded.
 * The descriptors are non-blocking, so a read with nothing queued returns EAGAIN at once and
 * never holds a thread of libuv's pool (the lease socket and the other signals share it).
 *
 * A graphical session that logind reports locked makes the whole source "locked": input then
 * wakes a screensaver or types a password, and the collector does not count it as use.
 */
import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { open, readdir, readFile, type FileHandle } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DesktopSignalSchema, InputDeviceKind } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import {
  boundedInputAgeMs,
  classifyInputDevice,
  deviceMajor,
  INPUT_EVENT_BYTES,
  INPUT_MAJOR,
  lastInputEventMs,
  parseCapabilityBitmap,
  parseSessionProperties,
} from "./desktop-parse.js";
import { absent, errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";

export type DesktopSignalValue = MessageInitShape<typeof DesktopSignalSchema>;

/** Opened without following a link, non-blocking, never becoming our controlling terminal. */
const DEVICE_OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW | constants.O_NOCTTY;
/** One read takes up to this many events; a sample drains at most MAX_READS of them. */
const EVENTS_PER_READ = 256;
const MAX_READS = 16;
const MAX_DEVICES = 32;
const MAX_NAME = 80;
const LOGINCTL = "/usr/bin/loginctl";
const LOGINCTL_TIMEOUT_MS = 2_000;

export interface OpenDevice {
  node: string;
  name: string;
  kind: InputDeviceKind;
  handle: FileHandle;
  lastInputMonoMs?: number;
}

/** Reads the graphical sessions' lock state; undefined when there is no graphical session. */
export type LockReader = (roots: Roots, signal: AbortSignal) => Promise<boolean | undefined>;

export interface DesktopOptions {
  lockReader?: LockReader;
  /** How a node is opened (default openInputDevice); tests hand in FIFOs, which carry events the same way. */
  openDevice?: (roots: Roots, node: string) => Promise<OpenDevice | undefined>;
}

export function createDesktopSignal(
  options: DesktopOptions = {},
): Signal<DesktopSignalValue> & { close(): Promise<void> } {
  const devices = new Map<string, OpenDevice>();
  /** Nodes not opened, and why ("" for a device that is not a person's input): not retried until they go away. */
  const refused = new Map<string, string>();
  let previousReadMonoMs: number | undefined;
  const readLock = options.lockReader ?? readLogindLock;
  const openDevice = options.openDevice ?? openInputDevice;
  const closeAll = async () => {
    for (const device of devices.values()) await device.handle.close().catch(() => undefined);
    devices.clear();
  };
  return {
    name: "desktop",
    close: closeAll,
    async collect(ctx: SignalContext): Promise<SignalOutcome<DesktopSignalValue>> {
      const dir = under(ctx.roots.dev, "input");
      let nodes: string[];
      try {
        nodes = (await readdir(dir))
          .filter((name) => /^event\d+$/.test(name))
          .sort(byEventNumber)
          .slice(0, MAX_DEVICES);
      } catch (error) {
        await closeAll();
        if ((error as NodeJS.ErrnoException).code === "ENOENT")
          return absent(`${dir} does not exist: the guest has no input devices`);
        return { state: "failed", message: `${dir}: ${errorMessage(error)}` };
      }
      const notes: string[] = [];
      // Devices that went away; a node that comes back is looked at afresh.
      for (const [node, device] of devices) {
        if (!nodes.includes(node)) {
          await device.handle.close().catch(() => undefined);
          devices.delete(node);
        }
      }
      for (const node of refused.keys()) if (!nodes.includes(node)) refused.delete(node);
      for (const node of nodes) {
        if (devices.has(node) || refused.has(node)) continue;
        const opened = await openDevice(ctx.roots, node).catch((error: unknown) => errorMessage(error));
        if (typeof opened === "string") {
          notes.push(`${node}: ${opened}`);
          refused.set(node, opened);
        } else if (opened) {
          devices.set(node, opened);
        } else {
          refused.set(node, "");
        }
      }
      const nowMono = ctx.clock.monotonicMs();
      const nowWall = ctx.clock.nowMs();
      const sincePrevious = previousReadMonoMs === undefined ? 0 : nowMono - previousReadMonoMs;
      for (const [node, device] of devices) {
        const drained = await drainEvents(device.handle);
        if ("error" in drained) {
          // ENODEV: unplugged between the listing and the read.
          notes.push(`${node}: ${drained.error}`);
          await device.handle.close().catch(() => undefined);
          devices.delete(node);
          continue;
        }
        if (drained.events > 0)
          device.lastInputMonoMs = nowMono - boundedInputAgeMs(drained.lastEventWallMs, nowWall, sincePrevious);
      }
      previousReadMonoMs = nowMono;
      if (devices.size === 0) {
        const named = [...refused].filter(([, why]) => why !== "");
        const reason = named.length > 0 ? ` (${named.map(([node, why]) => `${node}: ${why}`).join("; ")})` : "";
        return absent(`no keyboard, mouse or tablet under ${dir}${reason}`);
      }
      let locked = false;
      try {
        locked = (await readLock(ctx.roots, ctx.signal)) ?? false;
      } catch (error) {
        notes.push(`lock state unknown: ${errorMessage(error)}`);
      }
      const value: DesktopSignalValue = {
        locked,
        devices: [...devices.values()].map((device) => ({
          node: device.node,
          name: device.name,
          kind: device.kind,
          ...(device.lastInputMonoMs === undefined
            ? {}
            : { inputAgeSeconds: Math.max(0, (nowMono - device.lastInputMonoMs) / 1000) }),
        })),
      };
      return notes.length > 0 ? ok(value, notes.join("; ")) : ok(value);
    },
  };
}

/**
 * Opens /dev/input/NODE when sysfs says it is a keyboard, mouse or tablet: no link followed,
 * non-blocking, and the descriptor's own fstat must show an input character device.
 * Resolves undefined for devices that are not a person's input (power button, speaker).
 */
export async function openInputDevice(roots: Roots, node: string): Promise<OpenDevice | undefined> {
  const sysDevice = under(roots.sys, "class", "input", node, "device");
  const capability = (name: string) =>
    readFile(under(sysDevice, "capabilities", name), "utf8").then(parseCapabilityBitmap, () => new Set<number>());
  const kind = classifyInputDevice({
    ev: await capability("ev"),
    key: await capability("key"),
    rel: await capability("rel"),
    abs: await capability("abs"),
  });
  if (kind === undefined) return undefined;
  const name = (await readFile(under(sysDevice, "name"), "utf8").catch(() => ""))
    .trim()
    .replace(/[^\x20-\x7e]/g, "?")
    .slice(0, MAX_NAME);
  const path = under(roots.dev, "input", node);
  const handle = await open(path, DEVICE_OPEN_FLAGS);
  try {
    const info = await handle.stat();
    if (!info.isCharacterDevice() || deviceMajor(info.rdev) !== INPUT_MAJOR)
      throw new Error(
        `not an input device (${info.isCharacterDevice() ? `major ${deviceMajor(info.rdev)}` : "not a character device"})`,
      );
    return { node, name, kind, handle };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

/**
 * Reads everything queued on a non-blocking descriptor and keeps only the last event's time.
 * EAGAIN ends the drain (nothing more queued); it never waits.
 */
export async function drainEvents(
  handle: FileHandle,
): Promise<{ events: number; lastEventWallMs: number | undefined } | { error: string }> {
  const buffer = Buffer.alloc(INPUT_EVENT_BYTES * EVENTS_PER_READ);
  let events = 0;
  let lastEventWallMs: number | undefined;
  for (let reads = 0; reads < MAX_READS; reads++) {
    let bytesRead: number;
    try {
      ({ bytesRead } = await handle.read(buffer, 0, buffer.length, null));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EAGAIN") break;
      return { error: errorMessage(error) };
    }
    if (bytesRead === 0) break;
    const whole = bytesRead - (bytesRead % INPUT_EVENT_BYTES);
    events += whole / INPUT_EVENT_BYTES;
    lastEventWallMs = lastInputEventMs(buffer, whole) ?? lastEventWallMs;
    if (bytesRead < buffer.length) break;
  }
  // Overwrite what was read: no event outlives the call, even in a heap snapshot.
  buffer.fill(0);
  return { events, lastEventWallMs };
}

/**
 * logind's LockedHint for the graphical sessions it lists in /run/systemd/sessions (files
 * root writes). Asked through loginctl, only when such a session exists: a server image with
 * no desktop never spawns anything here. All graphical sessions locked → locked.
 */
export async function readLogindLock(roots: Roots, signal: AbortSignal): Promise<boolean | undefined> {
  const dir = under(roots.run, "systemd", "sessions");
  const names = await readdir(dir).catch(() => [] as string[]);
  const graphical: string[] = [];
  for (const name of names) {
    if (!/^[A-Za-z0-9]+$/.test(name)) continue;
    const text = await readFile(under(dir, name), "utf8").catch(() => "");
    const properties = parseSessionProperties(text);
    if (["x11", "wayland", "mir"].includes(properties.TYPE ?? "")) graphical.push(name);
  }
  if (graphical.length === 0) return undefined;
  const answers = await Promise.all(
    graphical.map(
      (id) =>
        new Promise<string>((resolve, reject) =>
          execFile(
            LOGINCTL,
            ["show-session", id, "--property=LockedHint"],
            { timeout: LOGINCTL_TIMEOUT_MS, signal, maxBuffer: 4096 },
            (error, stdout) =>
              error ? reject(new Error(`loginctl show-session: ${errorMessage(error)}`)) : resolve(stdout),
          ),
        ),
    ),
  );
  return answers.every((answer) => parseSessionProperties(answer).LockedHint === "yes");
}

function byEventNumber(a: string, b: string): number {
  return Number(a.slice(5)) - Number(b.slice(5));
}
