/**
 * The home scan the Jupyter and code-server signals share: homes listed once per sample whichever
 * signal asks, and the walks below them remembered from one sample to the next.
 */
import { chown, mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import { RACY_MS } from "../../src/fs/user-path-cache.js";
import type { Roots } from "../../src/roots.js";
import { createCodeServerSignal } from "../../src/signals/code-server.js";
import { createHomeScan } from "../../src/signals/home-scan.js";
import { createJupyterSignal } from "../../src/signals/jupyter.js";
import type { SignalContext } from "../../src/signals/types.js";
import { loadUsers } from "../../src/users.js";

describe("home scan shared by the Jupyter and code-server signals", () => {
  let scratch: string;
  let roots: Roots;

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), "ws-home-scan-"));
    const machine = path.join(scratch, "machine");
    roots = {
      proc: "/proc",
      sys: "/sys",
      dev: "/dev",
      run: path.join(machine, "run"),
      home: path.join(machine, "home"),
      etc: path.join(machine, "etc"),
      state: path.join(machine, "state"),
    };
    await mkdir(roots.etc, { recursive: true });
    const passwd = ["root:x:0:0:root:/root:/bin/bash"];
    for (const [index, name] of ["ann", "ben", "cat"].entries()) {
      const uid = 3000 + index;
      passwd.push(`${name}:x:${uid}:${uid}::/home/${name}:/bin/bash`);
      const home = path.join(roots.home, name);
      await mkdir(path.join(home, ".local", "share"), { recursive: true });
      for (const dir of [home, path.join(home, ".local"), path.join(home, ".local", "share")])
        await chown(dir, uid, uid);
    }
    await writeFile(path.join(roots.etc, "passwd"), `${passwd.join("\n")}\n`);
    // ben runs code-server: a heartbeat a minute old.
    const codeServer = path.join(roots.home, "ben", ".local", "share", "code-server");
    await mkdir(codeServer);
    await chown(codeServer, 3001, 3001);
    await writeFile(path.join(codeServer, "heartbeat"), "");
    await chown(path.join(codeServer, "heartbeat"), 3001, 3001);
  });

  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  async function contextAt(nowMs: number): Promise<SignalContext> {
    return { roots, clock: manualClock(nowMs), users: await loadUsers(roots), signal: new AbortController().signal };
  }

  it("lists the homes once per sample for both signals, and again for the next sample", async () => {
    const scan = createHomeScan();
    const ctx = await contextAt(Date.now());
    const [first, second] = await Promise.all([scan.sample(ctx), scan.sample(ctx)]);
    expect(first.homes.homes).toBe(second.homes.homes);
    expect(first.homes.homes.map((home) => home.name)).toEqual(["ann", "ben", "cat", "root"]);
    // Each signal adds its own problems to its own list.
    expect(first.homes.problems).not.toBe(second.homes.problems);
    const next = await scan.sample(await contextAt(Date.now() + 15_000));
    expect(next.homes.homes).not.toBe(first.homes.homes);
  });

  it("walks each home once, then answers from the walks remembered while nothing changes", async () => {
    const scan = createHomeScan();
    const jupyter = createJupyterSignal({ urls: [], timeoutMs: 1_000, homes: scan });
    const codeServer = createCodeServerSignal(scan);
    // Samples well after the tree was made: its stamps are old enough to be trusted.
    const start = Date.now() + 10 * RACY_MS;
    const heartbeat = path.join(roots.home, "ben", ".local", "share", "code-server", "heartbeat");
    for (let sample = 0; sample < 3; sample++) {
      const ctx = await contextAt(start + sample * 15_000);
      // code-server touches the heartbeat in place: the age must follow it although the walk is remembered.
      const touched = new Date(Math.floor((start + sample * 15_000) / 1000) * 1000 - 60_000);
      await utimes(heartbeat, touched, touched);
      const [found, beats] = await Promise.all([jupyter.collect(ctx), codeServer.collect(ctx)]);
      expect(found.state).toBe("absent");
      expect(beats).toMatchObject({
        state: "ok",
        value: { instances: [{ user: "ben", heartbeatAgeSeconds: ((start + sample * 15_000) % 1000) / 1000 + 60 }] },
      });
    }
    // 4 homes (/root among them: absent here) and 2 signals: 8 walks, made in the first sample only.
    expect(scan.cache.counts).toEqual({ walked: 8, remembered: 16 });
  });
});
