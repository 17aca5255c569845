// The policy for errors nobody handled: a rejection is logged with its context, counted and
// survived; an uncaught exception is logged, counted and ends the process with 70 for a restart.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { installUnhandledErrorPolicy, UNCAUGHT_EXCEPTION_EXIT_CODE } from "../src/unhandled.js";

function harness() {
  const target = new EventEmitter() as unknown as Pick<NodeJS.Process, "on" | "off"> & EventEmitter;
  const lines: Array<{ level: string; message: string; fields: Record<string, unknown> | undefined }> = [];
  const exits: number[] = [];
  const counts = { rejection: 0, exception: 0 };
  const remove = installUnhandledErrorPolicy({
    log: (level, message, fields) => lines.push({ level, message, fields }),
    counts,
    exit: (code) => exits.push(code),
    target,
  });
  return { target, lines, exits, counts, remove };
}

describe("installUnhandledErrorPolicy", () => {
  it("logs and counts an unhandled rejection with its stack, and keeps the process", () => {
    const h = harness();
    h.target.emit("unhandledRejection", new TypeError("Invalid URL"));
    h.target.emit("unhandledRejection", "a string reason");
    expect(h.counts).toEqual({ rejection: 2, exception: 0 });
    expect(h.exits).toEqual([]);
    expect(h.lines[0]).toMatchObject({ level: "error", fields: { kind: "rejection", total: 1 } });
    expect(String(h.lines[0]!.fields!.error)).toMatch(/^TypeError: Invalid URL\n\s+at /);
    expect(h.lines[1]!.fields!.error).toBe("a string reason");
  });

  it("logs and counts an uncaught exception, then exits with 70 so the supervisor restarts", () => {
    const h = harness();
    h.target.emit("uncaughtException", new RangeError("broken invariant"), "uncaughtException");
    expect(h.counts).toEqual({ rejection: 0, exception: 1 });
    expect(h.exits).toEqual([UNCAUGHT_EXCEPTION_EXIT_CODE]);
    expect(UNCAUGHT_EXCEPTION_EXIT_CODE).toBe(70);
    expect(h.lines[0]!.message).toMatch(/exiting with 70/);
    expect(h.lines[0]!.fields).toMatchObject({ kind: "exception", origin: "uncaughtException" });
  });

  it("bounds what it logs, and can be removed", () => {
    const h = harness();
    h.target.emit("unhandledRejection", new Error("x".repeat(100_000)));
    expect(String(h.lines[0]!.fields!.error).length).toBeLessThan(2100);
    h.remove();
    expect(h.target.listenerCount("unhandledRejection")).toBe(0);
    expect(h.target.listenerCount("uncaughtException")).toBe(0);
  });
});
