/**
 * The desktop signal's I/O part on a built tree: which nodes it opens, what it refuses, and that
 * draining a descriptor with nothing queued returns at once (EAGAIN) instead of holding one of
 * libuv's pool threads. The development machine has no input devices and no /dev/uinput, so a
 * real evdev device is exercised only by the real-VM test (test/vm, QMP input-send-event).
 */
import { execFileSync } from "node:child_process";
import { constants } from "node:fs";
import { cp, mkdir, mkdtemp, open, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pty from "node-pty";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InputDeviceKind } from "@ws/protocol";
import { manualClock } from "../../src/clock.js";
import { defaultRoots, type Roots } from "../../src/roots.js";
import { INPUT_EVENT_BYTES } from "../../src/signals/desktop-parse.js";
import { createDesktopSignal, drainEvents, readLogindLock } from "../../src/signals/desktop.js";
import type { SignalContext } from "../../src/signals/types.js";
import { usersFrom } from "../../src/users.js";

let root: string;
let roots: Roots;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "ws16-desktop-"));
  roots = { ...defaultRoots, dev: path.join(root, "dev"), sys: path.join(root, "sys"), run: path.join(root, "run") };
  await cp(new URL("../fixtures/desktop/", import.meta.url), path.join(roots.sys, "class/input"), { recursive: true });
  await mkdir(path.join(roots.dev, "input"), { recursive: true });
  // event0: the power button, not a person's input: never opened.
  await writeFile(path.join(roots.dev, "input/event0"), "");
  // event1: the keyboard's name, but a regular file planted there.
  await writeFile(path.join(roots.dev, "input/event1"), "not a device");
  // event2: the mouse's name, a symbolic link.
  await symlink("/dev/null", path.join(roots.dev, "input/event2"));
  // event3: the tablet's name, a real input character device (13:67) with no device behind it.
  execFileSync("mknod", [path.join(roots.dev, "input/event3"), "c", "13", "67"]);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const context = (r: Roots): SignalContext => ({
  roots: r,
  clock: manualClock(),
  users: usersFrom([]),
  signal: new AbortController().signal,
});

