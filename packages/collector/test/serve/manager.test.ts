// The composition root's Manager (serve/manager.ts): start in the order registered, readiness,
// stop in reverse order, and a runnable that fails to start stops the ones already started.
import { describe, expect, it } from "vitest";
import type { Runnable } from "../../src/lib/runnable.js";
import { Manager } from "../../src/serve/manager.js";

/** A runnable that writes "start NAME" and "stop NAME" to `journal`. */
function recorded(name: string, journal: string[], options: { fail?: boolean; ready?: () => boolean } = {}): Runnable {
  return {
    name,
    async start() {
      await Promise.resolve();
      if (options.fail) throw new Error(`${name} cannot listen: EADDRINUSE`);
      journal.push(`start ${name}`);
      return async () => {
        await Promise.resolve();
        journal.push(`stop ${name}`);
      };
    },
    ...(options.ready ? { ready: options.ready } : {}),
  };
}

describe("Manager", () => {
  it("starts in the order registered and stops in reverse order", async () => {
    const journal: string[] = [];
    const manager = new Manager();
    for (const name of ["list-watch", "elector", "agent listener", "web listener"])
      manager.add(recorded(name, journal));
    await manager.start();
    expect(manager.running()).toEqual(["list-watch", "elector", "agent listener", "web listener"]);
    await manager.stop();
    expect(journal).toEqual([
      "start list-watch",
      "start elector",
      "start agent listener",
      "start web listener",
      "stop web listener",
      "stop agent listener",
      "stop elector",
      "stop list-watch",
    ]);
    expect(manager.running()).toEqual([]);
    await manager.stop(); // a second stop (SIGTERM then SIGINT) stops nothing twice
    expect(journal.filter((line) => line.startsWith("stop"))).toHaveLength(4);
  });

  it("a runnable that fails to start stops the ones already started and rethrows its error", async () => {
    const journal: string[] = [];
    const logged: string[] = [];
    const manager = new Manager((_level, message) => logged.push(message));
    manager.add(recorded("list-watch", journal));
    manager.add(recorded("elector", journal));
    manager.add(recorded("agent listener", journal, { fail: true }));
    manager.add(recorded("web listener", journal));
    await expect(manager.start()).rejects.toThrow("agent listener cannot listen: EADDRINUSE");
    expect(journal).toEqual(["start list-watch", "start elector", "stop elector", "stop list-watch"]);
    expect(logged).toEqual(["agent listener failed to start: agent listener cannot listen: EADDRINUSE"]);
    expect(manager.ready()).toBe(false);
  });

  it("is ready while the started runnables say so, and not once stopping", async () => {
    const journal: string[] = [];
    let synced = false;
    const manager = new Manager();
    expect(manager.ready()).toBe(false);
    let readyWhenListening: boolean | undefined;
    manager.add(recorded("inventory", journal, { ready: () => synced }));
    manager.add({
      name: "web listener",
      start() {
        // What answers /readyz runs after the parts it needs: it sees the manager as they are.
        readyWhenListening = manager.ready();
        return undefined;
      },
    });
    synced = true;
    await manager.start();
    expect(readyWhenListening).toBe(true);
    expect(manager.ready()).toBe(true);
    synced = false;
    expect(manager.ready()).toBe(false);
    synced = true;
    const stopping = manager.stop();
    expect(manager.ready()).toBe(false);
    await stopping;
    expect(manager.ready()).toBe(false);
  });

  it("a stop that throws is logged and the others still stop", async () => {
    const journal: string[] = [];
    const logged: string[] = [];
    const manager = new Manager((_level, message) => logged.push(message));
    manager.add(recorded("first", journal));
    manager.add({
      name: "flaky",
      start: () => () => {
        throw new Error("socket already closed");
      },
    });
    manager.add(recorded("last", journal));
    await manager.start();
    await manager.stop();
    expect(journal).toEqual(["start first", "start last", "stop last", "stop first"]);
    expect(logged).toEqual(["flaky did not stop cleanly: socket already closed"]);
  });

  it("refuses a runnable added after the start", async () => {
    const manager = new Manager();
    await manager.start();
    expect(() => manager.add(recorded("late", []))).toThrow("cannot add late: the manager has started");
  });
});
