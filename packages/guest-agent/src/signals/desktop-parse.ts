/**
 * Pure parts of the desktop signal: which input devices are a keyboard, a mouse or a tablet
 * (from the capability bitmaps in /sys/class/input/eventN/device/capabilities), and when the
 * last event in a buffer read from /dev/input/eventN happened. Which key, button or position
 * an event carries is never looked at: only its time and its type (to skip LED and sound
 * events the system itself writes to a keyboard).
 */
import { InputDeviceKind } from "@ws/protocol";

/** struct input_event on 64-bit Linux: struct timeval (2 × 8 bytes), type, code (u16), value (s32). */
export const INPUT_EVENT_BYTES = 24;

// linux/input-event-codes.h
const EV_KEY = 0x01;
const EV_REL = 0x02;
const EV_ABS = 0x03;
const EV_LED = 0x11;
const EV_SND = 0x12;
const EV_FF = 0x15;
const EV_PWR = 0x16;
const EV_FF_STATUS = 0x17;
const REL_X = 0x00;
const ABS_X = 0x00;
const KEY_Q = 16;
const KEY_P = 25;
const BTN_LEFT = 0x110;
const BTN_TOUCH = 0x14a;

/** Types the system writes to a device (LEDs, beeps, force feedback) rather than a person's input. */
const NOT_INPUT = new Set([EV_LED, EV_SND, EV_FF, EV_PWR, EV_FF_STATUS]);

/**
 * A capabilities file: space-separated hex words (unsigned long, most significant first), as
 * the kernel prints a bitmap. Returns the set bit numbers. Pure; malformed input gives none.
 */
export function parseCapabilityBitmap(text: string): Set<number> {
  const bits = new Set<number>();
  const words = text
    .trim()
    .split(/\s+/)
    .filter((word) => word !== "");
  if (words.some((word) => !/^[0-9a-f]{1,16}$/i.test(word))) return bits;
  words.reverse().forEach((word, index) => {
    let value = BigInt(`0x${word}`);
    for (let bit = 0; value > 0n; bit++, value >>= 1n) if (value & 1n) bits.add(index * 64 + bit);
  });
  return bits;
}

export interface DeviceCapabilities {
  ev: Set<number>;
  key: Set<number>;
  rel: Set<number>;
  abs: Set<number>;
}

/**
 * What a person would call the device: a keyboard has letter keys, a mouse moves relatively,
 * a tablet (QEMU's usb-tablet, what VNC clients drive) absolutely with a button or touch.
 * Anything else (power button, lid switch, PC speaker) is not a person's input. Pure.
 */
export function classifyInputDevice(caps: DeviceCapabilities): InputDeviceKind | undefined {
  if (caps.ev.has(EV_ABS) && caps.abs.has(ABS_X) && (caps.key.has(BTN_LEFT) || caps.key.has(BTN_TOUCH)))
    return InputDeviceKind.TABLET;
  if (caps.ev.has(EV_REL) && caps.rel.has(REL_X)) return InputDeviceKind.MOUSE;
  if (caps.ev.has(EV_KEY)) {
    for (let key = KEY_Q; key <= KEY_P; key++) if (caps.key.has(key)) return InputDeviceKind.KEYBOARD;
  }
  return undefined;
}

/**
 * The wall time (ms) of the last input event in `buffer` (whole events only), or undefined when
 * it holds none. Pure. The kernel stamps events with CLOCK_REALTIME unless a reader asked
 * otherwise; the caller bounds the result by when it last read, so a clock step cannot make an
 * age from it.
 */
export function lastInputEventMs(buffer: Buffer, length = buffer.length): number | undefined {
  let last: number | undefined;
  for (let offset = 0; offset + INPUT_EVENT_BYTES <= length; offset += INPUT_EVENT_BYTES) {
    const type = buffer.readUInt16LE(offset + 16);
    if (NOT_INPUT.has(type)) continue;
    const seconds = Number(buffer.readBigInt64LE(offset));
    const micros = Number(buffer.readBigInt64LE(offset + 8));
    last = seconds * 1000 + micros / 1000;
  }
  return last;
}

/** The age of input read now, given its event time, bounded to the time since the previous read. Pure. */
export function boundedInputAgeMs(
  eventWallMs: number | undefined,
  nowWallMs: number,
  sincePreviousReadMs: number,
): number {
  const window = Math.max(0, sincePreviousReadMs);
  if (eventWallMs === undefined || !Number.isFinite(eventWallMs)) return window;
  return Math.min(window, Math.max(0, nowWallMs - eventWallMs));
}

/** Linux dev_t → major number (new encoding, as glibc's gnu_dev_major). */
export function deviceMajor(rdev: number): number {
  return Number(((BigInt(rdev) >> 8n) & 0xfffn) | ((BigInt(rdev) >> 32n) & ~0xfffn));
}

/** The input subsystem's character-device major (evdev nodes are 13:64 and up). */
export const INPUT_MAJOR = 13;

/** `logind` LockedHint as `loginctl show-session -p LockedHint -p Type -p Active` prints it: "Type=x11\nActive=yes\nLockedHint=yes". Pure. */
export function parseSessionProperties(text: string): Record<string, string> {
  const properties: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) properties[line.slice(0, at)] = line.slice(at + 1).trim();
  }
  return properties;
}