describe("desktop signal", () => {
  it("is absent on a guest without /dev/input", async () => {
    const outcome = await createDesktopSignal().collect(context({ ...roots, dev: path.join(root, "nothing") }));
    expect(outcome).toEqual({
      state: "absent",
      message: `${path.join(root, "nothing", "input")} does not exist: the guest has no input devices`,
    });
  });

  it("opens only keyboards, mice and tablets, and refuses planted files, links and devices that are not there", async () => {
    const signal = createDesktopSignal({ lockReader: async () => undefined });
    const outcome = await signal.collect(context(roots));
    expect(outcome.state).toBe("absent");
    const message = outcome.state === "absent" ? outcome.message : "";
    expect(message).toMatch(/no keyboard, mouse or tablet/);
    expect(message).toMatch(/event1: not an input device \(not a character device\)/);
    expect(message).toMatch(/event2: ELOOP/);
    expect(message).toMatch(/event3: ENXIO/);
    expect(message).not.toMatch(/event0/);
    await signal.close();
  });

  it("drains a non-blocking character device with nothing queued at once (EAGAIN), many times over", async () => {
    const terminal = pty.spawn("/bin/sleep", ["30"], {});
    try {
      const ptsName = (terminal as unknown as { ptsName?: string }).ptsName;
      expect(ptsName, "node-pty gives the slave side's name").toMatch(/^\/dev\/pts\/\d+$/);
      const handle = await open(ptsName!, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
      try {
        // Ten times the four pool threads: a blocking read would never let these all resolve.
        const results = await Promise.all(Array.from({ length: 40 }, () => drainEvents(handle)));
        expect(results.every((result) => "events" in result && result.events === 0)).toBe(true);
      } finally {
        await handle.close();
      }
    } finally {
      terminal.kill();
    }
  });

  it("keeps only the last event's time from what is queued, and finds nothing more on the next drain", async () => {
    const fifo = path.join(root, "events.fifo");
    execFileSync("mkfifo", [fifo]);
    // O_RDWR: the FIFO has a writer for as long as it is open, so empty reads are EAGAIN, not EOF.
    const handle = await open(fifo, constants.O_RDWR | constants.O_NONBLOCK);
    try {
      const events = Buffer.alloc(2 * INPUT_EVENT_BYTES);
      events.writeBigInt64LE(1_764_000_000n, 0);
      events.writeUInt16LE(0x01, 16);
      events.writeBigInt64LE(1_764_000_002n, INPUT_EVENT_BYTES);
      events.writeBigInt64LE(500_000n, INPUT_EVENT_BYTES + 8);
      await handle.write(events);
      expect(await drainEvents(handle)).toEqual({ events: 2, lastEventWallMs: 1_764_000_002_500 });
      expect(await drainEvents(handle)).toEqual({ events: 0, lastEventWallMs: undefined });
    } finally {
      await handle.close();
    }
  });

  it("asks logind about locks only when it lists a graphical session", async () => {
    const run = path.join(root, "run");
    const never = new AbortController().signal;
    // No logind state at all, or only text sessions: nothing is spawned, no lock state.
    expect(await readLogindLock({ ...roots, run }, never)).toBeUndefined();
    await mkdir(path.join(run, "systemd/sessions"), { recursive: true });
    await writeFile(path.join(run, "systemd/sessions/3"), "UID=1000\nUSER=alice\nTYPE=tty\n");
    expect(await readLogindLock({ ...roots, run }, never)).toBeUndefined();
    // A graphical session: loginctl is asked. This machine runs no logind, so it answers with an
    // error, which the signal reports as "lock state unknown" instead of guessing.
    await writeFile(path.join(run, "systemd/sessions/c1"), "UID=1000\nUSER=alice\nTYPE=x11\nACTIVE=1\n");
    await expect(readLogindLock({ ...roots, run }, never)).rejects.toThrow(/loginctl show-session/);
  });

  it("keeps each device's last input as an age that resets on events and grows without them; a device that goes away is dropped", async () => {
    const dev = path.join(root, "fifo-dev");
    await mkdir(path.join(dev, "input"), { recursive: true });
    const fifo = path.join(dev, "input/event7");
    execFileSync("mkfifo", [fifo]);
    const writer = await open(fifo, constants.O_RDWR | constants.O_NONBLOCK);
    const clock = manualClock(1_764_000_000_000);
    const signal = createDesktopSignal({
      lockReader: async () => false,
      // The real opener insists on an input character device; a FIFO carries the same bytes.
      openDevice: async (_roots, node) => ({
        node,
        name: "test tablet",
        kind: InputDeviceKind.TABLET,
        handle: await open(path.join(dev, "input", node), constants.O_RDONLY | constants.O_NONBLOCK),
      }),
    });
    const ctx: SignalContext = {
      roots: { ...roots, dev },
      clock,
      users: usersFrom([]),
      signal: new AbortController().signal,
    };
    const ageOf = async () => {
      const outcome = await signal.collect(ctx);
      if (outcome.state !== "ok") throw new Error(`desktop ${outcome.state}: ${outcome.message}`);
      return outcome.value.devices?.[0]?.inputAgeSeconds;
    };
    const eventAt = (wallMs: number) => {
      const buffer = Buffer.alloc(INPUT_EVENT_BYTES);
      buffer.writeBigInt64LE(BigInt(Math.floor(wallMs / 1000)), 0);
      buffer.writeBigInt64LE(BigInt((wallMs % 1000) * 1000), 8);
      buffer.writeUInt16LE(0x03, 16); // EV_ABS
      return buffer;
    };
    try {
      expect(await ageOf()).toBeUndefined(); // opened: no input seen yet
      clock.advance(15_000);
      await writer.write(eventAt(clock.nowMs() - 4_000));
      expect(await ageOf()).toBe(4);
      clock.advance(15_000);
      expect(await ageOf()).toBe(19);
      // An event stamped long before the previous read (a clock step) is bounded by that read.
      clock.advance(15_000);
      await writer.write(eventAt(clock.nowMs() - 3_600_000));
      expect(await ageOf()).toBe(15);
      await rm(fifo);
      expect((await signal.collect(ctx)).state).toBe("absent");
    } finally {
      await writer.close();
      await signal.close();
    }
  });
});
