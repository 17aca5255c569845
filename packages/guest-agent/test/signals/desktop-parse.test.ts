import { readFileSync } from "node:fs";
import { InputDeviceKind } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import {
  boundedInputAgeMs,
  classifyInputDevice,
  deviceMajor,
  INPUT_EVENT_BYTES,
  lastInputEventMs,
  parseCapabilityBitmap,
  parseSessionProperties,
} from "../../src/signals/desktop-parse.js";

const caps = (node: string) => {
  const read = (name: string) =>
    parseCapabilityBitmap(
      readFileSync(new URL(`../fixtures/desktop/${node}/device/capabilities/${name}`, import.meta.url), "utf8"),
    );
  return { ev: read("ev"), key: read("key"), rel: read("rel"), abs: read("abs") };
};

/** One struct input_event (64-bit layout) at a wall time. */
function event(wallMs: number, type: number, code = 0, value = 0): Buffer {
  const buffer = Buffer.alloc(INPUT_EVENT_BYTES);
  buffer.writeBigInt64LE(BigInt(Math.floor(wallMs / 1000)), 0);
  buffer.writeBigInt64LE(BigInt(Math.round((wallMs % 1000) * 1000)), 8);
  buffer.writeUInt16LE(type, 16);
  buffer.writeUInt16LE(code, 18);
  buffer.writeInt32LE(value, 20);
  return buffer;
}

describe("desktop parsers", () => {
  it("reads capability bitmaps word by word, most significant first", () => {
    expect([...parseCapabilityBitmap("1f0000 0 0 0 0")].sort((a, b) => a - b)).toEqual([
      0x110, 0x111, 0x112, 0x113, 0x114,
    ]);
    expect([...parseCapabilityBitmap("143\n")].sort((a, b) => a - b)).toEqual([0, 1, 6, 8]);
    expect(parseCapabilityBitmap("zz 1").size).toBe(0);
    expect(parseCapabilityBitmap("").size).toBe(0);
  });

  it("tells a keyboard, a mouse and a tablet from a power button and a speaker", () => {
    expect(classifyInputDevice(caps("event0"))).toBeUndefined();
    expect(classifyInputDevice(caps("event1"))).toBe(InputDeviceKind.KEYBOARD);
    expect(classifyInputDevice(caps("event2"))).toBe(InputDeviceKind.MOUSE);
    expect(classifyInputDevice(caps("event3"))).toBe(InputDeviceKind.TABLET);
    expect(classifyInputDevice(caps("event4"))).toBeUndefined();
  });

  it("keeps only the time of the last input event, skipping LED and sound events and partial ones", () => {
    const t = 1_764_000_000_123;
    const buffer = Buffer.concat([
      event(t, 0x01, 30, 1),
      event(t + 5, 0x00),
      event(t + 900, 0x11, 0, 1),
      event(t + 950, 0x12),
    ]);
    expect(lastInputEventMs(buffer)).toBeCloseTo(t + 5, 3);
    expect(lastInputEventMs(Buffer.concat([buffer, Buffer.alloc(10)]))).toBeCloseTo(t + 5, 3);
    expect(lastInputEventMs(Buffer.alloc(0))).toBeUndefined();
  });

  it("bounds an age by the time since the previous read: a clock step cannot make it up", () => {
    expect(boundedInputAgeMs(1000, 4000, 15_000)).toBe(3000);
    expect(boundedInputAgeMs(0, 1_000_000, 15_000)).toBe(15_000); // clock stepped forward
    expect(boundedInputAgeMs(9_000, 4000, 15_000)).toBe(0); // event stamped in the future
    expect(boundedInputAgeMs(undefined, 4000, 15_000)).toBe(15_000);
  });

  it("decodes device numbers and loginctl properties", () => {
    expect(deviceMajor(13 * 256 + 67)).toBe(13);
    expect(deviceMajor(Number((259n << 8n) | 3n))).toBe(259);
    expect(parseSessionProperties("LockedHint=yes\nType=x11\n")).toEqual({ LockedHint: "yes", Type: "x11" });
  });
});
